"""Which trainer runs a task: sentence and token tasks ([`Trainer`][structattn.finetuning.trainer.Trainer], or with
the SG-Net layer `SGNetSentenceTrainer`), span QA
(`SpanQATrainer`) or multiple choice
(`MultipleChoiceTrainer`)."""
from __future__ import annotations

from .train.config import task_family  # noqa: F401  (re-exported: callers ask trainers which family a task is)


def trainer_for(cfg, **kwargs):
    """The trainer of ``cfg.task``'s family, built on ``cfg``."""
    family = task_family(cfg.task)
    if family == "span_qa":
        from .sgnet.reading import SpanQATrainer

        return SpanQATrainer(cfg, **kwargs)
    if family == "multiple_choice":
        from .sgnet.multiple_choice import MultipleChoiceTrainer

        return MultipleChoiceTrainer(cfg, **kwargs)
    from .sgnet.sentence import SGNetSentenceTrainer, wants_sgnet

    if wants_sgnet(cfg):
        return SGNetSentenceTrainer(cfg, **kwargs)
    from .finetuning.trainer import Trainer

    return Trainer(cfg, **kwargs)


def load_trained(model_dir: str, task: str | None = None):
    """A Trainer wrapping a saved model (its train_config.json gives task and mechanism)."""
    from .train.config import saved_run_config

    cfg = saved_run_config(model_dir, task)
    if task_family(cfg.task) == "span_qa":  # scored at the threshold tuned during training
        from .sgnet.reading import load_span_qa

        return load_span_qa(model_dir, task)
    trainer = trainer_for(cfg)
    trainer.model.to(trainer.accelerator.device)  # only training's engine moves it; evaluation batches go there
    return trainer
