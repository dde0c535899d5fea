"""The plan in lane-hours (results/PEERS.md): each run of the plan, its measured CPU seconds per epoch
(results/peers/epoch_cost.jsonl, `bash experiments/run_peers.sh plan`), the epochs it is expected to take to stop
(best dev epoch + the patience of 5, estimated from the committed dev curves below) and seeds; lane-hours = one
thread of one core for that long.

  python experiments/peers/lane_hours.py [--costs results/peers/epoch_cost.jsonl] [--width 384]

Prints a Markdown table: run, CPU s per epoch, epochs (low / planned / high), lane-hours per seed at the planned
epochs (low - high), seeds, lane-hours in all. ``--costs-table``: instead, every measured configuration (parameters,
CPU seconds per epoch and its parts, updates an epoch).
"""
from __future__ import annotations

import argparse
import sys

from structattn.io import read_jsonl

#: Epochs to the stop (best dev epoch + patience 5), low / planned / high, and why.
EPOCHS = {
    # the committed runs until dev F1 stopped improving (results/peers/converged_runs.jsonl): BNA 46 and 32 epochs,
    # SuPar's CharLSTM parser 53 and 37
    "small-bna": ((32, 40, 46), "measured: 46 and 32 epochs (results/peers/converged_runs.jsonl)"),
    "supar-char": ((37, 45, 53), "measured: 53 and 37 epochs"),
    # SuPar's MiniLM recipe decays its rate linearly to 0 at epoch 30 (supar_crf_con_minilm.ini): at most 30
    "supar-minilm": ((15, 30, 30), "its schedule ends at epoch 30; patience 5 may stop it sooner"),
    # the same batches and a warm-up as the small runs, the encoder fine-tuned: taken as the small runs' range
    "minilm-ft-bna": ((20, 40, 46), "as the small runs (same batches and layers); a fine-tuned encoder may peak sooner"),
    "minilm-ft-sa": ((20, 40, 46), "as minilm-ft-bna"),
    # 13 updates an epoch at batch 250 instead of 96: between the small runs' passes over the data (about 40
    # epochs) and their number of updates (2,600-3,900 updates = 200-300 epochs of 13)
    "paper": ((45, 120, 300), "between the small runs' passes (40) and their updates (3,900 = 300 epochs of 13)"),
}
SEEDS = 2


def plan_rows(costs: dict[str, dict], width: int) -> list[dict]:
    """One row per run of the plan (in the order of experiments/run_peers.sh campaign)."""
    names = ["supar-minilm", "minilm-ft-bna", "minilm-ft-sa"] + [f"paper-d{width}-{v}"
                                                                 for v in ("bna", "sa", "bimsa", "sa_nsa")]
    rows = []
    for name in names:
        if name not in costs:
            raise SystemExit(f"{name}: no line in the costs file; run `bash experiments/run_peers.sh plan` first")
        (low, planned, high), why = EPOCHS["paper" if name.startswith("paper-") else name]
        per_epoch = costs[name]["cpu_s_per_epoch"]
        rows.append({"run": name, "cpu_s_per_epoch": per_epoch, "parameters": costs[name]["parameters"],
                     "epochs": (low, planned, high), "why": why,
                     "lane_hours": tuple(round(per_epoch * e / 3600, 1) for e in (low, planned, high))})
    return rows


def costs_table(costs: dict[str, dict]) -> None:
    print("| configuration | parameters | CPU s / epoch | training | evaluation | updates / epoch (timed) |")
    print("|---|---:|---:|---:|---:|---|")
    for name, c in costs.items():
        evaluation = c.get("dev_parse_cpu_s", 0) + c.get("dev_eval_cpu_s", 0) + c.get("test_eval_cpu_s", 0)
        print(f"| {name} | {c['parameters'] / 1e6:.2f}M | {c['cpu_s_per_epoch']:.1f} | {c['train_cpu_s_per_epoch']:.1f} "
              f"| {evaluation:.1f} | {c['updates_per_epoch']} ({c['updates_timed']}) |")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--costs", default="results/peers/epoch_cost.jsonl")
    p.add_argument("--width", type=int, default=384, help="the paper-shape width of the plan (default 384)")
    p.add_argument("--costs-table", action="store_true", help="print the measured configurations instead")
    a = p.parse_args(argv)
    costs = {line["name"]: line for line in read_jsonl(a.costs)}  # a later line of the same name wins
    if a.costs_table:
        costs_table(costs)
        return 0
    rows = plan_rows(costs, a.width)
    print("| run | parameters | CPU s / epoch | epochs to stop (low / planned / high) | lane-hours per seed "
          "(planned; low - high) | seeds | lane-hours |")
    print("|---|---:|---:|---|---|---:|---:|")
    for r in rows:
        lo, mid, hi = r["lane_hours"]
        print(f"| {r['run']} | {r['parameters'] / 1e6:.1f}M | {r['cpu_s_per_epoch']:.0f} | "
              f"{' / '.join(map(str, r['epochs']))} | {mid} ({lo} - {hi}) | {SEEDS} | {mid * SEEDS:.1f} |")
    total = [sum(r["lane_hours"][k] for r in rows) * SEEDS for k in range(3)]
    print(f"| **all** | | | | | | **{total[1]:.1f}** ({total[0]:.1f} - {total[2]:.1f}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
