"""FCE grammatical error detection (token labels ``c`` correct / ``i`` incorrect).

Split used: MultiGED-2023 English FCE (BEA-2019 split and tokenisation), in
``fce/multiged2023_bea_split/``. The Rei & Yannakoudakis (2016) split that the SLA paper used
cannot be completed here (its dev file is missing), so **scores on this split are not comparable
with published 2016-split numbers** (different sentence split, tokenisation and error labels:
about 9.4% of tokens are errors here against 13% there).

File format
-----------
One token per line, ``token<TAB>label`` with label ``c`` or ``i``; a blank line ends a sentence.
The test file is ``en_fce_test.reconstructed.tsv``: the shared task's preliminary labelled test with
its ``NA`` labels mapped to ``c`` (not an official release; see fce/SOURCE.md). Its tokens align
line by line with the official unlabelled test file.

Score: token-level precision, recall and F0.5 of class ``i`` (`metrics.token_prf`).
"""
from __future__ import annotations

from pathlib import Path

from ..errors import UserError
from . import metrics
from .base import Example, TaskSpec, iter_blocks, read_lines

LABELS = ("c", "i")


def read_token_label_tsv(path: Path, spec: TaskSpec, split: str, name: str) -> list[Example]:
    """Read ``token<TAB>label`` lines, blank-line separated sentences, into tagging examples."""
    lines = read_lines(path)
    labels = set(spec.label_list)
    examples: list[Example] = []
    for first, block in iter_blocks(lines):
        words, tags = [], []
        for number, line in block:
            fields = line.split("\t")
            if len(fields) != 2:
                what = "missing column" if len(fields) < 2 else "too many columns"
                raise UserError(f"{path}:{number}: {what}: {len(fields)} tab-separated fields, expected 2 (token, label)")
            word, tag = fields[0].strip(), fields[1].strip()
            if not word:
                raise UserError(f"{path}:{number}: empty token")
            if tag not in labels:
                hint = " ('NA' marks unannotated tokens in the preliminary test file; use the reconstructed one)" \
                    if tag == "NA" else ""
                raise UserError(f"{path}:{number}: unknown label {tag!r} (expected one of "
                                f"{', '.join(spec.label_list)}){hint}")
            words.append(word)
            tags.append(tag)
        examples.append(Example(words_a=words, words_b=None, label=tags, guid=f"{name}:{first}"))
    if not examples:
        raise UserError(f"{path}: no sentences found")
    return examples


def fce_metric(predictions, references) -> dict[str, float]:
    """Token-level P, R, F0.5 of the incorrect class ``i`` (plus token accuracy)."""
    return metrics.token_prf(predictions, references, positive="i", beta=0.5)


_DIR = "fce/multiged2023_bea_split"

FCE = TaskSpec(
    name="fce", kind="tagging", label_list=LABELS,
    splits={"train": f"{_DIR}/en_fce_train.tsv", "dev": f"{_DIR}/en_fce_dev.tsv",
            "test": f"{_DIR}/en_fce_test.reconstructed.tsv"},
    reader=read_token_label_tsv, metric_fn=fce_metric, main_metric="f0.5",
    note=("MultiGED-2023 FCE split (BEA-2019): train 28,357 / dev 2,191 / test 2,695 sentences, "
          "i = 42,899 / 3,460 / 4,501 tokens. Scores are NOT comparable with the Rei & Yannakoudakis 2016 split "
          "used by the SLA paper (its dev file could not be obtained; different split, tokenisation and error "
          "rate 9.4% vs 13%). The labelled test is reconstructed (preliminary labels, NA -> c), not an official "
          "release file."),
)
