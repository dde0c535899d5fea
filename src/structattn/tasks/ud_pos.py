"""UD English EWT universal POS tagging (UPOS), a further sequence-labelling benchmark.

File format: CoNLL-U (``ud_english_ewt/en_ewt-ud-{train,dev,test}.conllu``, UD v2.16). Sentences
are blank-line separated blocks of ``#`` comment lines and token lines with 10 tab-separated fields
``ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC``. The words are the *syntactic words*
(integer ids 1..n): multiword-token lines (``3-4 don't``) and empty-node lines (``8.1``) are skipped,
so "don't" gives the two words ``do`` and ``n't``, as in the UD trees. Labels are the UPOS tags of the
words. Fields are parsed with the ``conllu`` library after a line-by-line check that names the line of
any problem (``conllu`` itself reports no line numbers).

Score: token accuracy.
"""
from __future__ import annotations

from pathlib import Path

import conllu

from ..errors import UserError
from . import metrics
from .base import Example, TaskSpec, iter_blocks, read_lines

#: the 17 universal POS tags of UD v2
UPOS = ("ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN",
        "PUNCT", "SCONJ", "SYM", "VERB", "X")


def _line_kind(token_id: str) -> str:
    """``"word"`` for ``7``, ``"multiword"`` for ``3-4``, ``"empty"`` for ``8.1``; else ``""``."""
    if token_id.isdigit():
        return "word"
    if "-" in token_id:
        a, _, b = token_id.partition("-")
        return "multiword" if a.isdigit() and b.isdigit() else ""
    if "." in token_id:
        a, _, b = token_id.partition(".")
        return "empty" if a.isdigit() and b.isdigit() else ""
    return ""


def read_conllu_upos(path: Path, spec: TaskSpec, split: str, name: str) -> list[Example]:
    """Read a CoNLL-U file into tagging examples (words and UPOS tags of the syntactic words)."""
    lines = read_lines(path)
    labels = set(spec.label_list)
    examples: list[Example] = []
    for first, block in iter_blocks(lines):
        expected = 1
        for number, line in block:
            if line.startswith("#"):
                continue
            fields = line.split("\t")
            if len(fields) != 10:
                what = "missing column(s)" if len(fields) < 10 else "too many columns"
                raise UserError(f"{path}:{number}: {what}: {len(fields)} tab-separated fields, expected 10 (CoNLL-U)")
            kind = _line_kind(fields[0])
            if not kind:
                raise UserError(f"{path}:{number}: bad token id {fields[0]!r}")
            if kind == "word":
                if int(fields[0]) != expected:
                    raise UserError(f"{path}:{number}: word id {fields[0]} out of order (expected {expected})")
                expected += 1
                if not fields[1].strip():
                    raise UserError(f"{path}:{number}: empty word form")
                if fields[3] not in labels:
                    raise UserError(f"{path}:{number}: unknown UPOS tag {fields[3]!r} "
                                    f"(expected one of {', '.join(spec.label_list)})")
        if expected == 1:
            raise UserError(f"{path}:{first}: sentence has no words (only comments or multiword/empty lines)")
        try:
            sentence = conllu.parse("\n".join(line for _, line in block) + "\n\n")[0]
        except Exception as exc:  # conllu raises its own ParseException (and others) without line numbers
            raise UserError(f"{path}:{first}: cannot parse the sentence starting here: {exc}") from None
        words, tags = [], []
        for token in sentence:
            if isinstance(token["id"], int):
                words.append(token["form"])
                tags.append(token["upos"])
        examples.append(Example(words_a=words, words_b=None, label=tags, guid=f"{name}:{first}"))
    return examples


UD_POS = TaskSpec(
    name="ud_pos", kind="tagging", label_list=UPOS,
    splits={"train": "ud_english_ewt/en_ewt-ud-train.conllu", "dev": "ud_english_ewt/en_ewt-ud-dev.conllu",
            "test": "ud_english_ewt/en_ewt-ud-test.conllu"},
    reader=read_conllu_upos, metric_fn=metrics.token_accuracy, main_metric="accuracy",
    note=("UD English EWT v2.16 UPOS tagging: 12,544 / 2,001 / 2,077 sentences, 204,577 / 25,147 / 25,094 "
          "syntactic words (multiword tokens split, empty nodes skipped). Words are the gold UD tokenisation, "
          "so a parse of these words can use the gold trees of the same file. Not a task of the SLA paper; "
          "a further sequence-labelling benchmark."),
)
