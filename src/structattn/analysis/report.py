"""Result tables in the layout of the SLA paper's Tables 1 and 2.

Reads ``results/<task>.jsonl`` (one line per finished run, written by ``structattn sweep``).
Per task and variant, the (learning rate, epochs) configuration with the best mean dev score
is kept (the paper grid-searches these too); the table gives mean ± std over its seeds, the
number of seeds, an Average column over tasks, and Welch's t-test p-value against the baseline.
"""
from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

from ..train.significance import mean_std, welch_p
from ..train.sweep import variant_label

TASK_ORDER = ["cola", "sst2", "mrpc", "stsb", "rte", "qnli", "conll2003", "fce", "ud_pos"]
TASK_TITLES = {"cola": "CoLA (MCC)", "sst2": "SST-2 (acc)", "mrpc": "MRPC (acc)", "stsb": "STS-B (Pearson)",
               "rte": "RTE (acc)", "qnli": "QNLI (acc)", "conll2003": "CoNLL-2003 (F1)", "fce": "FCE (F0.5)",
               "ud_pos": "EWT UPOS (acc)"}


def load_runs(results_dir: Path) -> list[dict]:
    runs = []
    for path in sorted(Path(results_dir).glob("*.jsonl")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if line.strip():
                rec = json.loads(line)
                rec.setdefault("label", variant_label(rec))
                rec["_source"] = f"{path.name}:{n}"
                runs.append(rec)
    return runs


def best_configs(runs: list[dict]) -> dict[tuple[str, str], dict]:
    """(task, label) -> {"scores": [...per seed...], "lr":..., "epochs":..., "commands": {...}}."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in runs:
        if r.get("best") is None:
            continue
        groups[(r["task"], r["label"], r.get("learning_rate"), r.get("epochs"), r.get("max_train_examples", 0))].append(r)
    best: dict[tuple[str, str], dict] = {}
    for (task, label, lr, ep, limit), members in groups.items():
        scores = [100.0 * m["best"] for m in members]
        mean, _ = mean_std(scores)
        cur = best.get((task, label))
        if cur is None or mean > cur["mean"]:
            best[(task, label)] = {"scores": scores, "mean": mean, "lr": lr, "epochs": ep, "limit": limit,
                                   "seeds": sorted(m["seed"] for m in members),
                                   "commands": sorted({m.get("command", "") for m in members})}
    return best


def markdown_table(runs: list[dict], baseline: str = "baseline") -> str:
    """The comparison table: rows = variants, columns = tasks + Average; p-values below."""
    best = best_configs(runs)
    tasks = [t for t in TASK_ORDER if any(k[0] == t for k in best)] + \
        sorted({k[0] for k in best} - set(TASK_ORDER))
    labels = sorted({k[1] for k in best}, key=lambda s: (s != baseline, s))
    header = "| variant | " + " | ".join(TASK_TITLES.get(t, t) for t in tasks) + " | Average |"
    lines = [header, "|" + "---|" * (len(tasks) + 2)]
    for label in labels:
        cells, means = [], []
        for t in tasks:
            b = best.get((t, label))
            if b is None:
                cells.append("–")
                continue
            mean, std = mean_std(b["scores"])
            means.append(mean)
            cells.append(f"{mean:.2f} ± {std:.2f} (n={len(b['scores'])})")
        avg = f"{sum(means) / len(means):.2f}" if len(means) == len(tasks) else "–"
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {avg} |")
    lines += ["", f"Welch t-test p-value against `{baseline}` (two-sided; – where either side has < 2 seeds):", "",
              "| variant | " + " | ".join(TASK_TITLES.get(t, t) for t in tasks) + " |",
              "|" + "---|" * (len(tasks) + 1)]
    for label in labels:
        if label == baseline:
            continue
        cells = []
        for t in tasks:
            a, b = best.get((t, label)), best.get((t, baseline))
            p = welch_p(a["scores"], b["scores"]) if a and b else math.nan
            cells.append("–" if math.isnan(p) else f"{p:.3f}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "Selected configuration per cell (learning rate, epochs, training examples (0 = all), seeds):", ""]
    for (t, label), b in sorted(best.items()):
        lines.append(f"- {t} / {label}: lr={b['lr']}, epochs={b['epochs']}, train={b['limit']}, seeds={b['seeds']}")
    cmds = sorted({c for b in best.values() for c in b["commands"] if c})
    if cmds:
        lines += ["", "Commands that produced these runs:", "", "```"] + cmds + ["```"]
    return "\n".join(lines) + "\n"
