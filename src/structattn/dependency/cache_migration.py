"""Reading the parse cache's format 2 (checksummed bucket files), once, into the SQLite store.

Format 2 (written before the store)::

    <directory>/v2/<namespace>/namespace.json   fingerprint, kind, options
    <directory>/v2/<namespace>/<b>.jsonl        line 1 a JSON header (format, version 2, namespace, fingerprint,
                                                kind, bucket); then ``<key> <check> <payload>`` per entry,
                                                ``check`` the first 16 hex digits of sha256(key + " " + payload)

Its keys are the store's keys (the same namespace ids and item hashes), so every intact entry is found again.
A bucket whose header does not match its namespace and an entry that fails its check are skipped (counted in
the log line); their items are parsed again when next asked for. When every namespace is read, the folder is
renamed to ``v2.migrated`` (``v2.migrated.2``, ... when format 2 is written and migrated again): never read again,
listed by ``structattn cache info`` and removed by ``structattn cache prune``.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("structattn.dependency.cache")

OLD_DIR = "v2"
MIGRATED_DIR = "v2.migrated"
_OLD_VERSION = 2
_KEY_LEN, _CHECK_LEN = 64, 16


@dataclass
class OldNamespace:
    """One format-2 namespace folder: its record and its intact entries."""

    id: str
    fingerprint: str | None
    kind: str | None
    options: dict
    last_used: float
    entries: dict[str, bytes] = field(default_factory=dict)  # key -> payload (JSON bytes)
    skipped: int = 0  # entries or whole buckets' entries that failed their checks


def read_old_namespaces(directory: Path, format_name: str) -> list[OldNamespace]:
    """Every namespace under ``directory/v2`` with its intact entries ([] when there is no such folder)."""
    root = Path(directory) / OLD_DIR
    if not root.is_dir():
        return []
    return [_read_namespace(folder, format_name) for folder in sorted(root.iterdir()) if folder.is_dir()]


def mark_migrated(directory: Path) -> None:
    """Rename ``v2`` to ``v2.migrated``, or to ``v2.migrated.2``, ``.3``, ... when an earlier migration's folder is
    there (an older structattn sharing the cache wrote format 2 again); another process may have done it already."""
    old = Path(directory) / OLD_DIR
    for n in itertools.count(1):
        target = Path(directory) / (MIGRATED_DIR if n == 1 else f"{MIGRATED_DIR}.{n}")
        if target.exists():
            continue
        try:
            os.rename(old, target)
        except FileNotFoundError:  # migrated by another process
            pass
        except OSError as exc:  # keep v2: it is read again (idempotently) next time
            log.warning("parse cache: could not rename %s (%s)", old, exc)
        return


def _read_namespace(folder: Path, format_name: str) -> OldNamespace:
    meta = folder / "namespace.json"
    try:
        record = json.loads(meta.read_text(encoding="utf-8"))
        record = record if isinstance(record, dict) else {}
        last_used = meta.stat().st_mtime
    except (OSError, ValueError):
        record, last_used = {}, folder.stat().st_mtime
    ns = OldNamespace(folder.name, record.get("fingerprint"), record.get("kind"), record.get("options") or {},
                      last_used)
    for bucket in sorted(folder.glob("*.jsonl")):
        expected = {"format": format_name, "version": _OLD_VERSION, "namespace": ns.id,
                    "fingerprint": ns.fingerprint, "kind": ns.kind, "bucket": bucket.stem}
        try:
            data = bucket.read_bytes()
        except OSError:
            continue
        header, _, body = data.partition(b"\n")
        lines = [line for line in body.split(b"\n") if line]
        if _header(header) != expected:
            ns.skipped += len(lines)
            continue
        for line in lines:
            entry = _split_entry(line)
            if entry is None:
                ns.skipped += 1
            else:
                ns.entries[entry[0]] = entry[1]
    return ns


def _header(line: bytes) -> dict | None:
    try:
        header = json.loads(line)
    except ValueError:
        return None
    return header if isinstance(header, dict) else None


def _split_entry(line: bytes) -> tuple[str, bytes] | None:
    """(key, payload) of an entry line, or None when it is malformed or fails its check."""
    body = _KEY_LEN + _CHECK_LEN + 2
    if len(line) <= body or line[_KEY_LEN:_KEY_LEN + 1] != b" " or line[body - 1:body] != b" ":
        return None
    key, payload = line[:_KEY_LEN], line[body:]
    if hashlib.sha256(key + b" " + payload).hexdigest()[:_CHECK_LEN].encode("ascii") != line[_KEY_LEN + 1:body - 1]:
        return None
    return key.decode("ascii"), payload
