"""One registry of the tasks ``structattn train``, ``evaluate`` and ``predict`` run: each entry names its family
(how its examples look and are scored) and its reader (the spec that reads its splits).

=================  ==========================================  ===================================
family             tasks                                       reader (spec)
=================  ==========================================  ===================================
``sentence``       ``structattn.tasks.TASKS`` (GLUE, CoNLL...)  `structattn.tasks.base.TaskSpec`
``span_qa``        ``squad.QA_TASKS`` (squad2, squad11, ...)    `structattn.tasks.squad.QATask`
``multiple_choice``  ``multiple_choice.MC_TASKS`` (RACE, MCTest)  `structattn.tasks.multiple_choice.MCTaskSpec`
=================  ==========================================  ===================================

A new corpus of one of these kinds is one entry of the family's table; the commands find its family (and from it
its trainer: `structattn.trainers.TRAINERS`) here, never by asking which table holds a name.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .base import registered

#: the families, in the order ``structattn train --help`` lists them
FAMILIES = ("sentence", "span_qa", "multiple_choice")


@dataclass(frozen=True)
class TaskEntry:
    """A registered task: its ``name``, its ``family`` (one of `FAMILIES`) and its ``spec`` (the reader)."""

    name: str
    family: str
    spec: Any


@lru_cache(maxsize=1)
def registry() -> dict[str, TaskEntry]:
    """Every registered task by name (the tables are read on first use: the command line's help stays light)."""
    from . import TASKS
    from .multiple_choice import MC_TASKS
    from .squad import QA_TASKS

    tables = {"sentence": TASKS, "span_qa": QA_TASKS, "multiple_choice": MC_TASKS}
    entries: dict[str, TaskEntry] = {}
    for family in FAMILIES:
        for name, spec in tables[family].items():
            if name in entries:
                raise RuntimeError(f"task {name!r} is registered twice ({entries[name].family} and {family})")
            entries[name] = TaskEntry(name, family, spec)
    return entries


def task_entry(name: str) -> TaskEntry:
    """The entry of ``name``; an unknown name is one line listing the valid ones."""
    return registered(registry(), name)
