"""``structattn predict``: write predictions of a saved model as JSON lines (labels mapped back to words)."""
from __future__ import annotations

import json
import sys


def add_parser(sub) -> None:
    p = sub.add_parser("predict", help="predict a split (or a file of sentences) with a saved model")
    p.add_argument("model_dir")
    p.add_argument("--split", default="test")
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--output", default="-", help="JSON lines file (default stdout)")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..train.data import aggregate_predictions
    from .evaluate import load_trained

    trainer = load_trained(args.model_dir)
    examples, feats = trainer.features(args.split, args.limit)
    logits = trainer.predict_logits(feats)
    preds = aggregate_predictions(trainer.task, feats, logits, examples, trainer.label_list)
    out = sys.stdout if args.output == "-" else open(args.output, "w", encoding="utf-8")
    try:
        for ex, pred in zip(examples, preds):
            label = pred
            if trainer.task.kind == "classification" and trainer.label_list:
                label = trainer.label_list[pred]
            rec = {"guid": ex.guid, "words": ex.words_a, "prediction": label}
            if ex.words_b is not None:
                rec["words_b"] = ex.words_b
            out.write(json.dumps(rec, ensure_ascii=False) + "\n")
    finally:
        if out is not sys.stdout:
            out.close()
    return 0
