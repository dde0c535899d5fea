"""Records shared by every benchmark reader: `Example` and `TaskSpec`.

A task knows where its files are (paths relative to [`structattn.settings.data_dir`][structattn.settings.data_dir]),
how to read one split into a list of `Example`, and how to score predictions with a
metric equivalent to the benchmark's official one.

Words
-----
The SLA paper parses whitespace-tokenised text, so the words of a sentence task are
``text.split()`` (Python's split on runs of Unicode whitespace, no other normalisation).
SST-2 and MRPC are already tokenised (``it 's``, ``doesn 't``); CoLA, RTE, QNLI, WNLI and STS-B
are raw text, so punctuation stays attached to the word before it (``propose.``).
Token tasks (CoNLL-2003, FCE, UD) keep the words of the file as they are.

Reading
-------
Files are decoded as strict UTF-8. Any problem a user can fix (file missing, bytes that are not
UTF-8, a missing column, an unknown label, an empty line where none is allowed) raises
[`structattn.errors.UserError`][structattn.errors.UserError] naming the file and the 1-based line. Readers only return
values; they never write anything, so a failed read leaves nothing behind.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..errors import UserError
from ..io import decode_lines
from ..textcheck import note_control_lines
from ..settings import data_dir as _default_data_dir

SPLITS = ("train", "dev", "test")
KINDS = ("classification", "regression", "tagging")


@dataclass(slots=True)
class Example:
    """One example of a sentence or token task.

    Attributes:
        words_a: the words of the (first) sentence.
        words_b: the words of the second sentence for sentence-pair tasks, else None.
        label: the class index into ``TaskSpec.label_list`` (classification), a float
            (regression), one tag per word of ``words_a`` (tagging), or None where the
            split has no labels (GLUE test files: predict only).
        guid: ``"<file>:<line>"``, the file as named in ``TaskSpec.splits`` (relative to the data
            folder) and the 1-based line the example starts on; unique within a split.
    """

    words_a: list[str]
    words_b: list[str] | None
    label: int | float | list[str] | None
    guid: str


Reader = Callable[[Path, "TaskSpec", str, str], "list[Example]"]
Metric = Callable[[Sequence[Any], Sequence[Any]], "dict[str, float]"]


@dataclass(frozen=True)
class TaskSpec:
    """A benchmark: its files, its reader and its metric.

    Attributes:
        name: registry name (``sst2``, ``conll2003``, ...).
        kind: ``"classification"``, ``"regression"`` or ``"tagging"``.
        label_list: class names (index = class id) or tag names; None for regression.
            For tagging tasks it holds every tag that occurs in the training file.
        splits: split name -> file path relative to the data folder, for the splits present.
        reader: ``reader(path, spec, split, name) -> list[Example]`` where ``name`` (the file relative
            to the data folder) prefixes each guid; use `read`.
        metric_fn: ``metric_fn(predictions, references) -> dict[str, float]``; use `metric`.
        main_metric: key of the metric dict used to pick the best checkpoint (greater is better).
        note: caveats about the data (missing splits, non-comparable splits, unofficial labels).
        pair: True for sentence-pair tasks (``words_b`` is set).
        unavailable: split name -> why that split cannot be read here.
        unlabelled: splits whose files carry no labels (examples have ``label=None``).
    """

    name: str
    kind: str
    label_list: tuple[str, ...] | None
    splits: Mapping[str, str]
    reader: Reader
    metric_fn: Metric
    main_metric: str
    note: str = ""
    pair: bool = False
    unavailable: Mapping[str, str] = field(default_factory=dict)
    unlabelled: frozenset[str] = frozenset()

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"task {self.name}: kind must be one of {KINDS}, got {self.kind!r}")
        if (self.label_list is None) != (self.kind == "regression"):
            raise ValueError(f"task {self.name}: label_list is required exactly for classification and tagging")
        for split in list(self.splits) + list(self.unavailable):
            if split not in SPLITS:
                raise ValueError(f"task {self.name}: unknown split {split!r}")

    @property
    def num_labels(self) -> int:
        """Number of classes or tags (1 for regression: one output)."""
        return 1 if self.label_list is None else len(self.label_list)

    @property
    def label_ids(self) -> dict[str, int]:
        """Class or tag name -> index in ``label_list`` (empty for regression)."""
        return {label: i for i, label in enumerate(self.label_list or ())}

    def path(self, split: str, data_dir: str | Path | None = None) -> Path:
        """The file of ``split`` under ``data_dir`` (default [`settings.data_dir`][structattn.settings.data_dir])."""
        if split in self.unavailable:
            raise UserError(f"task {self.name}: split {split!r} is not available here: {self.unavailable[split]}")
        if split not in self.splits:
            valid = ", ".join(s for s in SPLITS if s in self.splits)
            raise UserError(f"task {self.name}: unknown split {split!r}; valid splits: {valid}")
        root = Path(data_dir) if data_dir is not None else _default_data_dir()
        return root / self.splits[split]

    def read(self, split: str, data_dir: str | Path | None = None) -> list[Example]:
        """Read one split; raises [`UserError`][structattn.errors.UserError] naming file and line on bad input."""
        return self.reader(self.path(split, data_dir), self, split, self.splits[split])

    def metric(self, predictions: Sequence[Any], references: Sequence[Any]) -> dict[str, float]:
        """Score ``predictions`` against ``references`` (same form as ``Example.label``).

        All values are fractions in [0, 1] (correlations in [-1, 1]); ``main_metric`` is one key.
        """
        return self.metric_fn(predictions, references)

    def has_labels(self, split: str) -> bool:
        """Whether the examples of ``split`` carry gold labels."""
        return split in self.splits and split not in self.unlabelled


# --------------------------------------------------------------------------------------------
# shared by the readers


def read_lines(path: Path, controls: str = "refuse") -> list[str]:
    """The lines of a UTF-8 text file, without line terminators.

    Line ``i`` (1-based) is ``result[i - 1]``. Lines are split on ``\\n`` only (not on the other
    characters ``str.splitlines`` treats as breaks, which occur inside GLUE sentences); a ``\\r``
    before the ``\\n`` is dropped. A UTF-8 byte-order mark at the very start is dropped. The
    final terminator does not create an extra empty line.

    A control character (NUL and the other C0 controls but tab) is an error naming the line; with
    ``controls="count"`` (benchmark files published with a few) the lines holding one are kept and counted on
    stderr (`structattn.textcheck.note_control_lines`).

    Raises:
        UserError: file missing, a folder, empty, not valid UTF-8 (naming the line and byte), or holding a control
            character (naming the line).
    """
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: file not found (benchmark files are read from the data folder, "
                        "../shared/data beside the repository unless STRUCTATTN_DATA names another)")
    if not path.is_file():
        raise UserError(f"{path}: is not a file (it is a folder)")
    lines = decode_lines(path.read_bytes(), str(path), controls="refuse" if controls == "refuse" else "keep")
    if controls == "count":
        note_control_lines(lines, str(path))
    if not any(ln.strip() for ln in lines):
        raise UserError(f"{path}: file is empty")
    return lines


def iter_blocks(lines: list[str], *, skip=None):
    """Group lines into blank-line separated blocks (CoNLL-style files).

    Yields ``(first_line_number, [(line_number, line), ...])``. Lines that are empty or
    whitespace only separate blocks; several in a row are allowed. ``skip(line)`` returning
    True drops a line and also ends the current block (used for ``-DOCSTART-``).
    """
    block: list[tuple[int, str]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip() or (skip is not None and skip(line)):
            if block:
                yield block[0][0], block
                block = []
            continue
        block.append((number, line))
    if block:
        yield block[0][0], block


def words_of(text: str) -> list[str]:
    """Whitespace tokenisation used for every sentence task (see the module docstring)."""
    return text.split()


def registered(table: Mapping[str, Any], name: str, what: str = "task", valid: str = "tasks") -> Any:
    """``table[name]`` of a registry of ``what``s; an unknown name raises [`UserError`][structattn.errors.UserError]
    listing the valid ones (sorted)."""
    try:
        return table[name]
    except (KeyError, TypeError):
        raise UserError(f"unknown {what} {name!r}; valid {valid}: {', '.join(sorted(table))}") from None
