"""``structattn evaluate``: score a saved model folder on a task split with the task's metric."""
from __future__ import annotations

import json

from ..errors import UserError


def add_parser(sub) -> None:
    from ..cli_grammar import require_in_usage

    p = sub.add_parser("evaluate", help="evaluate a saved model folder (e.g. runs/x/best) on a split",
                       description="Score a model folder saved by `structattn train` on a labelled split of its "
                                   "task (or another --task) with the task's metric; prints one JSON object.")
    add_model_folder_option(p)
    p.add_argument("--split", default="dev", help="split to score: train | dev | test (default dev)")
    p.add_argument("--task", default=None, help="task to score on (default: the task the model was trained on)")
    p.add_argument("--limit", type=int, default=0, help="score only the first N examples (default 0 = all)")
    require_in_usage(p, "--model")
    p.set_defaults(func=run)


def add_model_folder_option(p) -> None:
    """``--model DIR``: the folder a trainer saved."""
    p.add_argument("--model", default=None, metavar="DIR",
                   help="model folder written by `structattn train` (best/ inside its output dir); required")


def model_folder(args) -> str:
    """The ``--model`` folder, checked before anything loads."""
    from ..paths import check_input_folder

    if args.model is None:
        raise UserError("give the model folder: --model DIR (best/ inside the output dir of `structattn train`)")
    return check_input_folder(args.model, "--model")


def run(args) -> int:
    from ..trainers import load_trained

    trainer = load_trained(model_folder(args), args.task)
    examples, feats = trainer.features(args.split, args.limit)
    has_labels = getattr(trainer.task, "has_labels", None)  # reading tasks: every split is labelled
    if has_labels is not None and not has_labels(args.split):
        raise UserError(f"split {args.split!r} of {trainer.task.name} has no labels; use `structattn predict`")
    metrics = trainer.evaluate(examples, feats, with_gates=True)  # + mean gate per layer, LISA parent accuracy
    n = len(examples.questions) if hasattr(examples, "questions") else len(examples)
    print(json.dumps({"task": trainer.task.name, "split": args.split, "n": n, **metrics}, indent=2))
    return 0
