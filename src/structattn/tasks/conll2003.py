"""CoNLL-2003 English named-entity recognition.

File format (``conll2003/{train,valid,test}.txt``, see its SOURCE.md)
----------------------------------------------------------------------
One token per line, four whitespace-separated columns ``word POS chunk NER``; a blank line ends a
sentence. ``-DOCSTART- -X- -X- O`` lines mark document starts; they are skipped and end the
current sentence. The NER column uses **IOB2** (every entity starts with ``B-``); the reader
rejects an ``I-X`` that does not continue an ``X`` entity, which is what an IOB1 file (the original
2003 release) would contain, because strict IOB2 scoring would silently drop such entities.

Only the word and NER columns are used: ``Example(words_a=words, words_b=None, label=tags)``.
Scores: entity-level micro precision/recall/F1, strict IOB2 (= seqeval strict = conlleval on
valid sequences); see `metrics`.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import UserError
from . import metrics
from .base import Example, TaskSpec, iter_blocks, read_lines

ENTITY_TYPES = ("PER", "ORG", "LOC", "MISC")
LABELS = ("O",) + tuple(f"{p}-{t}" for t in ENTITY_TYPES for p in ("B", "I"))


def _is_docstart(line: str) -> bool:
    return line.split(maxsplit=1)[0] == "-DOCSTART-"


def read_conll_ner(path: Path, spec: TaskSpec, split: str, name: str) -> list[Example]:
    """Read a CoNLL-2003 file (4 columns, IOB2 NER tags in the last) into tagging examples."""
    lines = read_lines(path)
    labels = set(spec.label_list)
    examples: list[Example] = []
    for first, block in iter_blocks(lines, skip=_is_docstart):
        words, tags = [], []
        prev = "O"
        for number, line in block:
            fields = line.split()
            if len(fields) != 4:
                what = "missing column(s)" if len(fields) < 4 else "too many columns"
                raise UserError(f"{path}:{number}: {what}: {len(fields)} fields, expected 4 "
                                "(word POS chunk NER, separated by spaces)")
            word, tag = fields[0], fields[3]
            if tag not in labels:
                valid = ", ".join(spec.label_list)
                raise UserError(f"{path}:{number}: unknown NER tag {tag!r} (expected one of {valid})")
            if tag.startswith("I-") and prev[2:] != tag[2:]:
                raise UserError(f"{path}:{number}: tag {tag} does not continue an entity (previous tag {prev}); "
                                "the reader expects IOB2, where every entity starts with B- "
                                "(convert IOB1 files first)")
            words.append(word)
            tags.append(tag)
            prev = tag
        examples.append(Example(words_a=words, words_b=None, label=tags, guid=f"{name}:{first}"))
    if not examples:
        raise UserError(f"{path}: no sentences found")
    return examples


CONLL2003 = TaskSpec(
    name="conll2003", kind="tagging", label_list=LABELS,
    splits={"train": "conll2003/train.txt", "dev": "conll2003/valid.txt", "test": "conll2003/test.txt"},
    reader=read_conll_ner, metric_fn=metrics.entity_prf, main_metric="f1",
    note=("CoNLL-2003 English NER in IOB2 (converted from the original IOB1 release by the vendoring repo); "
          "14,041 / 3,250 / 3,453 sentences (DOCSTART lines excluded). Report test F1 of the checkpoint chosen on "
          "dev (valid.txt). 'f1' is strict IOB2 entity F1 (seqeval strict); 'conlleval_f1' is the conlleval "
          "reading, equal unless predictions contain an I- tag that does not continue an entity."),
)
