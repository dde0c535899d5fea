"""Multi30k task 1 (English -> German) and any parallel text files: reading, checks and filters.

A translation corpus is a `ParallelCorpus` (where its split files are); `TRANSLATION_CORPORA` is the
``translation`` family of the task registry ([`structattn.tasks.registry`][structattn.tasks.registry]).

The raw (true-case, untokenised) files of ``../shared/data/multi30k/raw`` are used: the model's own BPE
splits them, its output is detokenised text, and BLEU is sacreBLEU's on detokenised references
([`structattn.tasks.bleu`][structattn.tasks.bleu]).

Splits (`SPLITS`): ``train`` 29,000 pairs, ``dev`` (val) 1,014, and the four test sets
``test2016`` (flickr, 1,000), ``test2017`` (flickr, 1,000), ``test2018`` (flickr, 1,071) and
``mscoco2017`` (461).

Bad input. A source and a target file with different line counts stop the run with a message naming
both files and their counts. Test and dev files are never filtered (every source line gets a
hypothesis). Training pairs are filtered by `filter_training_pairs`, and the counts are printed:
a pair with an empty side is dropped, and so is a pair longer than ``max_tokens`` sub-words on either side
(the tokenizer decides the length). Nothing is truncated.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from ..errors import UserError
from ..settings import data_dir
from .base import read_lines


@dataclass
class ParallelText:
    """Aligned source and target lines (``targets`` None for a source-only file).

    ``source_path`` / ``target_path`` name the files (for messages); ``line_numbers`` are the 1-based line
    numbers of the kept pairs in those files (after a filter, they say which lines survived).
    """

    sources: list[str]
    targets: list[str] | None
    source_path: str = ""
    target_path: str = ""
    line_numbers: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.sources)


def read_parallel(source_path: str | Path, target_path: str | Path | None = None) -> ParallelText:
    """Read a source file and (optionally) its line-aligned target file.

    Raises:
        UserError: a missing/empty/non-UTF-8 file (naming it and the line), or different line counts.
    """
    sources = read_lines(Path(source_path))
    targets = None
    if target_path is not None:
        targets = read_lines(Path(target_path))
        if len(targets) != len(sources):
            raise UserError(f"{source_path} has {len(sources)} lines but {target_path} has {len(targets)}: parallel "
                            "files must be line-aligned (one translation per source line); check that both files "
                            "are the same split and that neither has lost or gained a line")
    return ParallelText(sources, targets, str(source_path), str(target_path or ""), list(range(1, len(sources) + 1)))


@dataclass(frozen=True)
class ParallelCorpus:
    """A translation corpus of line-aligned file pairs: split ``<split>`` is ``<folder>/<stem>.<source_lang>`` and
    ``<folder>/<stem>.<target_lang>`` under the data folder, ``stem = splits[split]``. ``train`` and ``dev`` are
    needed; ``test_splits`` are those a run translates and scores at the end. ``name`` is said in messages."""

    name: str
    folder: str
    splits: Mapping[str, str]
    test_splits: tuple[str, ...]
    source_lang: str
    target_lang: str

    def split_paths(self, split: str, root: str | Path | None = None) -> tuple[Path, Path]:
        """(source file, target file) of ``split`` under ``root`` (default: the data folder)."""
        if split not in self.splits:
            raise UserError(f"unknown {self.name} split {split!r}; valid splits: {', '.join(self.splits)}")
        folder = (Path(root) if root is not None else data_dir()) / self.folder
        stem = self.splits[split]
        return folder / f"{stem}.{self.source_lang}", folder / f"{stem}.{self.target_lang}"

    def read_split(self, split: str, root: str | Path | None = None) -> ParallelText:
        """One split's pairs (raw, true-case text)."""
        return read_parallel(*self.split_paths(split, root))


#: split name -> file stem under multi30k/raw (``<stem>.en`` / ``<stem>.de``)
SPLITS: dict[str, str] = {
    "train": "train",
    "dev": "val",
    "test2016": "test_2016_flickr",
    "test2017": "test_2017_flickr",
    "test2018": "test_2018_flickr",
    "mscoco2017": "test_2017_mscoco",
}
TEST_SPLITS = ("test2016", "test2017", "test2018", "mscoco2017")
SOURCE_LANG, TARGET_LANG = "en", "de"
MULTI30K = ParallelCorpus("Multi30k", "multi30k/raw", SPLITS, TEST_SPLITS, SOURCE_LANG, TARGET_LANG)

#: The ``translation`` family's table of `structattn.tasks.registry`: corpus name -> reader. The first is the
#: default of ``structattn train-translation``.
TRANSLATION_CORPORA: dict[str, ParallelCorpus] = {"multi30k": MULTI30K}


def split_paths(split: str, root: str | Path | None = None) -> tuple[Path, Path]:
    """(English file, German file) of a Multi30k split under ``root`` (default: the data folder)."""
    return MULTI30K.split_paths(split, root)


def read_split(split: str, root: str | Path | None = None) -> ParallelText:
    """One Multi30k split (raw, true-case text)."""
    return MULTI30K.read_split(split, root)


@dataclass
class FilterCounts:
    """What `filter_training_pairs` dropped (each pair counted once, under the first rule it broke)."""

    kept: int = 0
    empty: int = 0
    too_long: int = 0
    examples: list[str] = field(default_factory=list)  # a few "file:line (why)" for the message

    def summary(self, name: str) -> str:
        parts = [f"{name}: kept {self.kept:,} pairs"]
        if self.empty:
            parts.append(f"dropped {self.empty:,} with an empty side")
        if self.too_long:
            parts.append(f"dropped {self.too_long:,} longer than the length limit")
        text = ", ".join(parts)
        if self.examples:
            text += " (e.g. " + "; ".join(self.examples[:3]) + ")"
        return text


def filter_training_pairs(data: ParallelText, length: Callable[[Sequence[str]], list[int]],
                          max_tokens: int) -> tuple[ParallelText, FilterCounts]:
    """Drop training pairs with an empty side or more than ``max_tokens`` sub-words on a side.

    ``length(texts)`` gives the sub-word count of each text (the model's tokenizer, special tokens included).
    Returns the kept pairs (with their original line numbers) and the counts.
    """
    if data.targets is None:
        raise UserError(f"{data.source_path}: training needs a target file beside the source file")
    counts = FilterCounts()
    src_len = length(data.sources)
    tgt_len = length(data.targets)
    keep_s, keep_t, keep_n = [], [], []
    for src, tgt, ns, nt, line in zip(data.sources, data.targets, src_len, tgt_len, data.line_numbers):
        if not src.strip() or not tgt.strip():
            counts.empty += 1
            counts.examples.append(f"line {line} (empty {'source' if not src.strip() else 'target'})")
        elif ns > max_tokens or nt > max_tokens:
            counts.too_long += 1
            counts.examples.append(f"line {line} ({max(ns, nt)} sub-words > {max_tokens})")
        else:
            keep_s.append(src)
            keep_t.append(tgt)
            keep_n.append(line)
    counts.kept = len(keep_s)
    if not keep_s:
        raise UserError(f"{data.source_path}: no training pair is left after the filter ({counts.summary('train')})")
    return ParallelText(keep_s, keep_t, data.source_path, data.target_path, keep_n), counts
