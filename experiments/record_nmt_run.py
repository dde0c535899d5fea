"""Record one finished translation run (`structattn train-translation ...`) in results/nmt.jsonl.

    python experiments/record_nmt_run.py RUN_DIR NAME [--note TEXT] [--results FILE.jsonl --outputs DIR]

(``--results`` / ``--outputs``: another results file and folder for the translations, e.g. the recipe ablation's
results/peers/nmt_recipe_ablation.jsonl and results/peers/ablation.)

Copies RUN_DIR/hypotheses/<split>.de to results/nmt/NAME.<split>.de, scores each committed file against the
Multi30k references with sacreBLEU (the figure `structattn score bleu --split <split> --hypotheses FILE` and
`sacrebleu REF < FILE` print) and appends one line to results/nmt.jsonl (a line for NAME already there is
replaced in place): task, variant, seed, run, bleu_<split> and hypotheses_<split> per test set and, when
RUN_DIR/hypotheses/dev.de exists (`structattn translate` of the dev sources with the final model, beam 5,
length penalty 1.0), for dev too; the run's configuration,
model size, device, wall and training time, training throughput, dev BLEU history and provenance.
"""
from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from structattn.tasks.bleu import corpus_bleu
from structattn.tasks.multi30k import read_split
from structattn.io import upsert_jsonl

RESULTS = Path(__file__).resolve().parent.parent / "results"


def record(run_dir: Path, name: str, note: str | None = None, results: Path = RESULTS / "nmt.jsonl",
           outputs: Path = RESULTS / "nmt", root: Path = RESULTS.parent) -> dict:
    """Copy, score and record the run; ``hypotheses_<split>`` paths are written relative to ``root``."""
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    cfg = summary["config"]
    line = {"task": "multi30k", "variant": summary["variant"], "seed": summary["seed"], "run": name}
    dev = ["dev"] if (run_dir / "hypotheses" / "dev.de").is_file() else []
    for split in [*summary["tests"], *dev]:
        target = outputs / f"{name}.{split}.de"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(run_dir / "hypotheses" / f"{split}.de", target)
        hyps = target.read_text(encoding="utf-8").split("\n")[:-1]
        scored = corpus_bleu(hyps, read_split(split).targets)
        line[f"bleu_{split}"] = round(scored["bleu"], 2)
        line[f"hypotheses_{split}"] = str(target.resolve().relative_to(root.resolve()))
        line["bleu_signature"] = scored["signature"]
    keep = ("final_model", "dev_bleu_beam", "best_step", "best_dev_bleu_greedy", "updates", "epochs", "history",
            "train_seconds", "target_tokens_per_second", "wall_seconds", "device", "torch_threads", "model",
            "filter", "command", "structattn_version", "git_commit", "kernel")
    line.update({k: summary.get(k) for k in keep})
    line["config"] = {k: v for k, v in cfg.items() if k != "output_dir"}
    mech = {k: cfg[k] for k in ("layers", "k", "gate") if cfg.get(k) is not None}
    if mech:
        line["mechanism_options"] = mech
    if note:
        line["note"] = note
    upsert_jsonl(results, line, key="run")
    return line


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("name")
    ap.add_argument("--note")
    ap.add_argument("--results", type=Path, default=RESULTS / "nmt.jsonl",
                    help="the JSONL file (default results/nmt.jsonl)")
    ap.add_argument("--outputs", type=Path, default=RESULTS / "nmt",
                    help="where the translations go (default results/nmt)")
    args = ap.parse_args()
    line = record(args.run_dir, args.name, args.note, args.results, args.outputs)
    print(json.dumps({k: v for k, v in line.items() if k.startswith("bleu_") or k in ("run", "variant", "seed")}))


if __name__ == "__main__":
    main()
