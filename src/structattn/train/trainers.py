"""Which trainer runs a task: sentence and token tasks (:class:`~.loop.Trainer`), span QA
(:class:`~.qa_training.SpanQATrainer`) or multiple choice (:class:`~.mc_training.MultipleChoiceTrainer`)."""
from __future__ import annotations

from ..errors import UserError


def task_family(name: str) -> str:
    """``"sentence"``, ``"span_qa"`` or ``"multiple_choice"`` for a registered task name."""
    from ..tasks import TASKS
    from ..tasks.multiple_choice import MC_TASKS
    from ..tasks.squad import QA_TASKS

    if name in TASKS:
        return "sentence"
    if name in QA_TASKS:
        return "span_qa"
    if name in MC_TASKS:
        return "multiple_choice"
    valid = sorted([*TASKS, *QA_TASKS, *MC_TASKS])
    raise UserError(f"unknown task {name!r}; valid tasks: {', '.join(valid)}")


def trainer_for(cfg, **kwargs):
    """The trainer of ``cfg.task``'s family, built on ``cfg``."""
    family = task_family(cfg.task)
    if family == "span_qa":
        from .qa_training import SpanQATrainer

        return SpanQATrainer(cfg, **kwargs)
    if family == "multiple_choice":
        from .mc_training import MultipleChoiceTrainer

        return MultipleChoiceTrainer(cfg, **kwargs)
    from .loop import Trainer

    return Trainer(cfg, **kwargs)
