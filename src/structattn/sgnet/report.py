"""Tables and figures of the SG-Net reading-comprehension runs (the paper's Tables 1-3 and Figure 4).

    python -m structattn.sgnet.report --results-dir results

Reads ``squad2.jsonl`` (and ``squad11.jsonl``, ``race.jsonl``, ``mctest.jsonl`` when present) of a results folder,
one line per run; re-scores every committed prediction file with the project's scorer (SQuAD: the official
evaluate-v2.0 rules on the test part of the article split; multiple choice: accuracy) and refuses to go on when a
recorded figure differs from that score; writes ``READING.md`` and ``fig_<task>_question_length.png`` (Figure 4:
exact match by question length) there. This repository's report, with its readers described, is made by
``python experiments/reading_report.py``.

Significance: for each variant against the baseline of the same seed (in a group of runs without a baseline: against
the "+ vanilla attention only" row, the control with the SG layer's parameter count), a paired bootstrap over the test
questions ([`paired_bootstrap_mean`][structattn.train.significance.paired_bootstrap_mean]) on per-question F1 (SQuAD) or
correctness (multiple choice), Holm-adjusted over every comparison in the file; and Welch's t over seeds where
both sides have at least 2.
"""
from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..io import read_jsonl
from ..tasks.multiple_choice import MC_RESULT_FILES
from ..train.config import PRECISIONS
from ..train.significance import holm, mean_std, paired_bootstrap_mean, welch_p

SPAN_TASKS = ("squad2", "squad11")
MC_FILES = MC_RESULT_FILES  # each line's "task" names its task (race_m, mctest500 ...)
# The paper's Table 3 rows (variant names as results lines give them).
TABLE3 = [("baseline", "baseline"), ("sgnet:agg=vanilla", "+ vanilla attention only"),
          ("sgnet:agg=sg_only", "+ syntax-guided attention only"), ("sgnet", "+ dual contextual attention (SG-Net)"),
          ("sgnet:agg=concat", "concatenation"), ("sgnet:agg=biattention", "bi-attention")]
BUCKETS = 10
#: What each span task's test split is (the figures are on it).
SPLIT_WORDS = {"squad2": "test part", "squad11": "dev set (10,570 questions: task squad11's test split)"}


def reference_variant(by_variant: dict) -> str | None:
    """The row a group's other variants are compared with: the baseline, else (a group of Table 3 rows run without
    one) the vanilla-attention layer, which adds the SG layer's parameters without its syntax; None when neither."""
    for variant in ("baseline", "sgnet:agg=vanilla"):
        if variant in by_variant:
            return variant
    return None


def _check(run: dict, key: str, value: float) -> None:
    if abs(float(run[key]) - float(value)) > 1e-9:
        raise ValueError(f"{run['run']}: recorded {key} {run[key]} but {run['predictions']} scores {value}")


def load_span_runs(results_dir: Path, task: str) -> tuple[list[dict], dict]:
    """Every line of ``<task>.jsonl`` with ``_em`` / ``_f1`` = per-question scores (0/1 and 0..1) of its committed
    predictions on the test split, in question order; and that split's SQuAD dict."""
    from ..tasks.squad import get_qa_task
    from ..tasks.squad_eval import evaluate, has_answer, raw_scores

    dataset = get_qa_task(task).read("test").dataset
    runs = []
    for run in read_jsonl(results_dir / f"{task}.jsonl"):
        preds = json.loads((results_dir.parent / run["predictions"]).read_text(encoding="utf-8"))
        scores = evaluate(dataset, preds)
        for key in ("exact", "f1"):
            _check(run, key, scores[key])
        em, f1 = raw_scores(dataset, preds)  # predictions hold "" where the model answered no-answer
        run["_qids"] = list(em)
        run["_em"] = np.array([100.0 * em[q] for q in run["_qids"]])
        run["_f1"] = np.array([100.0 * f1[q] for q in run["_qids"]])
        if "answer_all" in run:  # the best non-null answer of every question: span extraction alone
            everything = json.loads((results_dir.parent / run["answer_all"]["predictions"]).read_text(encoding="utf-8"))
            scores = evaluate(dataset, everything)
            for key in ("HasAns_exact", "HasAns_f1"):
                _check({"run": run["run"], "predictions": run["answer_all"]["predictions"], key: run["answer_all"][key]},
                       key, scores[key])
            em_all, f1_all = raw_scores(dataset, everything)
            answerable = has_answer(dataset)
            run["_hasans_f1"] = np.array([100.0 * f1_all[q] for q in run["_qids"] if answerable[q]])
            run["_hasans_em"] = np.array([100.0 * em_all[q] for q in run["_qids"] if answerable[q]])
            run["_hasans_qids"] = [q for q in run["_qids"] if answerable[q]]
        runs.append(run)
    return runs, dataset


def load_mc_runs(results_dir: Path, name: str) -> dict[str, list[dict]]:
    """Every line of ``<name>.jsonl`` by its task, with ``_correct`` = per-question correctness (0/100) of its
    committed predictions ({qid: option letter}) on the task's test split, re-scored by the project's scorer."""
    from ..tasks.multiple_choice import get_mc_task, score_option_letters

    by_task: dict[str, list[dict]] = {}
    for run in read_jsonl(results_dir / f"{name}.jsonl"):
        questions = get_mc_task(run["task"]).read("test")
        letters = json.loads((results_dir.parent / run["predictions"]).read_text(encoding="utf-8"))
        _check(run, "accuracy", score_option_letters(run["task"], questions, letters)["accuracy"])
        run["_correct"] = np.array([100.0 * (str(letters.get(q.qid, "")).strip() == chr(ord("A") + q.label))
                                    for q in questions])   # as the scorer reads a letter
        by_task.setdefault(run["task"], []).append(run)
    return by_task


def _by_variant(runs: list[dict]) -> dict[str, dict[int, dict]]:
    """variant -> seed -> run; two runs of one variant and seed in one group would hide one of them: refused."""
    out: dict[str, dict[int, dict]] = {}
    for run in runs:
        seeds = out.setdefault(run["variant"], {})
        if run["seed"] in seeds:
            raise ValueError(f"{seeds[run['seed']]['run']} and {run['run']} are both {run['variant']} seed "
                             f"{run['seed']} of the same training (reading_report.training_key): give them "
                             "different seeds, or let their config or train_device tell them apart")
        seeds[run["seed"]] = run
    return out


def _fmt_mean(values: list[float]) -> str:
    m, s = mean_std(values)
    return f"{m:.2f} ± {s:.2f}" if len(values) > 1 else f"{m:.2f}"


def _fmt_p(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def comparisons(by_variant: dict, per_item: str) -> list[dict]:
    """Every (variant, seed) with a run of the `reference_variant` of the same seed: Δ and the
    paired-bootstrap p, Holm-adjusted over the whole list (each row names its ``reference``)."""
    rows = []
    reference = reference_variant(by_variant)
    base = by_variant.get(reference, {}) if reference else {}
    for variant, seeds in sorted(by_variant.items()):
        if variant == reference:
            continue
        for seed, run in sorted(seeds.items()):
            if seed in base:
                delta, p = paired_bootstrap_mean(run[per_item], base[seed][per_item])
                rows.append({"variant": variant, "seed": seed, "delta": delta, "p": p, "reference": reference})
    for row, adjusted in zip(rows, holm([r["p"] for r in rows]) if rows else []):
        row["p_holm"] = adjusted
    return rows


def comparison_lines(rows: list[dict], over: str, measure: str) -> list[str]:
    """The bullet list of `comparisons`' rows (empty when there are none)."""
    if not rows:
        return []
    reference = rows[0]["reference"]
    against = "the baseline" if reference == "baseline" else f"{reference} (this group has no baseline)"
    intro = (f"Against {against} of the same seed (paired bootstrap over {over}, 10,000 resamples; Holm over "
             "this table's comparisons):")
    return ["", intro, ""] + [f"- {r['variant']}, seed {r['seed']}: Δ {measure} {r['delta']:+.2f}, "
                              f"p = {_fmt_p(r['p'])} / {_fmt_p(r['p_holm'])} (raw / Holm)" for r in rows]


#: What a training task is, in words, in the order a report gives its groups (larger training sets first); runs
#: trained on one are compared only with each other. A repository passes its own table (its readers' names as
#: ``<task>_on_<reader>`` keys) to `write_report`; a key without an entry is described by
#: `describe_training`.
TASK_TRAINING = {
    "squad2_plus11": "trained on SQuAD 1.1 train + the squad2 train part (93,904 questions; task squad2_plus11)",
    "squad11": "trained on SQuAD 1.1 train",
    "squad2": "trained on the squad2 train part (6,305 questions)",
}


def reader_name(model: str) -> str:
    """The name of a saved reader a run started from: its run folder (``runs/reading/<name>/best`` -> name)."""
    path = Path(model)
    return path.parent.name if path.name == "best" else path.name


def training_key(run: dict) -> str | None:
    """What a results line's run was trained on, and how: its config's task; ``<task>_on_<reader>`` when it kept
    only the encoder of a saved reader (``model_parts`` ``encoder``; the reader is the line's ``encoder_from``,
    recorded where the config's model is a path on another machine, else named by `reader_name`);
    ``@<device>`` after it (the first word of its ``train_device``, lower case) when it was trained on another
    machine than the one that recorded it; ``:<precision>`` last (its config's, ``fp32`` for lines recorded before
    the option existed), so that a float32 and a bf16 run of one seed are never compared as one training. None for a
    line without its config (hand-written: counted as trained on its own task)."""
    config = run.get("config", {})
    task = config.get("task")
    if task is None:
        return None
    reader = run.get("encoder_from") or reader_name(config.get("model", ""))
    key = f"{task}_on_{reader}" if config.get("model_parts") == "encoder" else task
    device = str(run.get("train_device") or "").split()
    if device:
        key += f"@{device[0].lower()}"
    return f"{key}:{config.get('precision', PRECISIONS[0])}"


def split_training_key(key: str) -> tuple[str, str, str]:
    """A `training_key`'s parts: what the runs were trained on, the device word ('' when recorded where
    trained) and the precision (fp32 when the key has none: a bare task or reader name)."""
    rest, precision = key.rsplit(":", 1) if ":" in key else (key, PRECISIONS[0])
    base, _, device = rest.partition("@")
    return base, device, precision


def training_base(key: str) -> str:
    """What a `training_key` says the runs were trained on: the key without its device and precision."""
    return split_training_key(key)[0]


#: How a report names a run's ``--precision``.
PRECISION_WORDS = {"fp32": "float32", "bf16": "bf16 autocast", "fp16": "fp16 autocast with loss scaling"}


def describe_training(key: str, descriptions: Mapping[str, str] = TASK_TRAINING) -> str:
    """The words READING.md gives a `training_key` (its device and precision aside: the section names the
    lines' ``train_device`` and precision): its entry in ``descriptions``, else words made from the key."""
    base = training_base(key)
    if base in descriptions:
        return descriptions[base]
    task, _, reader = base.partition("_on_")
    return (f"the encoder of the saved reader {reader}, heads started fresh (--model-parts encoder) and trained on "
            f"{task}") if reader else f"trained on {base}"


def training_groups(runs: list[dict], descriptions: Mapping[str, str] = TASK_TRAINING
                    ) -> list[tuple[str | None, list[dict]]]:
    """The runs grouped by `training_key`, in the order of ``descriptions`` (device and precision after the
    base; keys without an entry after those with one, by name)."""
    groups: dict[str | None, list[dict]] = {}
    for run in runs:
        groups.setdefault(training_key(run), []).append(run)
    rank = {t: i for i, t in enumerate(descriptions)}
    return sorted(groups.items(), key=lambda kv: (kv[0] is None, rank.get(training_base(str(kv[0])), len(rank)),
                                                  str(kv[0])))


def span_section(task: str, runs: list[dict], dataset: dict, results_dir: Path, trained_on: str | None = None,
                 descriptions: Mapping[str, str] = TASK_TRAINING) -> str:
    by = _by_variant(runs)
    title = _training_title(f"## {task}: {SPLIT_WORDS.get(task, 'test split')}, exact match and F1 (official "
                            "evaluate-v2.0 rules)", task, runs, trained_on, descriptions)
    lines = [title, "",
             "| variant | seeds | EM per seed | F1 per seed | EM | F1 | HasAns F1 | NoAns F1 |",
             "|---|---|---|---|---|---|---|---|"]
    order = [v for v, _ in TABLE3 if v in by] + sorted(v for v in by if v not in dict(TABLE3))
    for variant in order:
        seeds = by[variant]
        ss = sorted(seeds)
        em = [seeds[s]["exact"] for s in ss]
        f1 = [seeds[s]["f1"] for s in ss]
        has = [seeds[s].get("HasAns_f1") for s in ss]
        no = [seeds[s].get("NoAns_f1") for s in ss]
        lines.append(f"| {variant} | {', '.join(map(str, ss))} | {', '.join(f'{x:.2f}' for x in em)} | "
                     f"{', '.join(f'{x:.2f}' for x in f1)} | {_fmt_mean(em)} | {_fmt_mean(f1)} | "
                     f"{_fmt_mean([x for x in has if x is not None]) if all(x is not None for x in has) else '-'} | "
                     f"{_fmt_mean([x for x in no if x is not None]) if all(x is not None for x in no) else '-'} |")
    rows = comparisons(by, "_f1")
    lines += comparison_lines(rows, "the test questions on per-question F1", "F1")
    if rows:
        reference = rows[0]["reference"]
        base = by[reference]
        for variant, seeds in sorted(by.items()):
            if variant != reference and len(seeds) > 1 and len(base) > 1:
                p = welch_p([s["f1"] for s in seeds.values()], [s["f1"] for s in base.values()])
                lines.append(f"- {variant} vs {reference} over seeds (Welch's t on test F1): p = {_fmt_p(p)}")
    lines += ["", answer_all_section(by), "", table3(by), "", figure4(figure_tag(task, trained_on), by, dataset,
                                                                      results_dir)]
    return "\n".join(lines)


def figure_tag(task: str, trained_on: str | None) -> str:
    """The part of a group's figure name after ``fig_``: the task when the runs were trained on it alone,
    ``squad2_on_<reader>`` as its key says, other training sets ``squad11_from_squad2_plus11``; then the device
    and, when not the default fp32, the precision (``..._nvidia_bf16``), so that no two groups share a file."""
    if trained_on is None:
        return task
    base, device, precision = split_training_key(trained_on)
    parts = [task if base == task else base if base.startswith(f"{task}_") else f"{task}_from_{base}"]
    if device:
        parts.append(device)
    if precision != PRECISIONS[0]:
        parts.append(precision)
    return "_".join(parts)


def answer_all_section(by: dict) -> str:
    """Span extraction alone: HasAns EM/F1 of the best non-null answer of every answerable question."""
    if not any("_hasans_f1" in run for seeds in by.values() for run in seeds.values()):
        return ""
    lines = ["### Span extraction alone: the best non-null answer of every answerable question",
             "(`<run>.answer_all.json`: what each model answers when the threshold never says \"no answer\")", "",
             "| variant | seeds | HasAns EM | HasAns F1 | HasAns F1 per seed |", "|---|---|---|---|---|"]
    order = [v for v, _ in TABLE3 if v in by] + sorted(v for v in by if v not in dict(TABLE3))
    for variant in order:
        seeds = {s: r for s, r in by[variant].items() if "_hasans_f1" in r}
        if not seeds:
            continue
        ss = sorted(seeds)
        em = [seeds[s]["answer_all"]["HasAns_exact"] for s in ss]
        f1 = [seeds[s]["answer_all"]["HasAns_f1"] for s in ss]
        lines.append(f"| {variant} | {', '.join(map(str, ss))} | {_fmt_mean(em)} | {_fmt_mean(f1)} | "
                     f"{', '.join(f'{x:.2f}' for x in f1)} |")
    rows = comparisons({v: {s: r for s, r in seeds.items() if "_hasans_f1" in r} for v, seeds in by.items()},
                       "_hasans_f1")
    return "\n".join(lines + comparison_lines(rows, "the answerable test questions", "HasAns F1"))


def table3(by: dict) -> str:
    """The paper's Table 3 layout on seed 1 (rows that have a seed-1 run; nothing for fewer than two rows), Δ against
    the `reference_variant`."""
    rows = [(v, label, by[v][1]) for v, label in TABLE3 if 1 in by.get(v, {})]
    if len(rows) < 2:
        return ""
    reference = reference_variant(by)
    against = dict(TABLE3)[reference] if reference else "baseline"
    lines = ["### Table 3 layout: components and aggregations (seed 1)", "", f"| model | EM | F1 | Δ F1 vs {against} |",
             "|---|---|---|---|"]
    base = by.get(reference, {}).get(1) if reference else None
    for _, label, run in rows:
        delta = f"{run['f1'] - base['f1']:+.2f}" if base is not None and run is not base else "-"
        lines.append(f"| {label} | {run['exact']:.2f} | {run['f1']:.2f} | {delta} |")
    return "\n".join(lines)


def question_lengths(dataset: dict, qids: list[str]) -> np.ndarray:
    """Words per question (the library's word split), in the order of ``qids``."""
    from ..tasks.text_words import words_of

    text = {qa["id"]: qa["question"] for a in dataset["data"] for p in a["paragraphs"] for qa in p["qas"]}
    return np.array([len(words_of(text[q])) for q in qids])


def _length_buckets(dataset: dict, qids: list[str]) -> tuple[list[np.ndarray], list[str]]:
    """Equal-count buckets of question positions by question length, and their "min-max words" labels."""
    lengths = question_lengths(dataset, qids)
    buckets = np.array_split(np.argsort(lengths, kind="stable"), BUCKETS)
    return buckets, [f"{lengths[b].min()}-{lengths[b].max()}" for b in buckets]


def figure4(task: str, by: dict, dataset: dict, results_dir: Path) -> str:
    """EM by question length, baseline vs SG-Net (mean over their seeds), in equal-count buckets (the paper's
    second view): the official EM of every test question, and (when recorded) the EM of the best non-null answer
    on the answerable questions; a PNG and its numbers."""
    if "baseline" not in by or "sgnet" not in by:
        return ""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("_em", "_qids", "exact match, all test questions (official)")]
    if all("_hasans_em" in run for v in ("baseline", "sgnet") for run in by[v].values()):
        panels.append(("_hasans_em", "_hasans_qids", "EM of the best non-null answer, answerable questions"))
    fig, axes = plt.subplots(1, len(panels), figsize=(6.4 * len(panels), 3.8), squeeze=False)
    tables = []
    for ax, (key, qids_key, title) in zip(axes[0], panels):
        buckets, labels = _length_buckets(dataset, next(iter(by["baseline"].values()))[qids_key])
        curves = {}
        for variant, label in (("baseline", "baseline"), ("sgnet", "SG-Net")):
            em = np.mean([run[key] for run in by[variant].values()], axis=0)
            curves[variant] = [float(em[b].mean()) for b in buckets]
            n = len(by[variant])
            ax.plot(range(BUCKETS), curves[variant], marker="o", label=f"{label} (mean of {n} seed{'s' * (n > 1)})")
        ax.set_xticks(range(BUCKETS), labels, rotation=45)
        ax.set_xlabel(f"question length in words ({BUCKETS} buckets of equal size)")
        ax.set_ylabel("exact match")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend()
        rows = [f"{title}:", "", "| words | questions | baseline EM | SG-Net EM |", "|---|---|---|---|"]
        rows += [f"| {lab} | {len(b)} | {x:.2f} | {y:.2f} |"
                 for lab, b, x, y in zip(labels, buckets, curves["baseline"], curves["sgnet"])]
        tables.append("\n".join(rows))
    fig.tight_layout()
    name = f"fig_{task}_question_length.png"
    fig.savefig(results_dir / name, dpi=120)
    plt.close(fig)
    return "\n\n".join(["### Figure 4 layout: exact match by question length (test part)", f"![{name}]({name})"]
                        + tables)


def _training_title(title: str, task: str, runs: list[dict], trained_on: str | None,
                    descriptions: Mapping[str, str]) -> str:
    """``title`` with what the runs were trained on (unless their own task alone), the devices that trained them and
    in what precision."""
    base = None if trained_on is None else training_base(trained_on)
    if base is not None and (base != task or base in descriptions):
        title += f"; {describe_training(trained_on, descriptions)}"
    # train_device: trained on another machine (a GPU); else the line's device trained and recorded it
    for device in sorted({str(run.get("train_device") or run["device"]) for run in runs
                          if run.get("train_device") or run.get("device")}):
        title += f"; trained on {device}"
    if trained_on is not None:
        precision = split_training_key(trained_on)[2]
        title += f"; {PRECISION_WORDS.get(precision, precision)}"
    return title


def mc_section(task: str, runs: list[dict], trained_on: str | None = None,
               descriptions: Mapping[str, str] = TASK_TRAINING) -> str:
    by = _by_variant(runs)
    groups = sorted({k for r in runs for k in r if k.startswith("accuracy_")})
    head = "| variant | seeds | accuracy per seed | accuracy | " + " | ".join(groups) + " |"
    lines = [_training_title(f"## {task}: test accuracy (%)", task, runs, trained_on, descriptions), "", head,
             "|" + "---|" * (4 + len(groups))]
    for variant, seeds in sorted(by.items(), key=lambda kv: kv[0] != "baseline"):
        ss = sorted(seeds)
        acc = [seeds[s]["accuracy"] for s in ss]   # percent, as the scorer gives it
        extra = [_fmt_mean([seeds[s][g] for s in ss]) if all(g in seeds[s] for s in ss) else "-" for g in groups]
        lines.append(f"| {variant} | {', '.join(map(str, ss))} | {', '.join(f'{x:.2f}' for x in acc)} | "
                     f"{_fmt_mean(acc)} | " + " | ".join(extra) + " |")
    stopped = [f"- {r['variant']}, seed {r['seed']}: stopped by its wall-clock limit at update {r['steps']:,} of "
               f"{r['planned_steps']:,}; its test figures are those of the model kept at update {r['best_step']:,}"
               for r in runs if r.get("finished") is False]
    return "\n".join(lines + ([""] + stopped if stopped else [])
                     + comparison_lines(comparisons(by, "_correct"), "the test questions", "accuracy"))


def report_sections(results_dir: Path, descriptions: Mapping[str, str] = TASK_TRAINING) -> list[str]:
    """The Markdown sections of every reading results file in ``results_dir`` (span QA first, then multiple choice;
    one section per task and training), each figure re-scored from its committed prediction file; writes the
    Figure 4 images beside them."""
    sections = []
    for task in SPAN_TASKS:
        if (results_dir / f"{task}.jsonl").is_file():
            runs, dataset = load_span_runs(results_dir, task)
            for trained_on, group in training_groups(runs, descriptions):
                sections.append(span_section(task, group, dataset, results_dir, trained_on, descriptions))
    for name in MC_FILES:
        if (results_dir / f"{name}.jsonl").is_file():
            for task, runs in sorted(load_mc_runs(results_dir, name).items()):
                for trained_on, group in training_groups(runs, descriptions):
                    sections.append(mc_section(task, group, trained_on, descriptions))
    if not sections:
        raise SystemExit(f"no reading results in {results_dir} (squad2.jsonl, race.jsonl, mctest.jsonl ...)")
    return sections


def write_report(results_dir: Path, intro: str, descriptions: Mapping[str, str] = TASK_TRAINING) -> Path:
    """``results_dir/READING.md``: a title, ``intro`` (how it was made) and `report_sections`."""
    sections = report_sections(results_dir, descriptions)
    text = "# SG-Net: reading comprehension\n\n" + intro + "\n\n" + "\n\n".join(sections) + "\n"
    out = results_dir / "READING.md"
    out.write_text(text, encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results-dir", type=Path, default=Path("results"))
    args = ap.parse_args(argv)
    intro = (f"Generated by `python -m structattn.sgnet.report --results-dir {args.results_dir}`. Every "
             "figure is re-scored from the committed prediction files.")
    print(f"wrote {write_report(args.results_dir, intro)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
