"""Result tables in the layout of the SLA paper's Tables 1 and 2.

Reads ``results/<task>.jsonl`` (one line per finished run, written by ``structattn sweep``). Runs are
grouped by their whole configuration (`record_config`): a cell holds the
seeds of one configuration, never runs that differ in anything else. A column is a task and its training
data, split further where its runs differ in another setting (max length, batch size, model, ...; the
column name says which); a row is a variant (mechanism and its options, LISA weight). Per cell, the
(learning rate, epochs) with the best mean dev score is kept (the paper grid-searches these too); the
table gives mean ± std over its seeds, the number of seeds, an Average column over tasks, and Welch's
t-test p-value against the baseline, raw and Holm-adjusted over every comparison in the table.
"""
from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

from ..run_config import RunConfig
from ..train.config import config_key, result_fields
from ..train.significance import holm, mean_std, welch_p
from ..sweep import record_config, variant_label

TASK_ORDER = ["cola", "sst2", "mrpc", "stsb", "rte", "qnli", "conll2003", "fce", "ud_pos"]
TASK_NAMES = {"cola": "CoLA", "sst2": "SST-2", "mrpc": "MRPC", "stsb": "STS-B", "rte": "RTE", "qnli": "QNLI",
              "conll2003": "CoNLL-2003", "fce": "FCE", "ud_pos": "EWT UPOS"}

ROW_FAMILIES = ["WLA", "SLA", "LISA"]

# How the result fields of a run's configuration are used: everything not named here is a setting.
GRID_FIELDS = ("learning_rate", "epochs")  # grid-searched per cell: the best mean over seeds is kept
VARIANT_FIELDS = ("mechanism", "m", "k", "gate_bias", "lisa_weight", "sgnet", "sgnet_alpha",
                  "sgnet_init")  # the row (variant_label)
DATA_FIELDS = ("task", "max_train_examples")  # the column
NOT_SETTINGS = set(GRID_FIELDS + VARIANT_FIELDS + DATA_FIELDS + ("seed",))


def _split_column(column: str) -> tuple[str, int, str]:
    """``"sst2:first10000 [max_length=128]"`` -> ``("sst2", 10000, "max_length=128")`` (inverse of
    `column_ids`)."""
    base, _, settings = column.partition(" [")
    task, _, first = base.partition(":first")
    return task, int(first or 0), settings.removesuffix("]")


def column_base(column: str) -> str:
    """The task and training data of a column: ``"sst2:first10000 [max_length=128]"`` -> ``"sst2:first10000"``."""
    return column.partition(" [")[0]


def column_matches(selector: str, column: str) -> bool:
    """Whether a user's column selector (``sst2``, ``sst2:first10000`` or a whole column name) names ``column``."""
    return selector in (column, column_base(column))


def column_name(column: str, suffix: str = "") -> str:
    """``"sst2:first10000"`` -> ``"SST-2, first 10,000"``; ``"cola [max_length=128]"`` -> ``"CoLA, max_length=128"``."""
    task, first, settings = _split_column(column)
    name = TASK_NAMES.get(task, task) + (f", first {first:,}{suffix}" if first else "")
    return name + (f", {settings}" if settings else "")


def column_title(column: str, runs: list[dict]) -> str:
    """``"MRPC (f1)"``, ``"SST-2, first 10,000 (accuracy)"``: the data and the metric the cells hold."""
    task, _, _ = _split_column(column)
    metric = next((r.get("main_metric") for r in runs if r["task"] == task and r.get("main_metric")), None)
    return f"{column_name(column)} ({metric})" if metric else column_name(column)


def _column_order(column: str) -> tuple:
    task, first, settings = _split_column(column)
    return (TASK_ORDER.index(task) if task in TASK_ORDER else len(TASK_ORDER), task, -(first or 10**12), settings)


def _row_order(label: str, baseline: str) -> tuple:
    """Rows as in the SLA paper: the baseline, then WLA, SLA, LISA, then any other variant."""
    family = next((i for i, name in enumerate(ROW_FAMILIES) if label.startswith(name)), len(ROW_FAMILIES))
    return (label != baseline, family, label)


def _config_of(run: dict) -> RunConfig:
    """A results line's configuration: the one `load_runs` stored under ``_config``, else rebuilt
    (`record_config` reads the line's command with argparse: once per run)."""
    config = run.get("_config")
    return config if config is not None else record_config(run, source=run.get("_source", "results line"))


def run_config(run: dict) -> dict:
    """The result fields of a results line's configuration (see
    [`result_fields`][structattn.train.config.result_fields])."""
    return result_fields(_config_of(run))


def runner_result_files(results_dir: Path) -> tuple[list[Path], list[Path]]:
    """The results files of the classification/tagging runner (``<task>.jsonl`` for a task it knows) and the
    other ``*.jsonl`` files in ``results_dir`` (other systems' results, e.g. ``parsing.jsonl``, with their own
    reports)."""
    from ..tasks import TASKS

    files = sorted(Path(results_dir).glob("*.jsonl"))
    return [p for p in files if p.stem in TASKS], [p for p in files if p.stem not in TASKS]


def load_runs(results_dir: Path) -> list[dict]:
    """Every line of the runner's results files (see `runner_result_files`), with its configuration."""
    runs = []
    for path in runner_result_files(results_dir)[0]:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if line.strip():
                rec = json.loads(line)
                rec["_source"] = f"{path.name}:{n}"
                rec["_config"] = record_config(rec, source=rec["_source"])
                rec["label"] = variant_label(run_config(rec))  # from the settings, so old lines follow label changes
                runs.append(rec)
    return runs


def _settings(config: dict) -> dict:
    return {k: v for k, v in config.items() if k not in NOT_SETTINGS}


def _show(settings: dict) -> str:
    return ", ".join(f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in sorted(settings.items()))


def column_ids(runs: list[dict]) -> list[str]:
    """Each run's table column: ``task``, or ``task:first<N>`` when trained on the first N examples, and,
    where runs of that task and data differ in another setting, the values of those settings, e.g.
    ``sst2 [batch_size=16, max_length=128]``. Runs in one column share every setting."""
    configs = [run_config(r) for r in runs]
    bases = [c["task"] if not c["max_train_examples"] else f"{c['task']}:first{c['max_train_examples']}"
             for c in configs]
    values: dict[str, dict[str, set]] = defaultdict(lambda: defaultdict(set))
    for base, config in zip(bases, configs):
        for k, v in _settings(config).items():
            values[base][k].add(json.dumps(v))
    out = []
    for base, config in zip(bases, configs):
        varying = {k: v for k, v in _settings(config).items() if len(values[base][k]) > 1}
        out.append(f"{base} [{_show(varying)}]" if varying else base)
    return out


def best_configs(runs: list[dict]) -> dict[tuple[str, str], dict]:
    """(column, label) -> {"scores": [...per seed...], "lr":..., "epochs":..., "metrics": {...}, "runs": [...], ...}.

    Runs are grouped by their whole configuration but the seed; among the groups of one column and row
    (configurations that differ only in learning rate and epochs), the one with the best mean is kept, as
    the paper grid-searches these.
    """
    runs = [r for r in runs if r.get("best") is not None]
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r, column in zip(runs, column_ids(runs)):
        groups[(column, config_key(_config_of(r), ignore=("seed",)))].append(r)
    defaults = _settings(result_fields(RunConfig()))
    best: dict[tuple[str, str], dict] = {}
    for (column, key), members in groups.items():
        config = run_config(members[0])
        label = variant_label(config)
        scores = [100.0 * m["best"] for m in members]
        mean, _ = mean_std(scores)
        cur = best.get((column, label))
        if cur is None or mean > cur["mean"]:
            best[(column, label)] = {"scores": scores, "mean": mean, "lr": config["learning_rate"],
                                     "epochs": config["epochs"], "key": key,
                                     "settings": {k: v for k, v in _settings(config).items() if v != defaults[k]},
                                     "seeds": sorted(m.get("seed") for m in members),
                                     "metrics": _metric_lists(members), "runs": members,
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
    full = [t for t in tasks if ":first" not in column_base(t)]
    one_per_task = len({_split_column(t)[0] for t in full}) == len(full)
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
        avg = f"{sum(means) / len(means):.2f}" if one_per_task and full and len(means) == len(full) else "–"
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {avg} |")
    lines += ["", "Average: over the columns trained on the full training set, where the variant has all of them"
              + ("." if one_per_task else "; none here, as a task has columns with different settings.")]
    lines += _p_value_table(best, tasks, titles, labels, baseline)
    lines += _secondary_metrics(best, tasks, labels)
    lines += ["", "Selected configuration per cell (learning rate, epochs, seeds, the configuration's key over "
              "everything but the seed, and every setting that differs from RunConfig's default):", ""]
    for (t, label), b in sorted(best.items()):
        lines.append(f"- {t} / {label}: lr={b['lr']}, epochs={b['epochs']}, seeds={b['seeds']}, key={b['key']}; "
                     f"{_show(b['settings']) or 'defaults'}")
    cmds = sorted({c for b in best.values() for c in b["commands"] if c})
    if cmds:
        lines += ["", "Commands that produced these runs:", "", "```"] + cmds + ["```"]
    return "\n".join(lines) + "\n"


def _p_value_table(best: dict, tasks: list[str], titles: list[str], labels: list[str], baseline: str) -> list[str]:
    """Welch's p of every variant against the baseline of the same column, raw and Holm-adjusted over the
    family of all those comparisons in the table."""
    raw = {}
    for label in labels:
        for t in tasks:
            a, b = best.get((t, label)), best.get((t, baseline))
            if label != baseline and a and b:
                raw[(label, t)] = welch_p(a["scores"], b["scores"])
    family = [c for c, p in raw.items() if not math.isnan(p)]
    adjusted = dict(zip(family, holm([raw[c] for c in family])))
    lines = ["", f"Welch t-test p-value against `{baseline}` (two-sided), raw / Holm-adjusted. The Holm family is "
             f"every comparison in this table, each variant against `{baseline}` in the same column "
             f"({len(family)} comparisons); – where either side has < 2 seeds or both have no spread:", "",
             "| variant | " + " | ".join(titles) + " |", "|" + "---|" * (len(tasks) + 1)]
    for label in labels:
        if label == baseline:
            continue
        cells = [f"{raw[(label, t)]:.3f} / {adjusted[(label, t)]:.3f}" if (label, t) in adjusted else "–"
                 for t in tasks]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    significant = [f"{label} on {column_name(t)}" for (label, t), p in adjusted.items() if p < 0.05]
    lines += ["", "Holm-adjusted p < 0.05: " + ("; ".join(significant) if significant else "none") + "."]
    return lines


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
