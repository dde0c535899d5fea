"""The shipped reader's no-answer threshold, chosen again on held-out data: the squad2 dev part.

    python experiments/reading_threshold.py [--model sgnet-squad2] [--out results/squad2/threshold] [--report-only]

`sgnet-squad2` trained on the squad2 train part (6,305 questions) and saved the threshold that maximised F1 on
the dev part (1,395 questions of other articles, trained on by neither of its stages), measured on its float32
weights. The shipped weights are packed (int8 per row), which moves every score a little. This script reads the
dev and test parts with the shipped weights (skipped with ``--report-only``: the committed files are read),
chooses the threshold again on the dev part (the official best-F1 sweep, `span_qa.tune_threshold`), and scores
the test part at the saved threshold ("before") and at the new one ("after"). Beside them: threshold 0 (null
against best span, untuned) and the threshold that would be best on the test part itself, a ceiling and never a
choice. Each line also counts the answerable questions refused at its threshold whose best span has a span
probability (over the n-best spans: the number `structattn answer` prints) of at least 0.9.

Written to ``--out``: per part, ``MODEL.squad2-PART.nonnull.json`` (the best non-null answer of every question),
``MODEL.squad2-PART.na_score.json`` (null score − best span score), ``MODEL.squad2-PART.span_probability.json``
(the best span's probability) and ``MODEL.squad2-PART.na_prob.json`` (σ of the na-score, the official scorer's
``--na-prob-file``); then ``threshold.jsonl`` (one line per part and threshold, with the command that rescores it),
``threshold.md`` and ``threshold.png`` (F1 against the threshold on both parts). A line rescores with

    structattn score squad --task squad2 --split test --predictions OUT/MODEL.squad2-test.nonnull.json \\
        --na-prob OUT/MODEL.squad2-test.na_prob.json --na-prob-thresh P

(an answer becomes "" where its no-answer probability exceeds P = σ(threshold)).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from structattn.io import atomic_write_json, atomic_write_text
from structattn.sgnet.span_qa import f1_by_threshold, na_probabilities, tune_threshold
from structattn.tasks.squad import get_qa_task
from structattn.tasks.squad_eval import apply_threshold, evaluate, has_answer, raw_scores
from structattn.train.engine import device_description
from structattn.train.significance import paired_bootstrap_mean

REPO = Path(__file__).resolve().parent.parent
PARTS = ("dev", "test")
CONFIDENT = 0.9  # span probability from which a refused answerable question counts as "refused though confident"
FILES = ("nonnull", "na_score", "span_probability", "na_prob")


def part_files(out: Path, model: str, part: str) -> dict[str, Path]:
    """The four files of one part, by kind."""
    return {kind: out / f"{Path(model).name}.squad2-{part}.{kind}.json" for kind in FILES}


def read_parts(model: str, out: Path) -> None:
    """Read the dev and test parts with the reader ``model`` (loaded once) and write each part's files."""
    from structattn import Reader

    started = time.perf_counter()
    reader = Reader.from_pretrained(model)
    for part in PARTS:
        split = get_qa_task("squad2").read(part)
        readings = reader.read_questions(split.questions, source=f"squad2 {part}")
        na_scores = {r.qid: r.na_score for r in readings}
        best = {r.qid: r.answers[0] for r in readings}  # the best span, whatever the saved threshold decides
        content = {"nonnull": {q: a.text for q, a in best.items()}, "na_score": na_scores,
                   "span_probability": {q: a.probability for q, a in best.items()},
                   "na_prob": na_probabilities(na_scores)}
        for kind, path in part_files(out, model, part).items():
            atomic_write_json(path, content[kind])
        print(f"read squad2 {part}: {len(readings)} questions ({time.perf_counter() - started:.0f} s)", flush=True)


def load_part(out: Path, model: str, part: str) -> dict:
    """The committed files of one part, with its gold SQuAD object (``dataset``) and ``files``."""
    files = part_files(out, model, part)
    loaded = {kind: json.loads(path.read_text(encoding="utf-8")) for kind, path in files.items()}
    dataset = get_qa_task("squad2").read(part).dataset
    return {**loaded, "dataset": dataset, "f1": raw_scores(dataset, loaded["nonnull"])[1], "files": files,
            "part": part}


def per_question_f1(data: dict, threshold: float) -> dict[str, float]:
    """F1 (0-1) of every question of a part when the reader answers "" above ``threshold`` (the official rule,
    on the part's raw F1 of its best spans, ``data["f1"]``)."""
    return apply_threshold(data["f1"], data["na_prob"], has_answer(data["dataset"]), na_probabilities({"t": threshold})["t"])


def scored_line(model: str, data: dict, threshold: float, source: str, saved: float) -> dict:
    """One line of ``threshold.jsonl``: a part scored at ``threshold`` (na-score units) by the project's scorer,
    and against the ``saved`` threshold (paired bootstrap over the questions, 10,000 resamples)."""
    p = na_probabilities({"t": threshold})["t"]
    result = evaluate(data["dataset"], data["nonnull"], data["na_prob"], na_prob_thresh=p)
    answerable, f1 = has_answer(data["dataset"]), data["f1"]
    now, before = per_question_f1(data, threshold), per_question_f1(data, saved)
    qids = sorted(now)
    delta, p_value = paired_bootstrap_mean([100 * now[q] for q in qids], [100 * before[q] for q in qids])
    refused = [q for q, ok in answerable.items() if ok and data["na_score"][q] > threshold]
    confident = [q for q in refused if data["span_probability"][q] >= CONFIDENT]
    rel = {k: str(v.relative_to(REPO)) if v.is_relative_to(REPO) else str(v) for k, v in data["files"].items()}
    return {"model": model, "part": data["part"], "questions": result["total"], "threshold_source": source,
            "na_score_threshold": threshold, "na_prob_threshold": p,
            "f1": result["f1"], "exact": result["exact"], "HasAns_f1": result["HasAns_f1"],
            "NoAns_f1": result["NoAns_f1"], "f1_minus_saved": delta, "p_against_saved": p_value,
            "answerable_refused": len(refused),
            "answerable_refused_span_probability_ge_0.9": len(confident),
            "of_those_best_span_f1_ge_0.5": sum(1 for q in confident if f1[q] >= 0.5),
            "predictions": rel["nonnull"], "na_prob": rel["na_prob"],
            "rescore": f"structattn score squad --task squad2 --split {data['part']} --predictions {rel['nonnull']} "
                       f"--na-prob {rel['na_prob']} --na-prob-thresh {p!r}"}


def saved_threshold_of(model: str) -> float:
    """The no-answer threshold saved with the reader (its ``span_qa.json``)."""
    from structattn.models.trained import resolve
    from structattn.sgnet.reading import saved_threshold

    return saved_threshold(resolve(model, "reader"))


def report(model: str, out: Path, command: str) -> list[dict]:
    """``threshold.jsonl``, ``threshold.md`` and ``threshold.png`` from the committed files of both parts."""
    data = {part: load_part(out, model, part) for part in PARTS}
    saved = saved_threshold_of(model)
    chosen = tune_threshold(data["dev"]["dataset"], data["dev"]["nonnull"], data["dev"]["na_score"])
    ceiling = tune_threshold(data["test"]["dataset"], data["test"]["nonnull"], data["test"]["na_score"])
    choices = {"dev": [(saved, "saved with the model (dev part, float32 weights)"),
                       (chosen, "dev part, shipped weights"), (0.0, "0 (untuned)")]}
    choices["test"] = choices["dev"] + [(ceiling, "test part itself (ceiling, not a choice)")]
    lines = [scored_line(model, data[part], t, source, saved) | {"command": command}
             for part in PARTS for t, source in choices[part]]
    atomic_write_text(out / "threshold.jsonl", "".join(json.dumps(line) + "\n" for line in lines))
    atomic_write_text(out / "threshold.md", markdown(model, lines, command))
    plot(data, saved, chosen, out / "threshold.png")
    return lines


def markdown(model: str, lines: list[dict], command: str) -> str:
    """The table of ``threshold.md``: one row per part and threshold."""
    rows = [f"| {x['part']} | {x['threshold_source']} | {x['na_score_threshold']:+.4f} | {x['f1']:.2f} | "
            f"{x['exact']:.2f} | {x['HasAns_f1']:.2f} | {x['NoAns_f1']:.2f} | {x['f1_minus_saved']:+.2f} | "
            f"{x['p_against_saved']:.4f} | {x['answerable_refused']} | "
            f"{x['answerable_refused_span_probability_ge_0.9']} ({x['of_those_best_span_f1_ge_0.5']}) |"
            for x in lines]
    return "\n".join([
        f"# {model}: the no-answer threshold, chosen on the squad2 dev part", "",
        f"`{command}` ({device_description(torch.device('cpu'))}, torch {torch.__version__}); each row rescores "
        "with its `rescore` command in `threshold.jsonl`. Threshold: null score minus best span score above which "
        "the reader answers \"no answer\". Refused: answerable questions answered \"no answer\"; confident: of those, "
        "the ones whose best span has a span probability (over the n-best spans) of at least 0.9, and in brackets "
        "how many of those spans score F1 >= 0.5 against the gold answers. F1 - saved and p: against the saved "
        "threshold on the same questions (paired bootstrap over the questions, 10,000 resamples, two-sided).", "",
        "| part | threshold from | threshold | F1 | exact | HasAns F1 | NoAns F1 | F1 - saved | p | refused | "
        "confident (right) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|", *rows, "", "![F1 against the threshold](threshold.png)", ""])


def plot(data: dict, saved: float, chosen: float, path: Path) -> None:
    """F1 against the threshold on both parts, the saved and the dev-chosen thresholds marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for part, d in data.items():
        curve = f1_by_threshold(d["dataset"], d["nonnull"], d["na_score"])
        ax.plot([t for t, _ in curve], [f for _, f in curve], label=f"{part} part", lw=1)
    ax.axvline(saved, color="grey", ls="--", lw=1, label=f"saved ({saved:+.2f})")
    ax.axvline(chosen, color="black", ls=":", lw=1, label=f"dev part, shipped weights ({chosen:+.2f})")
    ax.set_xlim(-8, 8)
    ax.set_xlabel("no-answer threshold (null score - best span score)")
    ax.set_ylabel("F1")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120, metadata={"Software": None})
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="sgnet-squad2", help="a shipped reader's name or a reader folder")
    ap.add_argument("--out", type=Path, default=REPO / "results" / "squad2" / "threshold")
    ap.add_argument("--report-only", action="store_true", help="read the committed files; answer no question")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        read_parts(args.model, args.out)
    command = "python experiments/reading_threshold.py" + (f" --model {args.model}" if args.model != "sgnet-squad2"
                                                            else "")
    for x in report(args.model, args.out, command):
        print(f"{x['part']:4s} {x['threshold_source']:50s} t={x['na_score_threshold']:+.4f} F1 {x['f1']:.2f} "
              f"HasAns {x['HasAns_f1']:.2f} NoAns {x['NoAns_f1']:.2f} refused {x['answerable_refused']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
