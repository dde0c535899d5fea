"""Atomic file writes and checkpoint folders.

A checkpoint folder is written under a temporary name and renamed into place, so
a run killed at any moment leaves either the previous checkpoint or the new one,
never half of one.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path


def atomic_write_text(path: Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_json(path: Path, obj) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def append_jsonl(path: Path, obj) -> None:
    """Append one JSON line; a single write() of a full line, flushed and synced."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(obj, sort_keys=True) + "\n"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())


class AtomicDir:
    """Context manager: write into ``<final>.tmp-<pid>``, rename onto ``final`` on success.

    An existing ``final`` is replaced (moved aside first, then deleted).
    """

    def __init__(self, final: Path):
        self.final = Path(final)
        self.tmp = self.final.with_name(f".{self.final.name}.tmp-{os.getpid()}")

    def __enter__(self) -> Path:
        if self.tmp.exists():
            shutil.rmtree(self.tmp)
        self.tmp.mkdir(parents=True)
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            return False
        old = self.final.with_name(f".{self.final.name}.old-{os.getpid()}")
        if self.final.exists():
            os.replace(self.final, old)
        os.replace(self.tmp, self.final)
        if old.exists():
            shutil.rmtree(old, ignore_errors=True)
        return False


def latest_checkpoint(output_dir: Path) -> Path | None:
    """The newest complete ``checkpoint-<step>`` folder in ``output_dir`` (None if there is none)."""
    output_dir = Path(output_dir)
    best, best_step = None, -1
    for p in output_dir.glob("checkpoint-*"):
        try:
            step = int(p.name.split("-", 1)[1])
        except ValueError:
            continue
        if (p / "trainer_state.json").is_file() and step > best_step:
            best, best_step = p, step
    return best
