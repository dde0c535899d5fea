"""Record the short fp32 / bf16 runs of experiments/run_precision_experiments.sh.

    python experiments/record_precision_runs.py [--runs runs/precision]

For each workload whose two runs (WORKLOAD-fp32, WORKLOAD-bf16) have finished, writes one JSON line per run to
results/precision_runs.jsonl and the table of results/PRECISION.md:

- time per update: the engine's own clock (``checkpoint/state.json``: ``train_seconds`` / ``step``; training
  only, without evaluation, test prediction or data preparation);
- score: parsing and translation score their committed test output with the project's scorers (EVALB on
  results/precision/parsing-P.test.trees against the test split's treebank files; sacreBLEU via ``structattn
  score bleu``'s function on results/precision/translation-P.test2016.de); the sentence and QA runs have no
  prediction file: their figure is the trainer's dev evaluation at the end of training (``checkpoint/state.json``
  history: SST-2 dev accuracy on all 872 sentences; SQuAD 2.0 F1 of the official evaluate-v2.0 logic on the first
  500 questions of the squad2 dev part).
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
from record_laptop_run import score_test_output  # noqa: E402

WORKLOADS = {  # name: (family, what, metric)
    "sentence": ("sentence (train)", "MiniLM, SST-2: 4,000 training sentences, 2 epochs", "dev accuracy (%)"),
    "qa": ("QA (train)", "reader's encoder + span head, SQuAD 2.0 part: 1,000 questions, 1 epoch",
           "dev F1, first 500 questions"),
    "parsing": ("parsing (train-parsing)", "BNA on frozen MiniLM, d 128, 4 epochs of the WSJ sample",
                "test F1 (EVALB)"),
    "translation": ("translation (train-translation)", "tiny transformer, Multi30k, 300 updates",
                    "test2016 BLEU"),
}
PRECISIONS = ("fp32", "bf16")


def _score(workload: str, run: Path, precision: str, state: dict) -> float:
    """The run's final score, from its committed output where it has one (see the module docstring)."""
    if workload == "sentence":
        return 100 * state["history"][-1]["accuracy"]
    if workload == "qa":
        return state["history"][-1]["f1"]
    output = run / ("test.trees" if workload == "parsing" else "hypotheses/test2016.de")
    target = RESULTS / "precision" / f"{workload}-{precision}.{output.name}"
    target.parent.mkdir(exist_ok=True)
    shutil.copyfile(output, target)
    return score_test_output(target)[1]


def _line(workload: str, run: Path, precision: str) -> dict:
    state = json.loads((run / "checkpoint" / "state.json").read_text())
    command = Path(f"{run}.command").read_text().strip()
    family, what, metric = WORKLOADS[workload]
    return {"workload": workload, "family": family, "what": what, "precision": precision,
            "updates": state["step"], "train_seconds": round(state["train_seconds"], 1),
            "seconds_per_update": round(state["train_seconds"] / state["step"], 3),
            "metric": metric, "score": round(_score(workload, run, precision, state), 2),
            "torch_threads": 1, "cpu": cpu_name(), "cpu_flags": cpu_flags(), "command": command}


def _table(lines: list[dict]) -> str:
    rows = ["| family | workload | metric | fp32 | bf16 | Δ (bf16 − fp32) | s / update fp32 | s / update bf16 "
            "| bf16 / fp32 time |", "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    by = {(x["workload"], x["precision"]): x for x in lines}
    for workload, (family, what, metric) in WORKLOADS.items():
        if (workload, "fp32") not in by or (workload, "bf16") not in by:
            continue
        a, b = by[workload, "fp32"], by[workload, "bf16"]
        rows.append(f"| {family} | {what} | {metric} | {a['score']:.2f} | {b['score']:.2f} | "
                    f"{b['score'] - a['score']:+.2f} | {a['seconds_per_update']:.3f} | {b['seconds_per_update']:.3f}"
                    f" | {b['seconds_per_update'] / a['seconds_per_update']:.2f}x |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=Path, default=Path("runs/precision"))
    args = ap.parse_args()
    path = RESULTS / "precision_runs.jsonl"
    for workload in WORKLOADS:
        runs = {p: args.runs / f"{workload}-{p}" for p in PRECISIONS}
        done = {p: r for p, r in runs.items() if (r / "checkpoint" / "state.json").exists()
                and json.loads((r / "checkpoint" / "state.json").read_text()).get("finished")}
        if len(done) < 2:
            print(f"{workload}: {len(done)} of 2 runs finished; not recorded", file=sys.stderr)
            continue
        for p, run in done.items():
            upsert_jsonl(path, _line(workload, run, p), key=lambda x: (x["workload"], x["precision"]))
    lines = [json.loads(x) for x in path.read_text().splitlines()] if path.is_file() else []
    table = _table(lines)
    (RESULTS / "PRECISION.md").write_text(_page(lines, table))
    print(table)


def _page(lines: list[dict], table: str) -> str:
    commands = "\n".join(f"{x['workload']}-{x['precision']}: {x['command']}" for x in lines)
    machine = f"{lines[0]['cpu']} ({lines[0]['cpu_flags']}), torch threads 1" if lines else "no runs"
    return f"""# fp32 against bf16 autocast: one short training run per trainer family

Generated by `python experiments/record_precision_runs.py` from the runs of
`bash experiments/run_precision_experiments.sh all` (lines: `results/precision_runs.jsonl`). Each pair is the same
command, seed and data in both precisions, run one after the other on one CPU thread. Time per update is the
engine's training clock (`checkpoint/state.json`: train_seconds / updates; no evaluation, test prediction or data
preparation). Parsing and translation scores are recomputed from the committed test output
(`results/precision/`) with the project's scorers (EVALB; sacreBLEU 13a, cased); the sentence and QA figures are
the trainers' dev evaluations at the end of training (no prediction file). One run per precision: a difference
of a few tenths is within what another seed moves.

Machine: {machine}. The machine was shared: another one-thread training ran on the
second core throughout, so absolute times are slower than on an idle machine; the ratio within a pair is the
figure to read.

{table}

Commands:

```
{commands}
```
"""


if __name__ == "__main__":
    main()
