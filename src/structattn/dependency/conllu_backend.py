"""Gold dependency trees from CoNLL-U files (read with the ``conllu`` library, streaming).

Only the basic tree is read. Multiword-token lines (ids like ``3-4``) and empty nodes
(ids like ``5.1``) are skipped: the words of a [`Parse`][structattn.dependency.record.Parse] are the integer-id tokens
and heads refer to those ids. ``sent_id`` comes from the ``# sent_id = ...`` comment, else it is
the running sentence number (from 1) in the file.

Every tree is validated; a missing head (``_``), a head out of range, two roots or a cycle raise
[`ParseError`][structattn.dependency.record.ParseError] naming the file, the sentence id and the line where the sentence
(or the offending token) starts. A malformed file is a [`ParseError`][structattn.dependency.record.ParseError] naming
the file and line too: bytes that are not UTF-8, a word line without exactly 10 columns, a block of comments without
words, and a file without any sentence. A UTF-8 byte order mark at the start is accepted.
"""
from __future__ import annotations

import io
import re
from collections import deque
from collections.abc import Iterator
from pathlib import Path

import conllu
from conllu.exceptions import ParseException

from ..errors import UserError
from ..textcheck import check_lines
from .record import Parse, ParseError

N_COLUMNS = 10  # ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC
# How ``conllu`` splits a word line into columns (a tab, or two or more spaces); counting with the
# same rule means the check sees exactly the columns the parser will read.
_COLUMN_SEPARATOR = re.compile(r"\t| {2,}")


class _LineTracker:
    """Iterate a file's lines for ``conllu`` while checking them and recording where each sentence
    block starts.

    Lines may be ``bytes`` (decoded here, so a non-UTF-8 byte is reported on its own line) or ``str``.
    ``conllu`` splits sentences at blank lines; a block is a run of non-blank lines. For each block
    this keeps ``(first line number, number of comment lines)``; the parser reads the blank line
    after a block before it yields that sentence, so the queue's head is the sentence just yielded.
    """

    def __init__(self, lines, source: str):
        self._lines = iter(lines)
        self.source = source
        self.line_no = 0
        self.blocks: deque[tuple[int, int]] = deque()
        self._in_block = False

    def __iter__(self):
        return self

    def __next__(self) -> str:
        line = self._next_text()
        if line.strip() == "":
            self._in_block = False
        else:
            if not self._in_block:
                self.blocks.append((self.line_no, 0))
                self._in_block = True
            if line.startswith("#"):
                start, comments = self.blocks[-1]
                self.blocks[-1] = (start, comments + 1)
            else:
                self._check_columns(line)
        return line

    def _next_text(self) -> str:
        try:
            line = next(self._lines)
        except UnicodeDecodeError as exc:  # a text handle decodes in chunks: only "after line N" is known
            raise ParseError(f"{self.source}: not UTF-8 after line {self.line_no} ({exc}); "
                             "CoNLL-U files must be UTF-8") from None
        self.line_no += 1
        if isinstance(line, bytes):
            try:
                line = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ParseError(f"{self.source}: line {self.line_no}: not UTF-8 (byte 0x{line[exc.start]:02x} "
                                 f"at byte {exc.start + 1} of the line); CoNLL-U files must be UTF-8 "
                                 "(convert it, e.g. iconv -f latin1 -t utf-8)") from None
        check_lines([line.rstrip("\r\n")], self.source, first=self.line_no)
        return line.removeprefix("\ufeff") if self.line_no == 1 else line

    def _check_columns(self, line: str) -> None:
        n = len(_COLUMN_SEPARATOR.split(line.strip()))
        if n != N_COLUMNS:
            raise ParseError(f"{self.source}: line {self.line_no}: {n} column{'s' if n != 1 else ''}, a CoNLL-U "
                             f"word line needs {N_COLUMNS} separated by tabs "
                             "(ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC; '_' for an empty field)")

    def read(self, *args):  # parse_incr only checks that the attribute exists
        raise io.UnsupportedOperation("read line by line")


def iter_conllu(handle, source: str = "<string>") -> Iterator[Parse]:
    """Stream validated [`Parse`][structattn.dependency.record.Parse] records from an open handle (text, or binary
    holding UTF-8); ``source`` names it in errors. A handle without any sentence is a
    [`ParseError`][structattn.dependency.record.ParseError]."""
    tracker = _LineTracker(handle, source)
    sentences = iter(conllu.parse_incr(tracker))
    number = 0
    while True:
        try:
            tokenlist = next(sentences)
        except StopIteration:
            if number == 0:
                raise ParseError(f"{source}: no sentences ({tracker.line_no} lines, none of them a word line); "
                                 "is it the right file?") from None
            return
        except ParseException as exc:
            line = tracker.blocks[0][0] if tracker.blocks else tracker.line_no
            raise ParseError(f"{source}: sentence {number + 1} starting at line {line}: "
                             f"not valid CoNLL-U: {exc}") from exc
        number += 1
        start, comments = tracker.blocks.popleft() if tracker.blocks else (tracker.line_no, 0)
        yield _to_parse(tokenlist, number, source, start, comments)


def _to_parse(tokenlist, number: int, source: str, start: int, comments: int) -> Parse:
    sent_id = str(tokenlist.metadata.get("sent_id", "")).strip() or str(number)
    where = f"{source}: sentence {sent_id!r} (line {start})"
    words, heads, deprels, upos = [], [], [], []
    for offset, token in enumerate(tokenlist):
        tid = token["id"]
        if not isinstance(tid, int):  # (3, '-', 4) multiword token or (5, '.', 1) empty node
            continue
        line = start + comments + offset
        if tid != len(words) + 1:
            raise ParseError(f"{where}: line {line}: word id {tid} out of order, expected {len(words) + 1}")
        head = token["head"]
        if head is None:
            raise ParseError(f"{where}: line {line}: word {tid} ({token['form']!r}) has no head ('_')")
        if not isinstance(head, int):
            raise ParseError(f"{where}: line {line}: head of word {tid} is not an integer ({head!r})")
        words.append(token["form"])
        heads.append(head)
        deprels.append(token["deprel"] if token["deprel"] not in (None, "_") else "")
        upos.append(token["upos"] if token["upos"] not in (None, "_") else "")
    if not words:
        raise ParseError(f"{where}: no words, only comment lines; a sentence needs at least one word line")
    record = Parse(words, heads, deprels, upos, sent_id)
    try:
        record.validate()
    except ParseError as exc:
        raise ParseError(f"{source} (sentence starting at line {start}): {exc}") from None
    return record


def read_conllu(path: str | Path) -> list[Parse]:
    """All sentences of a CoNLL-U file as validated [`Parse`][structattn.dependency.record.Parse] records (streamed
    while reading)."""
    path = Path(path)
    try:
        handle = open(path, "rb")  # bytes: each line is decoded on its own, so errors name the exact line
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror})") from None
    with handle:
        return list(iter_conllu(handle, source=str(path)))


def parse_conllu_string(text: str, source: str = "<string>") -> list[Parse]:
    """Like `read_conllu` for CoNLL-U held in a string."""
    return list(iter_conllu(io.StringIO(text), source=source))
