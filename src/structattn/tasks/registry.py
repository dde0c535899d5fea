"""One registry of the tasks and corpora the training commands run: each entry names its family (how its examples
look and are scored, and the command that trains it) and its reader (the spec that reads its splits).

- ``sentence`` (``structattn train``): ``structattn.tasks.TASKS`` (GLUE, CoNLL...), read by
  `structattn.tasks.base.TaskSpec`;
- ``span_qa`` (``structattn train``): ``squad.QA_TASKS`` (squad2, squad11, ...), `structattn.tasks.squad.QATask`;
- ``multiple_choice`` (``structattn train``): ``multiple_choice.MC_TASKS`` (RACE, MCTest),
  `structattn.tasks.multiple_choice.MCTaskSpec`;
- ``translation`` (``structattn train-translation``): ``multi30k.TRANSLATION_CORPORA`` (multi30k),
  `structattn.tasks.multi30k.ParallelCorpus`;
- ``parsing`` (``structattn train-parsing``): ``ptb.PARSING_CORPORA`` (ptb_sample_nltk),
  `structattn.tasks.ptb.TreebankCorpus`.

A new corpus of one of these kinds is one entry of the family's table; the commands find its family (and from it
its trainer: `structattn.trainers.TRAINERS` for the fine-tuning families) here, never by asking which table holds a
name. `registry` and `task_entry` hold the tasks of the fine-tuning `FAMILIES` (those ``structattn train``,
``evaluate`` and ``predict`` run); `corpus` and `corpus_names` the corpora of the other families.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from .base import registered


@dataclass(frozen=True)
class FamilyTable:
    """Where a family's table is (``module`` under ``structattn.tasks``, ``""`` for the package, and the table's
    ``attribute``: name -> spec) and the ``command`` that trains its entries."""

    command: str
    module: str
    attribute: str

    def table(self) -> dict[str, Any]:
        """The family's table (its module is imported on first use: the command line's help stays light)."""
        return getattr(importlib.import_module(f"{__package__}{'.' + self.module if self.module else ''}"),
                       self.attribute)


#: every family with its table
FAMILY_TABLES: dict[str, FamilyTable] = {
    "sentence": FamilyTable("train", "", "TASKS"),
    "span_qa": FamilyTable("train", "squad", "QA_TASKS"),
    "multiple_choice": FamilyTable("train", "multiple_choice", "MC_TASKS"),
    "translation": FamilyTable("train-translation", "multi30k", "TRANSLATION_CORPORA"),
    "parsing": FamilyTable("train-parsing", "ptb", "PARSING_CORPORA"),
}
#: the families ``structattn train`` fine-tunes a pretrained encoder on, in the order its help lists them (each has
#: a trainer, `structattn.trainers.TRAINERS`)
FAMILIES = tuple(name for name, family in FAMILY_TABLES.items() if family.command == "train")


@dataclass(frozen=True)
class TaskEntry:
    """A registered task: its ``name``, its ``family`` (one of `FAMILY_TABLES`) and its ``spec`` (the reader)."""

    name: str
    family: str
    spec: Any


def all_entries() -> dict[str, TaskEntry]:
    """Every registered task and corpus by name: one name space over all families (a name in two tables raises)."""
    entries: dict[str, TaskEntry] = {}
    for family, where in FAMILY_TABLES.items():
        for name, spec in where.table().items():
            if name in entries:
                raise RuntimeError(f"task {name!r} is registered twice ({entries[name].family} and {family})")
            entries[name] = TaskEntry(name, family, spec)
    return entries


def registry() -> dict[str, TaskEntry]:
    """The fine-tuning tasks by name (those of `FAMILIES`): what ``structattn train --task`` accepts."""
    return {name: entry for name, entry in all_entries().items() if entry.family in FAMILIES}


def task_entry(name: str) -> TaskEntry:
    """The entry of the fine-tuning task ``name``; an unknown name is one line listing the valid ones."""
    return registered(registry(), name)


def corpus_names(family: str) -> list[str]:
    """The corpora of ``family`` (e.g. ``"translation"``) in their table's order: the first is the default."""
    return list(FAMILY_TABLES[family].table())


def corpus(family: str, name: str | None = None) -> Any:
    """The reader of ``family``'s corpus ``name`` (None: the family's default, its table's first); an unknown name
    is one line listing the family's corpora."""
    table = FAMILY_TABLES[family].table()
    return registered(table, next(iter(table)) if name is None else name, f"{family} corpus", "corpora")
