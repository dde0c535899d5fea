"""Which family runs a task, by the family its registry entry names (`structattn.tasks.registry`): sentence and
token tasks ([`Trainer`][structattn.finetuning.trainer.Trainer], or with the SG-Net layer `SGNetSentenceTrainer`),
span QA (`SpanQATrainer`) or multiple choice (`MultipleChoiceTrainer`). `TRAINERS` builds one to train on a config;
`LOADERS` loads a saved folder of each for ``structattn evaluate`` / ``predict``, through the inference part alone
(`structattn.train.encoder_family`: no engine, no Accelerator, no output lock). Configurations are
[`RunConfig`][structattn.run_config.RunConfig]s (every system's options); each trainer narrows one to its own
system's."""
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
    """The trainer of ``cfg.task``'s family, built on ``cfg`` (a `RunConfig`, or the core's `TrainConfig`: the
    systems' options at their defaults)."""
    from .run_config import RunConfig
    from .train.config import narrowed

    cfg = narrowed(cfg, RunConfig)
    return TRAINERS[task_family(cfg.task)](cfg, **kwargs)


def _load_sentence(model_dir: str, task: str | None = None):
    from .run_config import RunConfig
    from .train.config import saved_run_config
    from .train.encoder_family import inference_device

    return _sentence_trainer(saved_run_config(model_dir, RunConfig, task), device=inference_device())


def _load_span_qa(model_dir: str, task: str | None = None):
    from .sgnet.reading import load_span_qa

    return load_span_qa(model_dir, task)  # scored at the no-answer threshold tuned during training


def _load_multiple_choice(model_dir: str, task: str | None = None):
    from .sgnet.multiple_choice import load_multiple_choice

    return load_multiple_choice(model_dir, task)


#: family -> how ``evaluate`` / ``predict`` load a saved model of it (its inference part, on `inference_device`)
LOADERS = {"sentence": _load_sentence, "span_qa": _load_span_qa, "multiple_choice": _load_multiple_choice}


def load_trained(model_dir: str, task: str | None = None):
    """The inference part of the family of a saved model (its ``train_config.json`` gives task and mechanism;
    ``task`` scores it on another task of the family)."""
    from .run_config import RunConfig
    from .train.config import saved_run_config

    return LOADERS[task_family(saved_run_config(model_dir, RunConfig, task).task)](model_dir, task)
