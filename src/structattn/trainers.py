"""Which trainer runs a task, by the family its registry entry names (`structattn.tasks.registry`): sentence and
token tasks ([`Trainer`][structattn.finetuning.trainer.Trainer], or with the SG-Net layer `SGNetSentenceTrainer`),
span QA (`SpanQATrainer`) or multiple choice (`MultipleChoiceTrainer`)."""
from __future__ import annotations

from .train.config import task_family  # noqa: F401  (re-exported: callers ask trainers which family a task is)


def _sentence_trainer(cfg, **kwargs):
    from .sgnet.sentence import SGNetSentenceTrainer, wants_sgnet

    if wants_sgnet(cfg):  # the SG-Net layer over a sentence task (--sgnet), else plain fine-tuning
        return SGNetSentenceTrainer(cfg, **kwargs)
    from .finetuning.trainer import Trainer

    return Trainer(cfg, **kwargs)


def _span_qa_trainer(cfg, **kwargs):
    from .sgnet.reading import SpanQATrainer

    return SpanQATrainer(cfg, **kwargs)


def _multiple_choice_trainer(cfg, **kwargs):
    from .sgnet.multiple_choice import MultipleChoiceTrainer

    return MultipleChoiceTrainer(cfg, **kwargs)


#: family (`structattn.tasks.registry.FAMILIES`) -> the trainer that runs its tasks, built on a config
TRAINERS = {"sentence": _sentence_trainer, "span_qa": _span_qa_trainer, "multiple_choice": _multiple_choice_trainer}


def trainer_for(cfg, **kwargs):
    """The trainer of ``cfg.task``'s family, built on ``cfg``."""
    return TRAINERS[task_family(cfg.task)](cfg, **kwargs)


def _load_span_qa(model_dir: str, task: str | None, cfg):
    from .sgnet.reading import load_span_qa

    return load_span_qa(model_dir, task)  # scored at the no-answer threshold tuned during training


def _load_with_trainer(model_dir: str, task: str | None, cfg):
    trainer = trainer_for(cfg)
    trainer.model.to(trainer.accelerator.device)  # only training's engine moves it; evaluation batches go there
    return trainer


#: family -> how ``evaluate`` / ``predict`` load a saved model of it (the others: their trainer on the saved config)
LOADERS = {"span_qa": _load_span_qa}


def load_trained(model_dir: str, task: str | None = None):
    """A Trainer wrapping a saved model (its train_config.json gives task and mechanism)."""
    from .train.config import saved_run_config

    cfg = saved_run_config(model_dir, task)
    return LOADERS.get(task_family(cfg.task), _load_with_trainer)(model_dir, task, cfg)
