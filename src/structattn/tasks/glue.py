"""GLUE sentence(-pair) tasks: SST-2, CoLA, MRPC, STS-B, RTE, QNLI, WNLI.

File formats (as written by GLUE's ``download_glue_data.py``; see the SOURCE.md of each folder)
-------------------------------------------------------------------------------------------------
All files are tab-separated UTF-8 with **no quoting**: a ``"`` is an ordinary character (MRPC and
QNLI sentences start with one), which is what ``csv.QUOTE_NONE`` does. Each row is split on tabs,
so every row must have exactly as many fields as the header.

==========  ======================================================  ========================
task        columns (header line unless stated)                     labels
==========  ======================================================  ========================
SST-2       ``sentence  label``; test: ``index  sentence``          0 / 1
CoLA        train/dev: **no header**, 4 columns: source, label,     0 / 1
            original mark, sentence; test: ``index  sentence``
MRPC        ``Quality  #1 ID  #2 ID  #1 String  #2 String`` (header  0 / 1 (1 = paraphrase)
            starts with a UTF-8 BOM); test: ``index`` in place of
            ``Quality``
STS-B       10 columns ``index genre filename year old_index        float score in [0, 5]
            source1 source2 sentence1 sentence2 score``; test has
            no ``score``
RTE, WNLI   ``index  sentence1  sentence2  label``                   RTE entailment /
                                                                    not_entailment; WNLI 0 / 1
QNLI        ``index  question  sentence  label``                     entailment / not_entailment
==========  ======================================================  ========================

Columns are found by their header name, so their order does not matter. The test files carry no
labels (GLUE keeps them private): those examples have ``label=None`` and can only be predicted;
report dev scores. Words are ``text.split()`` (see `base`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError
from . import metrics
from .base import Example, TaskSpec, read_lines, words_of


@dataclass(frozen=True)
class TsvLayout:
    """Where the text and the label of a GLUE file are.

    Attributes:
        text_columns: one column name (single sentence) or two (sentence pair).
        label_column: the label column name.
        header: None when the file has a header line (columns found by name); else the names
            given to the columns of a header-less file, which must have exactly that many fields.
        test_header: the same for the test file (None: header line).
    """

    text_columns: tuple[str, ...]
    label_column: str
    header: tuple[str, ...] | None = None
    test_header: tuple[str, ...] | None = None


def _parse_label(spec: TaskSpec, value: str, where: str, column: str):
    if spec.kind == "regression":
        try:
            x = float(value)
        except ValueError:
            raise UserError(f"{where}: column {column!r}: {value!r} is not a number") from None
        if not math.isfinite(x) or not (0.0 <= x <= 5.0):
            raise UserError(f"{where}: column {column!r}: score {value!r} is outside [0, 5]")
        return x
    try:
        return spec.label_list.index(value)
    except ValueError:
        valid = ", ".join(repr(v) for v in spec.label_list)
        raise UserError(f"{where}: unknown label {value!r} in column {column!r} (expected one of {valid})") from None


def read_tsv_task(path: Path, spec: TaskSpec, split: str, name: str, layout: TsvLayout) -> list[Example]:
    """Read one GLUE tsv file into examples (see the module docstring for the layouts)."""
    lines = read_lines(path, controls="count")  # CoLA's and STS-B's training sets hold a few, kept as published
    fixed = layout.test_header if split == "test" else layout.header
    if fixed is None:
        names = lines[0].split("\t")
        body_start = 1
    else:
        names = list(fixed)
        body_start = 0
    needed = list(layout.text_columns)
    has_label = layout.label_column in names
    if split != "test" and not has_label:
        needed.append(layout.label_column)
    missing = [c for c in needed if c not in names]
    if missing:
        raise UserError(f"{path}:1: header lacks column(s) {', '.join(repr(c) for c in missing)} "
                        f"(found {', '.join(repr(c) for c in names)}); expected the GLUE {spec.name} layout")
    text_idx = [names.index(c) for c in layout.text_columns]
    label_idx = names.index(layout.label_column) if has_label else None
    examples: list[Example] = []
    # trailing empty lines at the end of a file are tolerated; interior ones are not
    end = len(lines)
    while end > body_start and not lines[end - 1].strip():
        end -= 1
    for i in range(body_start, end):
        line = lines[i]
        number = i + 1
        where = f"{path}:{number}"
        if not line.strip():
            raise UserError(f"{where}: empty line inside the file (each line must be one example)")
        fields = line.split("\t")
        if len(fields) != len(names):
            what = "missing column(s)" if len(fields) < len(names) else "too many columns (a tab inside a sentence?)"
            raise UserError(f"{where}: {what}: {len(fields)} tab-separated fields, expected {len(names)} "
                            f"({', '.join(names)})")
        texts = []
        for col, k in zip(layout.text_columns, text_idx):
            words = words_of(fields[k])
            if not words:
                raise UserError(f"{where}: column {col!r} is empty")
            texts.append(words)
        label = None
        if label_idx is not None:
            label = _parse_label(spec, fields[label_idx].strip(), where, layout.label_column)
        examples.append(Example(words_a=texts[0], words_b=texts[1] if len(texts) > 1 else None,
                                label=label, guid=f"{name}:{number}"))
    if not examples:
        raise UserError(f"{path}: no examples (only a header)")
    return examples


def _reader(layout: TsvLayout):
    def read(path: Path, spec: TaskSpec, split: str, name: str) -> list[Example]:
        return read_tsv_task(path, spec, split, name, layout)
    return read


_GLUE_TEST = "GLUE test labels are not public: test.tsv is read with label=None (predict only); report dev scores."
_WORDS = "Words are text.split() of the raw sentence (punctuation stays attached, e.g. 'propose.')."

SST2 = TaskSpec(
    name="sst2", kind="classification", label_list=("0", "1"),
    splits={"train": "sst2/train.tsv", "dev": "sst2/dev.tsv", "test": "sst2/test.tsv"},
    reader=_reader(TsvLayout(("sentence",), "label")),
    metric_fn=metrics.accuracy, main_metric="accuracy", unlabelled=frozenset({"test"}),
    note=(f"{_GLUE_TEST} sst2/test-labeled.unofficial.tsv carries labels added by third parties, not GLUE's. "
          "SST-2 text is already tokenised and lower-cased, so text.split() gives the PTB-style tokens. "
          "Train 67,349 phrases (many are sub-sentence phrases), dev 872 sentences."),
)

COLA = TaskSpec(
    name="cola", kind="classification", label_list=("0", "1"),
    splits={"train": "cola/train.tsv", "dev": "cola/dev.tsv", "test": "cola/test.tsv"},
    reader=_reader(TsvLayout(("sentence",), "label",
                             header=("source", "label", "original_mark", "sentence"))),
    metric_fn=metrics.matthews, main_metric="mcc", unlabelled=frozenset({"test"}),
    note=(f"{_GLUE_TEST} {_WORDS} GLUE CoLA dev (1,043) = in-domain dev (527) + out-of-domain dev (516); "
          "these are the GLUE files, not the corrected CoLA v1.1 release (which changes 2 dev labels). "
          "3 train sentences (lines 7130-7132) contain a backspace character, kept as in GLUE."),
)

MRPC = TaskSpec(
    name="mrpc", kind="classification", label_list=("0", "1"), pair=True,
    splits={"train": "glue_other/MRPC/train.tsv", "dev": "glue_other/MRPC/dev.tsv",
            "test": "glue_other/MRPC/test.tsv"},
    reader=_reader(TsvLayout(("#1 String", "#2 String"), "Quality")),
    metric_fn=metrics.accuracy_f1, main_metric="f1", unlabelled=frozenset({"test"}),
    note=(f"{_GLUE_TEST} F1 is of class 1 (paraphrase), as GLUE; main metric f1 (the BERT paper's choice). "
          "The text is tokenised (SentEval), so text.split() gives tokens. train.tsv was rebuilt from "
          "msr_paraphrase_train.txt + dev_ids.tsv because the vendored copy lacked one row."),
)

STSB = TaskSpec(
    name="stsb", kind="regression", label_list=None, pair=True,
    splits={"train": "glue_other/STS-B/train.tsv", "dev": "glue_other/STS-B/dev.tsv",
            "test": "glue_other/STS-B/test.tsv"},
    reader=_reader(TsvLayout(("sentence1", "sentence2"), "score")),
    metric_fn=metrics.correlations, main_metric="spearman", unlabelled=frozenset({"test"}),
    note=(f"{_GLUE_TEST} {_WORDS} Regression on scores in [0, 5]; main metric spearman "
          "(the BERT paper's choice; GLUE shows Pearson and Spearman, 'corr' is their mean). "
          "A constant prediction gives correlation 0.0 instead of NaN."),
)

RTE = TaskSpec(
    name="rte", kind="classification", label_list=("entailment", "not_entailment"), pair=True,
    splits={"train": "glue_other/RTE/train.tsv", "dev": "glue_other/RTE/dev.tsv", "test": "glue_other/RTE/test.tsv"},
    reader=_reader(TsvLayout(("sentence1", "sentence2"), "label")),
    metric_fn=metrics.accuracy, main_metric="accuracy", unlabelled=frozenset({"test"}),
    note=(f"{_GLUE_TEST} {_WORDS} Some sentences hold mis-decoded characters (e.g. 'Iraq\\u00e2\\u0080\\u0099s'), "
          "kept as in GLUE."),
)

QNLI = TaskSpec(
    name="qnli", kind="classification", label_list=("entailment", "not_entailment"), pair=True,
    splits={"dev": "glue_other/QNLI/dev.tsv", "test": "glue_other/QNLI/test.tsv"},
    unavailable={"train": ("QNLI train.tsv (104,743 pairs, ~28 MB) could not be obtained for "
                           "../shared/data (see glue_other/SOURCE.md); only dev (5,463) and the unlabelled test "
                           "exist. Put a GLUE QNLI train.tsv at glue_other/QNLI/train.tsv under STRUCTATTN_DATA "
                           "and register it to fine-tune.")},
    reader=_reader(TsvLayout(("question", "sentence"), "label")),
    metric_fn=metrics.accuracy, main_metric="accuracy", unlabelled=frozenset({"test"}),
    note=(f"QNLI train is NOT available here: only dev (5,463, labelled) and test (unlabelled) can be read, so "
          f"QNLI cannot be fine-tuned from this data folder. {_GLUE_TEST} {_WORDS} "
          "A few dev sentences contain U+FEFF inside coordinates, kept as in GLUE."),
)

WNLI = TaskSpec(
    name="wnli", kind="classification", label_list=("0", "1"), pair=True,
    splits={"train": "glue_other/WNLI/train.tsv", "dev": "glue_other/WNLI/dev.tsv", "test": "glue_other/WNLI/test.tsv"},
    reader=_reader(TsvLayout(("sentence1", "sentence2"), "label")),
    metric_fn=metrics.accuracy, main_metric="accuracy", unlabelled=frozenset({"test"}),
    note=(f"{_GLUE_TEST} {_WORDS} WNLI dev is adversarial to train (same sentences, flipped hypotheses); "
          "the BERT paper excluded WNLI, and majority-class accuracy (56.3% on dev) is the usual baseline."),
)

GLUE_TASKS = (SST2, COLA, MRPC, STSB, RTE, QNLI, WNLI)
