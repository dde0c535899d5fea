"""Record one finished translation run as a line of a results JSONL file (replacing the line of the same name).

    python experiments/record_translation_run.py NAME RUN_DIR JSONL OUTPUT_DIR --seconds S --threads N --load L
                                                 --command "structattn train-translation ..." [--ablation KEY]

Copies RUN_DIR/hypotheses/test2016.de to OUTPUT_DIR/NAME.test2016.de, scores that committed copy with the
project's scorer (sacreBLEU 13a, cased, against Multi30k test2016: what ``structattn score bleu`` gives) and
records the dev curve (greedy dev BLEU per evaluation), the selection, the settings and the machine.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from machine import cpu_flags, cpu_name  # noqa: E402

from structattn.io import upsert_jsonl  # noqa: E402
from structattn.tasks.bleu import corpus_bleu  # noqa: E402
from structattn.tasks.multi30k import read_split  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name")
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("jsonl", type=Path)
    ap.add_argument("output_dir", type=Path)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--load", required=True, help="the load average when the run ended")
    ap.add_argument("--command", required=True)
    ap.add_argument("--ablation", default=None, help="which difference of the recipe the run isolates")
    args = ap.parse_args()
    summary = json.loads((args.run_dir / "summary.json").read_text(encoding="utf-8"))
    target = args.output_dir / f"{args.name}.test2016.de"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(args.run_dir / "hypotheses" / "test2016.de", target)
    hypotheses = target.read_text(encoding="utf-8").split("\n")[:-1]
    bleu = corpus_bleu(hypotheses, read_split("test2016").targets)["bleu"]
    config = summary["config"]
    line = {"name": args.name, "ablation": args.ablation, "variant": config["variant"], "seed": config["seed"],
            "command": args.command, "test2016_bleu": round(bleu, 2),
            "output": str(target.resolve().relative_to(ROOT)),
            "dev_curve": [{"step": h["step"], "dev_bleu_greedy": h["dev_bleu"]} for h in summary["history"]],
            "final_model": summary["final_model"], "dev_bleu_beam": summary["dev_bleu_beam"],
            "updates": summary["updates"], "train_seconds": summary["train_seconds"],
            "wall_seconds": round(args.seconds, 1),
            "target_tokens_per_second": summary["target_tokens_per_second"],
            "recipe": {k: config.get(k) for k in ("adam_eps", "init", "batching", "embedding_dropout",
                                                  "attention_dropout", "activation_dropout", "label_smoothing",
                                                  "learning_rate", "warmup", "max_updates", "max_tokens")},
            "torch_threads": args.threads, "load_average_at_end": args.load, "cpu": cpu_name(),
            "cpu_flags": cpu_flags(), "structattn_commit": summary.get("git_commit")}
    upsert_jsonl(args.jsonl, line, key="name")
    print(f"{args.name}: test2016 BLEU {bleu:.2f} -> {args.jsonl}")


if __name__ == "__main__":
    main()
