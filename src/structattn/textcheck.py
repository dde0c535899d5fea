"""Control characters in text: the one check every reader of user text makes.

NUL and the other C0 control characters (U+0000-U+001F) except tab, line feed and carriage return are no part of
a sentence: spaCy turns a NUL into a word, a tokenizer into an unknown piece, and a model then parses or
translates garbage without a word of warning. Readers refuse them with ``FILE:LINE``
(`check_lines`, `check_text`, `check_json_text`); the benchmark readers whose published files
hold a few (CoLA's training set: a backspace in three sentences; STS-B's: a U+0012 in one) keep them as
published and count them on stderr (`note_control_lines`), so recorded results stay what they were.
"""
from __future__ import annotations

import re
import sys
from collections.abc import Iterable

from .errors import UserError

#: The refused characters: C0 controls but tab (U+0009), line feed (U+000A) and carriage return (U+000D).
CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f]")

#: The same characters escaped in JSON (``\\u0000``), after an even number of backslashes (an odd number
#: escapes the backslash itself).
_JSON_ESCAPED_CONTROL = re.compile(r"(?<!\\)(?:\\\\)*\\u00(?:0[0-8bBcCeEfF]|1[0-9a-fA-F])")

_NAMES = {0x00: "NUL", 0x07: "BEL", 0x08: "backspace", 0x0B: "vertical tab", 0x0C: "form feed", 0x1B: "ESC"}


def describe(char: str) -> str:
    """``"\\x00"`` -> ``"U+0000 (NUL)"``."""
    code = ord(char)
    return f"U+{code:04X}" + (f" ({_NAMES[code]})" if code in _NAMES else "")


def _refuse(where: str, line: int, column: int, char: str) -> UserError:
    return UserError(f"{where}:{line}: control character {describe(char)} at column {column}; text may hold "
                     "tab and line ends but no other control characters: remove it")


def check_lines(lines: Iterable[str], where: str, first: int = 1) -> None:
    """Raise [`UserError`][structattn.errors.UserError] ``WHERE:LINE: control character ...`` for the first line
    (numbered from ``first``) that holds a refused character."""
    for number, line in enumerate(lines, start=first):
        found = CONTROL.search(line)
        if found:
            raise _refuse(where, number, found.start() + 1, found.group())


def check_text(text: str, where: str, first: int = 1) -> None:
    """`check_lines` for a whole text (line numbers from ``first``, counted on ``\\n``)."""
    found = CONTROL.search(text)
    if found:
        start = text.rfind("\n", 0, found.start()) + 1
        raise _refuse(where, first + text.count("\n", 0, found.start()), found.start() - start + 1, found.group())


def check_json_text(text: str, where: str) -> None:
    """`check_text` for JSON source, which may also escape a refused character (``"a\\u0000b"``)."""
    check_text(text, where)
    found = _JSON_ESCAPED_CONTROL.search(text)
    if found:
        escape = found.group()[found.group().rfind("\\u"):]
        line = 1 + text.count("\n", 0, found.end())
        raise UserError(f"{where}:{line}: control character {describe(chr(int(escape[2:], 16)))} (written "
                        f"{escape}); text may hold tab and line ends but no other control characters: remove it")


def control_lines(lines: Iterable[str], first: int = 1) -> list[int]:
    """The numbers (from ``first``) of the lines that hold a refused character."""
    return [number for number, line in enumerate(lines, start=first) if CONTROL.search(line)]


def note_control_lines(lines: list[str], where: str) -> int:
    """Count (and name on stderr) the lines of a benchmark file that hold control characters, kept as published;
    returns the count."""
    numbers = control_lines(lines)
    if numbers:
        shown = ", ".join(map(str, numbers[:5])) + (", ..." if len(numbers) > 5 else "")
        print(f"note: {where}: {len(numbers)} line(s) hold control characters, kept as in the published file "
              f"(lines {shown})", file=sys.stderr)
    return len(numbers)
