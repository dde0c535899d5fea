"""Gold dependency trees from CoNLL-U files (read with the ``conllu`` library, streaming).

Only the basic tree is read. Multiword-token lines (ids like ``3-4``) and empty nodes
(ids like ``5.1``) are skipped: the words of a :class:`Parse` are the integer-id tokens
and heads refer to those ids. ``sent_id`` comes from the ``# sent_id = ...`` comment, else it is
the running sentence number (from 1) in the file.

Every tree is validated; a missing head (``_``), a head out of range, two roots or a cycle raise
:class:`ParseError` naming the file, the sentence id and the line where the sentence (or the
offending token) starts.
"""
from __future__ import annotations

import io
from collections import deque
from collections.abc import Iterator
from pathlib import Path

import conllu
from conllu.exceptions import ParseException

from .record import Parse, ParseError


class _LineTracker:
    """Iterate a text file's lines for ``conllu`` while recording where each sentence block starts.

    ``conllu`` splits sentences at blank lines; a block is a run of non-blank lines. For each block
    this keeps ``(first line number, number of comment lines)``; the parser reads the blank line
    after a block before it yields that sentence, so the queue's head is the sentence just yielded.
    """

    def __init__(self, lines):
        self._lines = iter(lines)
        self.line_no = 0
        self.blocks: deque[tuple[int, int]] = deque()
        self._in_block = False

    def __iter__(self):
        return self

    def __next__(self) -> str:
        line = next(self._lines)
        self.line_no += 1
        if line.strip() == "":
            self._in_block = False
        else:
            if not self._in_block:
                self.blocks.append((self.line_no, 0))
                self._in_block = True
            if line.startswith("#"):
                start, comments = self.blocks[-1]
                self.blocks[-1] = (start, comments + 1)
        return line

    def read(self, *args):  # parse_incr only checks that the attribute exists
        raise io.UnsupportedOperation("read line by line")


def iter_conllu(handle, source: str = "<string>") -> Iterator[Parse]:
    """Stream validated :class:`Parse` records from an open text handle; ``source`` names it in errors."""
    tracker = _LineTracker(handle)
    sentences = iter(conllu.parse_incr(tracker))
    number = 0
    while True:
        try:
            tokenlist = next(sentences)
        except StopIteration:
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
    record = Parse(words, heads, deprels, upos, sent_id)
    try:
        record.validate()
    except ParseError as exc:
        raise ParseError(f"{source} (sentence starting at line {start}): {exc}") from None
    return record


def read_conllu(path: str | Path) -> list[Parse]:
    """All sentences of a CoNLL-U file as validated :class:`Parse` records (streamed while reading)."""
    path = Path(path)
    with open(path, encoding="utf-8") as handle:
        return list(iter_conllu(handle, source=str(path)))


def parse_conllu_string(text: str, source: str = "<string>") -> list[Parse]:
    """Like :func:`read_conllu` for CoNLL-U held in a string."""
    return list(iter_conllu(io.StringIO(text), source=source))
