"""Benchmark readers and their official-equivalent metrics.

``TASKS`` maps a short name to a `TaskSpec`; `get_task` looks one up.

=============  ==============  =========================================  ============
name           kind            data (under ``settings.data_dir()``)        main metric
=============  ==============  =========================================  ============
sst2           classification  sst2/                                      accuracy
cola           classification  cola/ (GLUE files)                         mcc
mrpc           classification  glue_other/MRPC/                           f1
stsb           regression      glue_other/STS-B/                          spearman
rte            classification  glue_other/RTE/                            accuracy
qnli           classification  glue_other/QNLI/ (dev and test only)       accuracy
wnli           classification  glue_other/WNLI/                           accuracy
conll2003      tagging         conll2003/                                 f1
fce            tagging         fce/multiged2023_bea_split/                f0.5
ud_pos         tagging         ud_english_ewt/                            accuracy
=============  ==============  =========================================  ============

Each spec's ``note`` lists the caveats of its data (missing splits, unofficial test labels,
splits not comparable with published numbers).

Reading-comprehension tasks have their own registries (their examples are questions, not sentences):
``squad.QA_TASKS`` (span QA: ``squad2`` — the 2.0 dev file split by article —, ``squad11``; scored by
``squad_eval``, the official evaluate-v2.0 rules) and ``multiple_choice.MC_TASKS`` (``race``, ``race_m``,
``race_h``, ``mctest160``, ``mctest500``; accuracy). `structattn.tasks.registry` holds all three as one registry
whose entries name their family.
"""
from __future__ import annotations

from .base import Example, TaskSpec, registered
from .conll2003 import CONLL2003
from .fce import FCE
from .glue import GLUE_TASKS
from .ud_pos import UD_POS

TASKS: dict[str, TaskSpec] = {spec.name: spec for spec in (*GLUE_TASKS, CONLL2003, FCE, UD_POS)}


def get_task(name: str) -> TaskSpec:
    """The task registered as ``name``; an unknown name raises [`UserError`][structattn.errors.UserError] listing the
    valid ones."""
    return registered(TASKS, name)


__all__ = ["TASKS", "get_task", "TaskSpec", "Example"]
