"""Record one finished `structattn train-parsing` run in results/parsing.jsonl.

    python experiments/record_parsing_run.py RUN_DIR NAME [--variant V] [--note TEXT]

Copies RUN_DIR/test.trees to results/parsing/NAME.test.trees, scores that committed file with the project's own
EVALB scorer against the test split's files as found in the treebank (the same figures
`structattn score evalb <treebank>/wsj_01[6-9]*.mrg results/parsing/NAME.test.trees --json` prints), and appends
one JSON line with the run's settings from RUN_DIR/summary.json. A line for NAME already there is replaced.
"""
from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from structattn.io import upsert_jsonl
from structattn.tasks.evalb import evalb_files
from structattn.tasks.ptb import split_files

RESULTS = Path(__file__).resolve().parent.parent / "results"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("name")
    ap.add_argument("--note", default="")
    args = ap.parse_args()
    summary = json.loads((args.run_dir / "summary.json").read_text())
    config = summary["config"]
    target = RESULTS / "parsing" / f"{args.name}.test.trees"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(args.run_dir / "test.trees", target)
    score = evalb_files(split_files("test"), target).to_dict()
    line = {
        "task": "ptb_sample",
        "run": args.name,
        "variant": config.get("variant") if not config.get("layers") else "+".join(config["layers"]),
        "layers": summary.get("layers", config.get("layers")),
        "seed": config["seed"],
        "encoder": "none" if config["encoder"] == "none" else (config["encoder"] or "all-MiniLM-L6-v2"),
        "fine_tune_encoder": config.get("fine_tune_encoder"),
        "pos": config.get("pos"),
        "ngram": config.get("ngram"),
        "nsa_layers": config.get("nsa_layers"),
        "recall": score["recall"], "precision": score["precision"], "f1": score["f1"],
        "complete_match": score["complete_match"],
        "test_sentences": score.get("sentences"), "test_error_sentences": score.get("error_sentences"),
        "le40": score.get("le40"),
        "dev": summary.get("dev"),
        "best_epoch": summary.get("best_epoch"),
        "predictions": str(target.relative_to(RESULTS.parent)),
        "config": config,
        "device": summary.get("device"),
        "wall_s": summary.get("wall_seconds", summary.get("wall_s")),
        "provenance": summary.get("provenance"),
        "command": summary.get("command"),
        "note": args.note,
    }
    out = RESULTS / "parsing.jsonl"
    upsert_jsonl(out, line, key="run")
    print(f"{args.name}: test F1 {score['f1']:.2f} (R {score['recall']:.2f}, P {score['precision']:.2f}) -> {out}")


if __name__ == "__main__":
    main()
