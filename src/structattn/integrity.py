"""Whether the files of a checkpoint or model folder are intact (lowest layer): a manifest, and checks of form.

A damaged file (truncated by a full disk or a copy cut short, emptied, overwritten) must give one line naming it,
not a traceback from the library that parses it, and never weights read silently wrong. Two checks:

* `write_manifest` records each file's size and SHA-256 in ``manifest.json`` (the training engine writes
  one into every checkpoint, last, before the folder is committed); `folder_damage` compares them;
* without a manifest (a model folder saved by ``save_pretrained``, a shipped model), each file's form is checked (`file_damage`): a safetensors file's header must parse and its
  tensors must end where the file ends (a truncated copy is caught without reading the data), a JSON file must
  parse, a torch zip archive must list its members, a text file (a vocabulary) must be UTF-8; no file may be empty.
"""
from __future__ import annotations

import hashlib
import json
import struct
import zipfile
from pathlib import Path

MANIFEST = "manifest.json"
#: a model's description, rewritten beside its weights after they were saved (measurements): not in manifests
DESCRIPTIONS = ("card.json", "CARD.md")
_CHUNK = 1 << 20


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def write_manifest(folder: Path, **extra) -> None:
    """Record the size and SHA-256 of every file directly in ``folder`` but `DESCRIPTIONS` (and ``extra`` JSON
    values) in its ``manifest.json``."""
    from .io import atomic_write_json

    folder = Path(folder)
    files = {p.name: {"bytes": p.stat().st_size, "sha256": sha256(p)}
             for p in sorted(folder.iterdir()) if p.is_file() and p.name not in (MANIFEST, *DESCRIPTIONS)}
    atomic_write_json(folder / MANIFEST, {"files": files, **extra})


def read_manifest(folder: Path) -> dict | None:
    """The folder's manifest (None: it has none, or it cannot be read)."""
    try:
        manifest = json.loads((Path(folder) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and isinstance(manifest.get("files"), dict) else None


def folder_damage(folder: Path, required: tuple[str, ...] = ()) -> str | None:
    """What is wrong with ``folder``'s files (``"<file> is missing"``, ``"<file> has N bytes, M were written"``,
    ...), or None when they are intact: against the manifest when there is one (its damage is reported too),
    else by `file_damage`; every name in ``required`` must exist."""
    folder = Path(folder)
    for name in required:
        if not (folder / name).is_file():
            return f"{folder / name} is missing"
    manifest = read_manifest(folder)
    if manifest is None:
        if (folder / MANIFEST).exists():
            return f"{folder / MANIFEST} is damaged (not the JSON object it was written as)"
        for path in sorted(folder.iterdir()):
            problem = file_damage(path) if path.is_file() else None
            if problem:
                return problem
        return None
    for name, record in manifest["files"].items():
        path = folder / name
        if not path.is_file():
            return f"{path} is missing"
        size = path.stat().st_size
        if size != record.get("bytes"):
            return f"{path} has {size:,} bytes where {record.get('bytes', 0):,} were written (truncated or replaced)"
        if sha256(path) != record.get("sha256"):
            return f"{path} does not match the checksum recorded when it was written (its bytes were changed)"
    return None


def file_damage(path: Path) -> str | None:
    """What is wrong with the form of one file, by its suffix (None: nothing found; module docstring)."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size == 0:
            return f"{path} is empty"
        if path.suffix == ".safetensors":
            return _safetensors_damage(path, size)
        if path.suffix == ".json":
            json.loads(path.read_text(encoding="utf-8"))
        elif path.suffix == ".txt":  # a vocabulary
            path.read_bytes().decode("utf-8")
        elif path.suffix in (".pt", ".bin", ".pth"):
            if not zipfile.is_zipfile(path):
                return f"{path} is not a complete torch archive (truncated or replaced)"
            with zipfile.ZipFile(path) as archive:
                archive.infolist()
    except (ValueError, UnicodeDecodeError):
        return f"{path} is not valid {'JSON' if path.suffix == '.json' else 'UTF-8'} (truncated or replaced)"
    except (OSError, zipfile.BadZipFile) as exc:
        return f"{path} cannot be read ({getattr(exc, 'strerror', None) or exc})"
    return None


def _safetensors_damage(path: Path, size: int) -> str | None:
    """A safetensors file: 8 bytes of header length, the JSON header, then the tensors' bytes, which must end
    exactly where the file ends."""
    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            return f"{path} is truncated ({size} bytes: less than a safetensors header)"
        n = struct.unpack("<Q", head)[0]
        if n > size - 8:
            return f"{path} is truncated or not a safetensors file ({size:,} bytes; its header claims {n:,})"
        try:
            header = json.loads(fh.read(n).decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            return f"{path} is damaged (its safetensors header is not valid JSON)"
    ends = [v["data_offsets"][1] for k, v in header.items()
            if k != "__metadata__" and isinstance(v, dict) and "data_offsets" in v]
    if 8 + n + max(ends, default=0) != size:
        return (f"{path} is truncated or extended ({size:,} bytes where its header needs "
                f"{8 + n + max(ends, default=0):,})")
    return None
