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
TASK_NAMES = {"cola": "CoLA", "sst2": "SST-2", "mrpc": "MRPC", "stsb": "STS-B", "rte": "RTE", "qnli": "QNLI",
              "conll2003": "CoNLL-2003", "fce": "FCE", "ud_pos": "EWT UPOS"}

ROW_FAMILIES = ["WLA", "SLA", "LISA"]


def _split_column(column: str) -> tuple[str, int]:
    """``"sst2:first10000"`` -> ``("sst2", 10000)``; ``"cola"`` -> ``("cola", 0)`` (inverse of :func:`column_of`)."""
    task, _, first = column.partition(":first")
    return task, int(first or 0)


def column_name(column: str, suffix: str = "") -> str:
    """``"sst2:first10000"`` -> ``"SST-2, first 10,000"``; ``"conll2003"`` -> ``"CoNLL-2003"``."""
    task, first = _split_column(column)
    return TASK_NAMES.get(task, task) + (f", first {first:,}{suffix}" if first else "")


def column_title(column: str, runs: list[dict]) -> str:
    """``"MRPC (f1)"``, ``"SST-2, first 10,000 (accuracy)"``: the data and the metric the cells hold."""
    task, _ = _split_column(column)
    metric = next((r.get("main_metric") for r in runs if r["task"] == task and r.get("main_metric")), None)
    return f"{column_name(column)} ({metric})" if metric else column_name(column)


def _column_order(column: str) -> tuple:
    task, first = _split_column(column)
    return (TASK_ORDER.index(task) if task in TASK_ORDER else len(TASK_ORDER), task, -(first or 10**12))


def _row_order(label: str, baseline: str) -> tuple:
    """Rows as in the SLA paper: the baseline, then WLA, SLA, LISA, then any other variant."""
    family = next((i for i, name in enumerate(ROW_FAMILIES) if label.startswith(name)), len(ROW_FAMILIES))
    return (label != baseline, family, label)


def load_runs(results_dir: Path) -> list[dict]:
    runs = []
    for path in sorted(Path(results_dir).glob("*.jsonl")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if line.strip():
                rec = json.loads(line)
                rec["label"] = variant_label(rec)  # from the run's settings, so old lines follow label changes
                rec["_source"] = f"{path.name}:{n}"
                runs.append(rec)
    return runs


def column_of(run: dict) -> str:
    """The table column of a run: its task, or ``task:first<N>`` when trained on the first N examples.

    Runs on different training data never share a column, so no cell compares them."""
    limit = run.get("max_train_examples") or 0
    return run["task"] if not limit else f"{run['task']}:first{limit}"


def best_configs(runs: list[dict]) -> dict[tuple[str, str], dict]:
    """(column, label) -> {"scores": [...per seed...], "lr":..., "epochs":..., "metrics": {...}, ...}.

    Within a column (a task and its training data), the (learning rate, epochs) configuration with
    the best mean over seeds is kept, as the paper grid-searches these.
    """
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in runs:
        if r.get("best") is None:
            continue
        groups[(column_of(r), r["label"], r.get("learning_rate"), r.get("epochs"))].append(r)
    best: dict[tuple[str, str], dict] = {}
    for (column, label, lr, ep), members in groups.items():
        scores = [100.0 * m["best"] for m in members]
        mean, _ = mean_std(scores)
        cur = best.get((column, label))
        if cur is None or mean > cur["mean"]:
            best[(column, label)] = {"scores": scores, "mean": mean, "lr": lr, "epochs": ep,
                                     "limit": members[0].get("max_train_examples") or 0,
                                     "batches": sorted({"length-grouped" if m.get("group_by_length") else "shuffled"
                                                        for m in members}),
                                     "seeds": sorted(m["seed"] for m in members),
                                     "metrics": _metric_lists(members),
                                     "commands": sorted({m.get("command", "") for m in members})}
    return best


def _metric_lists(members: list[dict]) -> dict[str, list[float]]:
    """Every scalar metric of the runs' best evaluation, in percent, one value per seed."""
    out: dict[str, list[float]] = defaultdict(list)
    for m in members:
        for key, value in (m.get("best_metrics") or {}).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and not key.startswith("gate"):
                out[key].append(100.0 * value)
    return {k: v for k, v in out.items() if len(v) == len(members)}


def markdown_table(runs: list[dict], baseline: str = "baseline") -> str:
    """The comparison table: rows = variants, columns = tasks + Average; p-values below."""
    best = best_configs(runs)
    tasks = sorted({k[0] for k in best}, key=_column_order)
    full = [t for t in tasks if ":first" not in t]
    labels = sorted({k[1] for k in best}, key=lambda s: _row_order(s, baseline))
    titles = [column_title(t, runs) for t in tasks]
    header = "| variant | " + " | ".join(titles) + " | Average |"
    lines = [header, "|" + "---|" * (len(tasks) + 2)]
    for label in labels:
        cells, means = [], []
        for t in tasks:
            b = best.get((t, label))
            if b is None:
                cells.append("–")
                continue
            mean, std = mean_std(b["scores"])
            if t in full:
                means.append(mean)
            cells.append(f"{mean:.2f} ± {std:.2f} (n={len(b['scores'])})")
        avg = f"{sum(means) / len(means):.2f}" if full and len(means) == len(full) else "–"
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {avg} |")
    lines += ["", "Average: over the columns trained on the full training set, where the variant has all of them.",
              "", f"Welch t-test p-value against `{baseline}` (two-sided; – where either side has < 2 seeds):", "",
              "| variant | " + " | ".join(titles) + " |",
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
    lines += _secondary_metrics(best, tasks, labels)
    lines += ["", "Selected configuration per cell (learning rate, epochs, training examples (0 = all), batches, "
              "seeds):", ""]
    for (t, label), b in sorted(best.items()):
        lines.append(f"- {t} / {label}: lr={b['lr']}, epochs={b['epochs']}, train={b['limit']}, "
                     f"batches={'+'.join(b['batches'])}, seeds={b['seeds']}")
    cmds = sorted({c for b in best.values() for c in b["commands"] if c})
    if cmds:
        lines += ["", "Commands that produced these runs:", "", "```"] + cmds + ["```"]
    return "\n".join(lines) + "\n"


def _secondary_metrics(best: dict, tasks: list[str], labels: list[str]) -> list[str]:
    """Every metric of the tasks that report more than one (MRPC acc/F1, STS-B Pearson/Spearman, P/R/F)."""
    lines: list[str] = []
    for t in tasks:
        names = sorted({k for (task, _), b in best.items() if task == t for k in b["metrics"]})
        if len(names) < 2:
            continue
        if not lines:
            lines = ["", "All metrics of the selected runs (mean ± std over the same seeds):"]
        lines += ["", column_name(t, " train examples") + ":", "", "| variant | " + " | ".join(names) + " |",
                  "|" + "---|" * (len(names) + 1)]
        for label in labels:
            b = best.get((t, label))
            if b is None:
                continue
            cells = []
            for name in names:
                values = b["metrics"].get(name)
                cells.append("–" if not values else "{:.2f} ± {:.2f}".format(*mean_std(values)))
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines
