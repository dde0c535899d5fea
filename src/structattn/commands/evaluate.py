"""``structattn evaluate``: score a saved model folder on a task split with the task's metric."""
from __future__ import annotations

import json

from ..errors import UserError
from ..train.trainers import load_trained


def add_parser(sub) -> None:
    p = sub.add_parser("evaluate", help="evaluate a saved model folder (e.g. runs/x/best) on a split")
    p.add_argument("model_dir", help="folder written by `structattn train` (best/ inside the output dir)")
    p.add_argument("--split", default="dev")
    p.add_argument("--task", default=None, help="default: the task the model was trained on")
    p.add_argument("--limit", type=int, default=0)
    p.set_defaults(func=run)


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
