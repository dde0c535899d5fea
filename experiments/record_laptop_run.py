"""Record one timed README training command of experiments/run_laptop_defaults.sh in results/laptop_defaults.jsonl.

    python experiments/record_laptop_run.py NAME RUN_DIR OUTPUT_FILE --seconds S --threads N --load-before L
                                        --load-after L --command "structattn ..."

Copies RUN_DIR/OUTPUT_FILE (the test parse or the test2016 translations) to results/laptop/, scores that committed
file with the project's scorer (EVALB against the WSJ sample's test files; sacreBLEU 13a, cased, against Multi30k
test2016) and replaces NAME's line in results/laptop_defaults.jsonl.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent.parent / "results"
sys.path.insert(0, str(RESULTS.parent / "benchmarks"))
from machine import cpu_flags, cpu_name  # noqa: E402

from structattn.io import upsert_jsonl  # noqa: E402
from structattn.tasks.bleu import corpus_bleu  # noqa: E402
from structattn.tasks.evalb import evalb_files  # noqa: E402
from structattn.tasks.multi30k import read_split  # noqa: E402
from structattn.tasks.ptb import split_files  # noqa: E402


def score_test_output(target: Path) -> tuple[str, float]:
    """(metric, value) of a committed test parse (``.trees``) or test2016 translation file."""
    if target.suffix == ".trees":
        return "test F1 (EVALB)", evalb_files(split_files("test"), target).to_dict()["f1"]
    hypotheses = target.read_text(encoding="utf-8").split("\n")[:-1]
    return "test2016 BLEU", corpus_bleu(hypotheses, read_split("test2016").targets)["bleu"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name")
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("output_file")
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--load-before", required=True)
    ap.add_argument("--load-after", required=True)
    ap.add_argument("--command", required=True)
    args = ap.parse_args()
    summary = json.loads((args.run_dir / "summary.json").read_text())
    source = args.run_dir / args.output_file
    target = RESULTS / "laptop" / f"{args.name}.{source.name}"
    target.parent.mkdir(exist_ok=True)
    shutil.copyfile(source, target)
    metric, value = score_test_output(target)
    line = {"name": args.name, "command": args.command, "wall_seconds": round(args.seconds, 1),
            "wall_minutes": round(args.seconds / 60, 1), "metric": metric, "score": round(value, 2),
            "output": str(target.relative_to(RESULTS.parent)),
            "steps": summary.get("steps", summary.get("updates")),
            "stopped": {k: summary[k] for k in ("epochs_completed", "best_epoch", "best_step", "updates",
                                                "final_model") if k in summary},
            "torch_threads": args.threads, "load_average_before": args.load_before,
            "load_average_after": args.load_after, "cpu": cpu_name(), "cpu_flags": cpu_flags(),
            "config": summary["config"]}
    upsert_jsonl(RESULTS / "laptop_defaults.jsonl", line, key="name")
    print(f"{args.name}: {metric} {value:.2f} in {args.seconds / 60:.1f} min ({args.threads} threads)")


if __name__ == "__main__":
    main()
