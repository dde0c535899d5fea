"""One trainer per output folder: an OS file lock on ``<output_dir>/trainer.lock`` while a run trains.

Two trainers writing one ``--output-dir`` mix their checkpoints and settings (a folder can end with one run's
``settings.json`` beside the other's weights). `hold_output_dir` takes an exclusive, non-blocking
``filelock`` lock (``flock`` on POSIX) on the folder's ``trainer.lock``; a second trainer is refused at once with
one line naming the process that holds it (pid and command line, read from ``/proc/locks`` where Linux has it).
The operating system releases the lock when its process ends, however it ends (``kill -9`` included), so a
killed run never blocks the next one; the empty file stays. Only the main process of a multi-process run takes
it. Inside one process the lock is shared: trainers run one after another on one folder (a resume in the same
Python process) take it again.
"""
from __future__ import annotations

import os
import weakref
from pathlib import Path

from ..errors import UserError

LOCK_NAME = "trainer.lock"
_held: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # resolved lock path -> OutputDirLock


class OutputDirLock:
    """The lock of one output folder, held until `release` or until this object is collected."""

    def __init__(self, lock):
        self._lock = lock
        self._finalizer = weakref.finalize(self, lock.release, force=True)

    @property
    def locked(self) -> bool:
        return self._lock.is_locked

    def release(self) -> None:
        self._finalizer()


def hold_output_dir(output_dir: str | Path, create: bool = True) -> OutputDirLock | None:
    """Lock ``output_dir`` for this process (creating it; with ``create=False`` None when it does not exist);
    [`UserError`][structattn.errors.UserError] naming the holder when another process has it. Keep the returned object
    as long as the run writes to the folder."""
    from filelock import FileLock, Timeout

    folder = Path(output_dir)
    if not create and not folder.is_dir():
        return None
    folder.mkdir(parents=True, exist_ok=True)
    path = (folder / LOCK_NAME).resolve()
    held = _held.get(str(path))
    if held is not None and held.locked:
        return held
    lock = FileLock(str(path), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise UserError(f"{folder} is in use by a running trainer ({holder_description(path)}); wait for it to "
                        "finish, or give another --output-dir") from None
    held = OutputDirLock(lock)
    _held[str(path)] = held
    return held


def holder_description(path: Path) -> str:
    """``pid N: command line`` of the process holding an flock on ``path`` (from ``/proc/locks``), or what is
    known."""
    pid = _flock_holder(path)
    if pid is None:
        return f"another process holds {path}"
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        command = " ".join(part.decode("utf-8", "replace") for part in raw.split(b"\0") if part)
    except OSError:
        command = ""
    return f"pid {pid}: {command}" if command else f"pid {pid}"


def _flock_holder(path: Path) -> int | None:
    """The pid ``/proc/locks`` gives for an flock on ``path``'s inode (None without /proc or a match)."""
    try:
        st = os.stat(path)
        table = Path("/proc/locks").read_text()
    except OSError:
        return None
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in table.splitlines():
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 8662 fe:00:2146398 0 EOF" (a "->" after the number marks a waiter)
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == inode and fields[4].isdigit():
            return int(fields[4])
    return None
