"""The words of a dataset split, for preprocessing (parsing and caching).

Two kinds of dataset:

- every benchmark task in `structattn.tasks.TASKS` (``sst2``, ``cola``, ``mrpc``, ``conll2003``,
  ``fce``, ...): its words come from the task's own reader, so ``structattn preprocess`` fills the
  parse cache with exactly the items that ``structattn train`` parses later (the same word lists,
  one segment at a time);
- gold treebanks (``ud_english_ewt``, ``ptb_dep``): their trees are read and validated, no parser.

``dataset_segments(name, split)`` gives one list of word lists per segment (two for sentence-pair
tasks); ``dataset_sentences`` the first segment only; ``dataset_parses`` the gold trees.
"""
from __future__ import annotations

from pathlib import Path

from .. import settings
from ..errors import UserError
from .record import Parse

GOLD = {
    "ud_english_ewt": ({"train": "ud_english_ewt/en_ewt-ud-train.conllu", "dev": "ud_english_ewt/en_ewt-ud-dev.conllu",
                        "test": "ud_english_ewt/en_ewt-ud-test.conllu"}, "conllu"),
    "ptb_dep": ({"all": "ptb_sample_nltk/dependency_treebank"}, "ptb"),
}
SPLIT_ALIASES = {"valid": "dev", "validation": "dev"}


def dataset_names() -> list[str]:
    from ..tasks import TASKS

    return sorted(set(TASKS) | set(GOLD))


def is_gold(name: str) -> bool:
    _check_name(name)
    return name in GOLD


def _check_name(name: str) -> None:
    if name not in dataset_names():
        raise UserError(f"unknown dataset {name!r}; valid: {', '.join(dataset_names())}")


def split_path(name: str, split: str) -> Path:
    """The file (or folder) of ``split``; UserError if the name or split is unknown or the file is missing."""
    _check_name(name)
    split = SPLIT_ALIASES.get(split, split)
    if name in GOLD:
        splits = GOLD[name][0]
        if split not in splits:
            raise UserError(f"dataset {name!r} has no split {split!r}; valid: {', '.join(splits)}")
        path = settings.data_dir() / splits[split]
    else:
        from ..tasks import get_task

        path = get_task(name).path(split)
    if not path.exists():
        raise UserError(f"{name} {split}: looked for {path} and it does not exist; set STRUCTATTN_DATA to the "
                        f"shared data folder (now {settings.data_dir()})")
    return path


def dataset_segments(name: str, split: str) -> list[list[list[str]]]:
    """Per segment, the word lists of every example (one segment, or two for sentence pairs)."""
    split_path(name, split)  # clear error for an unknown split or a missing file
    split = SPLIT_ALIASES.get(split, split)
    if name in GOLD:
        return [[list(p.words) for p in dataset_parses(name, split)]]
    from ..tasks import get_task

    examples = get_task(name).read(split)
    segments = [[ex.words_a for ex in examples]]
    if examples and examples[0].words_b is not None:
        segments.append([ex.words_b for ex in examples])
    return segments


def dataset_sentences(name: str, split: str) -> list[list[str]]:
    """The word lists of the first segment of every example of one split."""
    return dataset_segments(name, split)[0]


def dataset_parses(name: str, split: str) -> list[Parse]:
    """The gold trees of a treebank split; UserError for datasets without gold trees."""
    _check_name(name)
    if name not in GOLD:
        raise UserError(f"dataset {name!r} has no gold trees (datasets with gold trees: {', '.join(sorted(GOLD))})")
    path = split_path(name, split)
    if GOLD[name][1] == "conllu":
        from .conllu_backend import read_conllu

        return read_conllu(path)
    from .ptb_dependency import read_ptb_dependency

    return read_ptb_dependency(path)
