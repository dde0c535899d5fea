"""Reader for NLTK's dependency version of the PTB WSJ sample (``dependency_treebank/wsj_*.dp``).

Format: one word per line, ``word<TAB>PTB tag<TAB>head`` with 1-based heads and 0 for the root,
a blank line between sentences. The files carry no dependency labels, so ``deprels`` are ``""``.
UPOS is mapped from the PTB tag with `PTB_TO_UPOS` (the usual PTB->UD correspondence;
tags it does not list become ``X``). Sentence ids are ``"<file name>#<sentence number from 1>"``.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..textcheck import check_lines
from .record import Parse, ParseError

# PTB tag -> UD UPOS. Many-to-one and context-free, so it is an approximation: UD would tag some
# TO/RP/WDT tokens differently depending on their role, and MD is always AUX here.
PTB_TO_UPOS = {
    "CC": "CCONJ", "CD": "NUM", "DT": "DET", "EX": "PRON", "FW": "X", "IN": "ADP",
    "JJ": "ADJ", "JJR": "ADJ", "JJS": "ADJ", "LS": "X", "MD": "AUX",
    "NN": "NOUN", "NNS": "NOUN", "NNP": "PROPN", "NNPS": "PROPN",
    "PDT": "DET", "POS": "PART", "PRP": "PRON", "PRP$": "PRON",
    "RB": "ADV", "RBR": "ADV", "RBS": "ADV", "RP": "ADP", "SYM": "SYM", "TO": "PART", "UH": "INTJ",
    "VB": "VERB", "VBD": "VERB", "VBG": "VERB", "VBN": "VERB", "VBP": "VERB", "VBZ": "VERB",
    "WDT": "PRON", "WP": "PRON", "WP$": "PRON", "WRB": "ADV",
    "$": "SYM", "#": "SYM",
    ",": "PUNCT", ".": "PUNCT", ":": "PUNCT", "``": "PUNCT", "''": "PUNCT",
    "-LRB-": "PUNCT", "-RRB-": "PUNCT", "HYPH": "PUNCT", "NFP": "PUNCT",
    "ADD": "X", "AFX": "ADJ", "GW": "X", "XX": "X", "-NONE-": "X",
}


def ptb_to_upos(tag: str) -> str:
    """UPOS for a PTB tag (``X`` for a tag not in `PTB_TO_UPOS`)."""
    return PTB_TO_UPOS.get(tag, "X")


def iter_ptb_dependency_file(path: str | Path) -> Iterator[Parse]:
    """Stream the validated sentences of one ``.dp`` file."""
    path = Path(path)
    rows: list[tuple[str, str, int]] = []
    first_line = 0
    number = 0

    def finish() -> Parse:
        words = [r[0] for r in rows]
        record = Parse(words, [r[2] for r in rows], [""] * len(rows), [ptb_to_upos(r[1]) for r in rows],
                       f"{path.name}#{number}")
        try:
            return record.validate()
        except ParseError as exc:
            raise ParseError(f"{path} (sentence starting at line {first_line}): {exc}") from None

    with open(path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            line = line.rstrip("\r\n")
            check_lines([line], str(path), first=line_no)
            if line.strip() == "":
                if rows:
                    yield finish()
                    rows = []
                continue
            if not rows:
                number += 1
                first_line = line_no
            fields = line.split("\t")
            if len(fields) != 3:
                raise ParseError(f"{path}: line {line_no}: expected 'word<TAB>tag<TAB>head', "
                                 f"got {len(fields)} fields: {line[:60]!r}")
            word, tag, head = fields
            try:
                head_int = int(head)
            except ValueError:
                raise ParseError(f"{path}: line {line_no}: sentence {path.name}#{number}: "
                                 f"head {head!r} of word {word!r} is not an integer") from None
            rows.append((word, tag, head_int))
    if rows:
        yield finish()


def read_ptb_dependency(path_or_dir: str | Path) -> list[Parse]:
    """Sentences of one ``.dp`` file, or of every ``*.dp`` file in a folder (sorted by name)."""
    path = Path(path_or_dir)
    if path.is_dir():
        files = sorted(path.glob("*.dp"))
        if not files:
            raise ParseError(f"{path}: no *.dp files in this folder")
    else:
        files = [path]
    return [parse for f in files for parse in iter_ptb_dependency_file(f)]
