"""Checks of the files and folders a command reads and writes, made before any model loads or any work starts.

Each check raises [`UserError`][structattn.errors.UserError] with one line naming the flag, the path and what to do:

* an input file must exist, be a file (not a folder) and be readable; ``-`` (or None) is standard input;
* an input folder must exist and be a folder;
* an output file's folder must exist (it is not created: a mistyped folder would otherwise swallow the
  result) and be writable, and the path must not be a folder; ``-`` (or None) is standard output;
* an output folder (a trainer's ``--output-dir``) may not exist yet, but must not be a file, and the nearest
  folder above it that exists must be writable (the trainer creates the rest).
"""
from __future__ import annotations

import os
from pathlib import Path

from .errors import UserError

#: What stands for standard input or output on the command line.
STANDARD_STREAM = "-"


def _is_stream(path: str | os.PathLike | None) -> bool:
    return path is None or str(path) == STANDARD_STREAM


def check_input_file(path: str | os.PathLike | None, flag: str) -> str | None:
    """``path`` unchanged once it names a readable file (or standard input)."""
    if _is_stream(path):
        return path
    file = Path(path)
    if not file.exists():
        raise UserError(f"{flag}: input file {path} does not exist; check the path")
    if file.is_dir():
        raise UserError(f"{flag}: input {path} is a folder, not a file; give a file")
    if not os.access(file, os.R_OK):
        raise UserError(f"{flag}: input file {path} cannot be read (permission denied)")
    return path


def check_input_folder(path: str | os.PathLike, flag: str) -> str:
    """``path`` unchanged once it names an existing folder."""
    folder = Path(path)
    if not folder.exists():
        raise UserError(f"{flag} {path}: no such folder; check the path")
    if not folder.is_dir():
        raise UserError(f"{flag} {path}: is a file; give a folder")
    return str(path)


def check_output_file(path: str | os.PathLike | None, flag: str) -> str | None:
    """``path`` unchanged once a file can be written there (or it is standard output)."""
    if _is_stream(path):
        return path
    file = Path(path)
    if file.is_dir():
        raise UserError(f"{flag} {path}: is a folder; give a file name (e.g. {file / 'output.txt'})")
    folder = file.parent
    if not folder.exists():
        raise UserError(f"{flag} {path}: the folder {folder} does not exist; create it (mkdir -p {folder}) or "
                        "choose another path")
    if not folder.is_dir():
        raise UserError(f"{flag} {path}: {folder} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK) or (file.exists() and not os.access(file, os.W_OK)):
        raise UserError(f"{flag} {path}: not writable ({_why_not_writable(folder)}); choose another path")
    return path


def _why_not_writable(folder: Path) -> str:
    """"read-only file system" when ``folder`` lies on one (os.access says no to root there too), else
    "permission denied"."""
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return "read-only file system"
    except (OSError, AttributeError):  # AttributeError: no statvfs on this platform
        pass
    return "permission denied"


def check_output_folder(path: str | os.PathLike, flag: str = "--output-dir") -> str:
    """``path`` unchanged once it is a folder, or can be made one, that this process can write in."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{flag} {path}: is a file; give a folder (it is created when missing)")
    existing = folder
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise UserError(f"{flag} {path}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"{flag} {path}: {existing} is not writable ({_why_not_writable(existing)}); choose another "
                        "folder")
    return str(path)
