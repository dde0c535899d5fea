"""Which trainer runs a task: sentence and token tasks (:class:`~.loop.Trainer`), span QA
(:class:`~.reading.SpanQATrainer`) or multiple choice (:class:`~.multiple_choice.MultipleChoiceTrainer`)."""
from __future__ import annotations

from pathlib import Path

from ..errors import UserError
from .config import task_family  # noqa: F401  (re-exported: callers ask trainers which family a task is)


def trainer_for(cfg, **kwargs):
    """The trainer of ``cfg.task``'s family, built on ``cfg``."""
    family = task_family(cfg.task)
    if family == "span_qa":
        from .reading import SpanQATrainer

        return SpanQATrainer(cfg, **kwargs)
    if family == "multiple_choice":
        from .multiple_choice import MultipleChoiceTrainer

        return MultipleChoiceTrainer(cfg, **kwargs)
    from .loop import Trainer

    return Trainer(cfg, **kwargs)


def load_trained(model_dir: str, task: str | None = None):
    """A Trainer wrapping a saved model (its train_config.json gives task and mechanism)."""
    from dataclasses import replace

    from .config import TrainConfig

    folder = Path(model_dir)
    cfg_path = folder / "train_config.json"
    if not cfg_path.is_file():
        raise UserError(f"{folder} has no train_config.json; give a folder written by `structattn train` "
                        "(its best/ subfolder)")
    if not any((folder / n).is_file() for n in ("model.safetensors", "pytorch_model.bin")):
        raise UserError(f"{folder} has no model weights (model.safetensors); the run may not have finished")
    cfg = TrainConfig.load(cfg_path)
    # the folder holds the whole trained model: load all of it, whatever parts the run took from its --model
    cfg = replace(cfg, model=str(folder), task=task or cfg.task, model_parts="all")
    trainer = trainer_for(cfg)
    trainer.model.to(trainer.accelerator.device)  # only training's engine moves it; evaluation batches go there
    if hasattr(trainer, "fixed_threshold"):  # span QA: score at the threshold tuned during training
        from .reading import answering_threshold

        trainer.fixed_threshold = answering_threshold(folder, trainer.task)
    return trainer
