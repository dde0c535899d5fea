"""Text in and out (lowest layer: any module may use it).

* Writing is atomic: a file is written to a temporary name beside it, synced and renamed into place, so a
  process killed at any moment leaves the old file or the new one, never half of one. Results lines (JSONL)
  are recorded by one function, :func:`upsert_jsonl` (a line per key, replaced in place).
* Reading user text (:func:`decode_lines`, :func:`read_input_lines`): strict UTF-8, a leading byte-order mark
  dropped, lines split on ``\\n`` only; bytes that are not UTF-8 raise :class:`~structattn.errors.UserError`
  naming the file (or ``<stdin>``), the 1-based line and what to do. Commands that read text from a file or
  standard input (``parse``, ``translate``, ``score evalb -``) use these, so their messages agree.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from .errors import UserError

#: The name standard input has in messages (``<stdin>:3: ...``).
STDIN = "<stdin>"


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
def decode_lines(data: bytes, where: str) -> list[str]:
    """UTF-8 bytes -> lines: split on ``\\n`` only, a ``\\r`` before it and a leading BOM dropped, no extra line
    after the final terminator; empty input gives []. ``where`` names the source in the :class:`UserError` for
    bytes that are not UTF-8 (``<where>:<line>: not valid UTF-8 (byte 0x.. at byte <col> of the line); ...``)."""
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
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


def read_input_lines(path: str | None) -> tuple[str, list[str]]:
    """The lines of a command's text input: ``path``, or standard input when ``path`` is None or ``"-"``.

    Returns (the name to use in messages: ``path`` or :data:`STDIN`, the lines as :func:`decode_lines` gives
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
