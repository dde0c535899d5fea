"""``structattn evaluate``: score a saved model folder on a task split with the task's metric."""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import UserError


def add_parser(sub) -> None:
    p = sub.add_parser("evaluate", help="evaluate a saved model folder (e.g. runs/x/best) on a split")
    p.add_argument("model_dir", help="folder written by `structattn train` (best/ inside the output dir)")
    p.add_argument("--split", default="dev")
    p.add_argument("--task", default=None, help="default: the task the model was trained on")
    p.add_argument("--limit", type=int, default=0)
    p.set_defaults(func=run)


def load_trained(model_dir: str, task: str | None = None):
    """A Trainer wrapping a saved model (its train_config.json gives task and mechanism)."""
    from dataclasses import replace

    from ..train.config import TrainConfig
    from ..train.trainers import trainer_for

    folder = Path(model_dir)
    cfg_path = folder / "train_config.json"
    if not cfg_path.is_file():
        raise UserError(f"{folder} has no train_config.json; give a folder written by `structattn train` "
                        "(its best/ subfolder)")
    if not any((folder / n).is_file() for n in ("model.safetensors", "pytorch_model.bin")):
        raise UserError(f"{folder} has no model weights (model.safetensors); the run may not have finished")
    cfg = TrainConfig.load(cfg_path)
    cfg = replace(cfg, model=str(folder), task=task or cfg.task)
    trainer = trainer_for(cfg)
    if hasattr(trainer, "fixed_threshold"):  # span QA: score at the threshold tuned during training
        from ..train.qa_training import saved_threshold

        trainer.fixed_threshold = saved_threshold(folder)
    return trainer


def run(args) -> int:
    trainer = load_trained(args.model_dir, args.task)
    examples, feats = trainer.features(args.split, args.limit)
    has_labels = getattr(trainer.task, "has_labels", None)  # reading tasks: every split is labelled
    if has_labels is not None and not has_labels(args.split):
        raise UserError(f"split {args.split!r} of {trainer.task.name} has no labels; use `structattn predict`")
    metrics = trainer.evaluate(examples, feats, with_gates=True)  # + mean gate per layer, LISA parent accuracy
    n = len(examples.questions) if hasattr(examples, "questions") else len(examples)
    print(json.dumps({"task": trainer.task.name, "split": args.split, "n": n, **metrics}, indent=2))
    return 0
