"""Text in and out (lowest layer: any module may use it).

* Writing is atomic: a file is written to a temporary name beside it, synced and renamed into place, so a
  process killed at any moment leaves the old file or the new one, never half of one. A full disk (``ENOSPC``,
  or a quota) removes the temporary file and raises `DiskFull`: one line naming the file, the space it
  needs and the space free (`is_disk_full` also recognises it inside torch's and safetensors' errors).
  Results lines (JSONL) are recorded by one function, `upsert_jsonl` (a line per key, replaced in place).
* Reading user text (`decode_lines`, `read_input_lines`): strict UTF-8, a leading byte-order mark
  dropped, lines split on ``\\n`` only; bytes that are not UTF-8 raise [`UserError`][structattn.errors.UserError]
  naming the file (or ``<stdin>``), the 1-based line and what to do; so do control characters (NUL and the other
  C0 controls but tab, `structattn.textcheck`). Commands that read text from a file or
  standard input (``parse``, ``translate``, ``score evalb -``) use these, so their messages agree.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from .errors import UserError
from .stopping import deferred
from .textcheck import check_lines

#: The name standard input has in messages (``<stdin>:3: ...``).
STDIN = "<stdin>"


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (module docstring), with the mode a plain ``open`` would give
    (``0o666`` less the umask; ``mkstemp`` alone gives ``0o600``). SIGINT and SIGTERM wait for the rename
    (`structattn.stopping.deferred`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8")
    with deferred():
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TMP_SUFFIX)
        try:
            try:
                os.fchmod(fd, 0o666 & ~current_umask())
                write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except BaseException as exc:
            if os.path.exists(tmp):
                os.unlink(tmp)
            if isinstance(exc, OSError) and is_disk_full(exc):
                raise DiskFull(disk_full_message(path, len(data))) from exc
            raise


#: the suffix of `atomic_write_text`'s temporary files: ``.<name>.<random>.tmp``
TMP_SUFFIX = ".tmp"


def remove_write_leftovers(folder: Path) -> list[Path]:
    """Delete the temporary files that killed `atomic_write_text` calls left in ``folder`` (not below it);
    the paths removed. Call it only while nothing writes there (a trainer holding its output folder's lock)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    removed = []
    for p in folder.glob(f".*{TMP_SUFFIX}"):
        if p.is_file() and p.name.count(".") >= 3:  # ".<name>.<random>.tmp": the name has at least one character
            p.unlink(missing_ok=True)
            removed.append(p)
    return removed


def current_umask() -> int:
    """This process's umask (from ``/proc/self/status`` where Linux has it; else set and put back at once)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_all(fd: int, data: bytes) -> None:
    """``os.write`` until every byte of ``data`` is written (a write may take only part of it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


# ---------------------------------------------------------------------------------------------- full disk
class DiskFull(UserError):
    """No space left (or over quota) while writing; the message names the path and the space needed."""


_DISK_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}
# how Rust's std::io (safetensors) and C's strerror spell ENOSPC inside other libraries' messages
_DISK_FULL_TEXTS = ("No space left on device", "os error 28", "Disk quota exceeded", "os error 122", "StorageFull")


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc``, or an exception it was raised from or during, is a full disk: an ``OSError`` with
    ``ENOSPC``/``EDQUOT`` (torch.save to a Python file raises RuntimeError "unexpected pos" *during* it), or a
    library's message saying so (safetensors)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, DiskFull) or (isinstance(exc, OSError) and exc.errno in _DISK_FULL_ERRNOS):
            return True
        if any(text in str(exc) for text in _DISK_FULL_TEXTS):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def free_bytes(path: Path) -> int | None:
    """Bytes free to this user on the device holding ``path`` (its nearest existing folder); None if unknown."""
    folder = Path(path)
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def megabytes(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


def disk_full_message(path: Path, needed: int, kept: str = "", *, at_least: bool = False) -> str:
    """One line: the path, the space it needs (``at_least``: only what was written before the disk filled is
    known), the space free now that the temporary files are gone, what was kept, what to do."""
    free = free_bytes(path)
    free_text = (f"{megabytes(free)} free there once the partial files were removed" if free is not None
                 else "free space unknown")
    size = f"more than {megabytes(needed)}" if at_least else f"about {megabytes(needed)}"
    return (f"no space left on the device writing {path}: it needs {size} ({free_text}); "
            f"the temporary files were removed{kept}. Free some space, or write to another folder")


def atomic_write_json(path: Path, obj) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def read_jsonl(path: Path, *, missing_ok: bool = False) -> list[dict]:
    """The objects of the JSON-lines file ``path`` (UTF-8), blank lines skipped; ``missing_ok``: [] for a file that
    does not exist (else FileNotFoundError)."""
    path = Path(path)
    if missing_ok and not path.is_file():
        return []
    return [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]


def upsert_jsonl(path: Path, record: dict, key: str | Callable[[dict], Any]) -> None:
    """Put ``record`` into the JSON-lines file ``path``, atomically: in place of the first line with the same key
    (later lines with that key dropped), else at the end. ``key``: a field name, or a function of a line's object.
    Every other line is kept as it is, byte for byte; the new line is written with sorted keys."""
    path = Path(path)
    key_of = (lambda obj: obj.get(key)) if isinstance(key, str) else key
    wanted = key_of(record)
    new = json.dumps(record, sort_keys=True)
    old = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()] if path.is_file() else []
    lines, placed = [], False
    for ln in old:  # a re-recorded run keeps its place; any older duplicate of it goes
        if key_of(json.loads(ln)) != wanted:
            lines.append(ln)
        elif not placed:
            lines.append(new)
            placed = True
    if not placed:
        lines.append(new)
    atomic_write_text(path, "".join(ln + "\n" for ln in lines))


# ---------------------------------------------------------------------------------------------- reading
def decode_lines(data: bytes, where: str, controls: str = "refuse") -> list[str]:
    """UTF-8 bytes -> lines: split on ``\\n`` only, a ``\\r`` before it and a leading BOM dropped, no extra line
    after the final terminator; empty input gives []. ``where`` names the source in the
    [`UserError`][structattn.errors.UserError] for bytes that are not UTF-8 (``<where>:<line>: not valid UTF-8 (byte
    0x.. at byte <col> of the line); ...``) and, with ``controls="refuse"``, for a control character
    (`structattn.textcheck.check_lines`); ``controls="keep"`` leaves them to the caller."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise UserError(f"{where}:{line}: not valid UTF-8 (byte 0x{data[exc.start]:02x} at byte {col} of the line); "
                        "mixed or legacy encodings are not accepted, re-save the file as UTF-8") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lines = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
    if controls == "refuse":
        check_lines(lines, where)
    return lines


def read_input_lines(path: str | None) -> tuple[str, list[str]]:
    """The lines of a command's text input: ``path``, or standard input when ``path`` is None or ``"-"``.

    Returns (the name to use in messages: ``path`` or `STDIN`, the lines as `decode_lines` gives
    them). Standard input is read as bytes (``sys.stdin.buffer``) so that bad bytes are reported, not replaced.

    Raises:
        UserError: the file is missing, a folder or unreadable, or the text is not UTF-8 (naming the line).
    """
    if path is None or path == "-":
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:  # stdin replaced by a text stream (notebooks, tests): already decoded
            return STDIN, decode_lines(sys.stdin.read().encode("utf-8", "surrogateescape"), STDIN)
        return STDIN, decode_lines(stream.read(), STDIN)
    file = Path(path)
    if not file.exists():
        raise UserError(f"input file {path} does not exist; check the path")
    if not file.is_file():
        raise UserError(f"input {path} is a folder, not a file; give a text file")
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read input file {path}: {exc.strerror}") from None
    return path, decode_lines(data, path)
