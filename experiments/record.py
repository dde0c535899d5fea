"""Record one finished run in its results file: ``python experiments/record.py KIND RUN_DIR NAME [options]``.

Every kind does the same steps: read the run's summary, copy its committed outputs (test trees, translations,
predictions) into results/<folder>/NAME.<file>, score the committed copy with the project's own scorer, keep a list
of the run's summary fields and put one JSON line, keyed by the run's name, into the results file (in place of an
earlier line for that name; under a lock, so runs recorded side by side do not lose each other's lines). Each kind
in :data:`KINDS` declares only what differs: which files, which scorer, which fields, which results file.

    nmt        RUN_DIR NAME [--note TEXT] [--results FILE.jsonl] [--outputs DIR]
               `structattn train-translation`: hypotheses/<split>.de of every test set (and dev when
               RUN_DIR/hypotheses/dev.de exists) -> results/nmt/NAME.<split>.de, sacreBLEU 13a against Multi30k;
               results/nmt.jsonl (the recipe ablation: --results results/peers/nmt_recipe_ablation.jsonl
               --outputs results/peers/ablation).
    parsing    RUN_DIR NAME [--note TEXT]
               `structattn train-parsing`: test.trees -> results/parsing/NAME.test.trees, EVALB against the test
               split's treebank files (what `structattn score evalb --gold ... --predictions ... --json` prints); results/parsing.jsonl.
    laptop     RUN_DIR NAME OUTPUT_FILE --seconds S --threads N --load-before L --load-after L --command "structattn ..."
               one timed README training command: RUN_DIR/OUTPUT_FILE (test trees or test2016 translations) ->
               results/laptop/NAME.<file>, EVALB or BLEU; results/laptop_defaults.jsonl.
    precision  RUN_DIR NAME  (NAME: WORKLOAD-fp32 or WORKLOAD-bf16, WORKLOAD one of sentence, qa, parsing,
               translation) one short run of experiments/recipes/precision.toml: time per update from the engine's
               clock (checkpoint/state.json: train_seconds / step; training only), score from the committed test
               output (parsing, translation: results/precision/NAME.<file>) or the trainer's last dev evaluation
               (sentence: SST-2 dev accuracy; qa: SQuAD 2.0 F1 on 500 dev questions); results/precision_runs.jsonl,
               then results/PRECISION.md's table of the pairs recorded in both precisions.
    reading    RUN_DIR NAME [--task TASK] [--note TEXT] [--reuse-predictions] [--predictions PRED.json --device D
               [--stopped-log TRAIN_LOG]] [--train-device D] [--encoder-from MODEL]
               `structattn train` on a reading task. Span QA (squad2, squad11): predicts the test split with
               RUN_DIR/best at the saved no-answer threshold into results/<task>/NAME.json (the na-prob and n-best
               files stay in RUN_DIR) and results/<task>/NAME.answer_all.json (every question's best non-null answer,
               under "answer_all"), scored with the official evaluate-v2.0 logic; --reuse-predictions scores
               RUN_DIR's test predictions again; --task records on another span-QA task's test split (predictions
               in RUN_DIR named test_predictions.TASK.json; never "no answer" on squad11). Multiple choice (race*,
               mctest*): test predictions {qid: option letter} -> results/<race|mctest>/NAME.json (and the option
               scores beside it), accuracy overall, per level / set / question kind. --predictions PRED.json: made
               elsewhere (`structattn predict --model RUN/best --split test`), RUN_DIR needs only trainer_state.json and
               train_config.json; --stopped-log: the run was stopped by a wall-clock limit and left no
               trainer_state.json, its dev evaluations are read from the trainer's lines in TRAIN_LOG ("finished":
               false, "planned_steps"). Every line keeps the run's dev learning curve ("dev_curve").
"""
from __future__ import annotations

import argparse
import dataclasses
import fcntl
import json
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
from machine import cpu_flags, cpu_name  # noqa: E402

from structattn.errors import UserError  # noqa: E402
from structattn.io import read_jsonl, upsert_jsonl  # noqa: E402


# ---------------------------------------------------------------------------------------------- shared steps
@dataclass
class Run:
    """One run being recorded: its folder, name, options and where results go (``root``: the checkout)."""
    kind: "Kind"
    dir: Path
    name: str
    args: argparse.Namespace
    root: Path = REPO
    results_file: Path | None = None   # set once the line says where it goes (reading: from its task)

    @property
    def results(self) -> Path:
        return self.root / "results"

    def summary(self, file: str = "summary.json") -> dict:
        path = self.dir / file
        if not path.is_file():
            raise UserError(f"{path} not found: is {self.dir} a finished {self.kind.name} run?")
        return json.loads(path.read_text(encoding="utf-8"))

    def outputs(self) -> Path:
        """The folder the run's committed outputs go to (``--outputs`` where the kind has it)."""
        return getattr(self.args, "outputs", None) or self.results / self.kind.outputs

    def commit(self, source: Path, target: Path | None = None) -> Path:
        """Copy the run's output ``source`` to ``target`` (default: outputs()/NAME.<source's name>)."""
        target = target or self.outputs() / f"{self.name}.{source.name}"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        return target

    def relative(self, path: Path) -> str:
        """``path`` as a results line names it: relative to the checkout."""
        return str(Path(path).resolve().relative_to(self.root.resolve()))


def bleu(hypotheses: Path, split: str) -> dict:
    """sacreBLEU (13a, cased) of a committed translation file against the Multi30k references of ``split``."""
    from structattn.tasks.bleu import corpus_bleu
    from structattn.tasks.multi30k import read_split

    return corpus_bleu(hypotheses.read_text(encoding="utf-8").split("\n")[:-1], read_split(split).targets)


def evalb(trees: Path) -> dict:
    """The project's EVALB of committed test trees against the test split's treebank files."""
    from structattn.tasks.evalb import evalb_files
    from structattn.tasks.ptb import split_files

    return evalb_files(split_files("test"), trees).to_dict()


def score_test_output(target: Path) -> tuple[str, float]:
    """(metric, value) of a committed test parse (``.trees``) or test2016 translation file."""
    if target.suffix == ".trees":
        return "test F1 (EVALB)", evalb(target)["f1"]
    return "test2016 BLEU", bleu(target, "test2016")["bleu"]


def upsert_locked(path: Path, line: dict, key: str | Callable[[dict], Any]) -> None:
    """:func:`structattn.io.upsert_jsonl` under an exclusive lock on ``.<file>.lock`` beside ``path``: two runs
    recorded at once both keep their lines (the read-modify-write is one step)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(f".{path.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        upsert_jsonl(path, line, key=key)


# ---------------------------------------------------------------------------------------------- translation
NMT_FIELDS = ("final_model", "dev_bleu_beam", "best_step", "best_dev_bleu_greedy", "updates", "epochs", "history",
              "train_seconds", "target_tokens_per_second", "wall_seconds", "device", "torch_threads", "model",
              "filter", "command", "structattn_version", "git_commit", "kernel")


def nmt_options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--note")
    ap.add_argument("--results", type=Path, default=None, help="the JSONL file (default results/nmt.jsonl)")
    ap.add_argument("--outputs", type=Path, default=None, help="where the translations go (default results/nmt)")


def nmt_line(run: Run) -> dict:
    summary = run.summary()
    cfg = summary["config"]
    line = {"task": "multi30k", "variant": summary["variant"], "seed": summary["seed"], "run": run.name}
    dev = ["dev"] if (run.dir / "hypotheses" / "dev.de").is_file() else []
    for split in [*summary["tests"], *dev]:
        target = run.commit(run.dir / "hypotheses" / f"{split}.de")
        scored = bleu(target, split)
        line[f"bleu_{split}"] = round(scored["bleu"], 2)
        line[f"hypotheses_{split}"] = run.relative(target)
        line["bleu_signature"] = scored["signature"]
    line.update({k: summary.get(k) for k in NMT_FIELDS})
    line["config"] = {k: v for k, v in cfg.items() if k != "output_dir"}
    mech = {k: cfg[k] for k in ("layers", "k", "gate") if cfg.get(k) is not None}
    if mech:
        line["mechanism_options"] = mech
    if run.args.note:
        line["note"] = run.args.note
    return line


def nmt_report(line: dict) -> str:
    return json.dumps({k: v for k, v in line.items() if k.startswith("bleu_") or k in ("run", "variant", "seed")})


# ---------------------------------------------------------------------------------------------- parsing
def note_option(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--note", default="")


def parsing_line(run: Run) -> dict:
    summary = run.summary()
    config = summary["config"]
    target = run.commit(run.dir / "test.trees")
    score = evalb(target)
    return {
        "task": "ptb_sample",
        "run": run.name,
        "variant": config.get("variant") if not config.get("layers") else "+".join(config["layers"]),
        "layers": summary.get("layers", config.get("layers")),
        "seed": config["seed"],
        "encoder": "none" if config["encoder"] == "none" else (config["encoder"] or "all-MiniLM-L6-v2"),
        "fine_tune_encoder": config.get("fine_tune_encoder"),
        "pos": config.get("pos"),
        "ngram": config.get("ngram"),
        "nsa_layers": config.get("nsa_layers"),
        "recall": score["recall"], "precision": score["precision"], "f1": score["f1"],
        "complete_match": score["complete_match"],
        "test_sentences": score.get("sentences"), "test_error_sentences": score.get("error_sentences"),
        "le40": score.get("le40"),
        "dev": summary.get("dev"),
        "best_epoch": summary.get("best_epoch"),
        "predictions": run.relative(target),
        "config": config,
        "device": summary.get("device"),
        "wall_s": summary.get("wall_seconds", summary.get("wall_s")),
        "provenance": summary.get("provenance"),
        "command": summary.get("command"),
        "note": run.args.note,
    }


def parsing_report(line: dict) -> str:
    return f"test F1 {line['f1']:.2f} (R {line['recall']:.2f}, P {line['precision']:.2f})"


# ---------------------------------------------------------------------------------------------- laptop presets
def laptop_options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("output_file", help="the run's test output inside RUN_DIR (test.trees, hypotheses/test2016.de)")
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--load-before", required=True)
    ap.add_argument("--load-after", required=True)
    ap.add_argument("--command", required=True)


def laptop_line(run: Run) -> dict:
    args, summary = run.args, run.summary()
    target = run.commit(run.dir / args.output_file)
    metric, value = score_test_output(target)
    return {"name": run.name, "command": args.command, "wall_seconds": round(args.seconds, 1),
            "wall_minutes": round(args.seconds / 60, 1), "metric": metric, "score": round(value, 2),
            "output": run.relative(target),
            "steps": summary.get("steps", summary.get("updates")),
            "stopped": {k: summary[k] for k in ("epochs_completed", "best_epoch", "best_step", "updates",
                                                "final_model") if k in summary},
            "torch_threads": args.threads, "load_average_before": args.load_before,
            "load_average_after": args.load_after, "cpu": cpu_name(), "cpu_flags": cpu_flags(),
            "config": summary["config"]}


def laptop_report(line: dict) -> str:
    return (f"{line['metric']} {line['score']:.2f} in {line['wall_seconds'] / 60:.1f} min "
            f"({line['torch_threads']} threads)")


# ---------------------------------------------------------------------------------------------- precision
PRECISION_WORKLOADS = {  # name: (family, what, metric)
    "sentence": ("sentence (train)", "MiniLM, SST-2: 4,000 training sentences, 2 epochs", "dev accuracy (%)"),
    "qa": ("QA (train)", "reader's encoder + span head, SQuAD 2.0 part: 1,000 questions, 1 epoch",
           "dev F1, first 500 questions"),
    "parsing": ("parsing (train-parsing)", "BNA on frozen MiniLM, d 128, 4 epochs of the WSJ sample",
                "test F1 (EVALB)"),
    "translation": ("translation (train-translation)", "tiny transformer, Multi30k, 300 updates",
                    "test2016 BLEU"),
}
PRECISIONS = ("fp32", "bf16")


def precision_line(run: Run) -> dict:
    workload, _, precision = run.name.rpartition("-")
    if workload not in PRECISION_WORKLOADS or precision not in PRECISIONS:
        raise UserError(f"precision run name '{run.name}': expected WORKLOAD-PRECISION, WORKLOAD one of "
                        f"{', '.join(PRECISION_WORKLOADS)} and PRECISION one of {', '.join(PRECISIONS)}")
    state = run.summary("checkpoint/state.json")
    if not state.get("finished"):
        raise UserError(f"{run.dir}: the run has not finished (checkpoint/state.json finished = false)")
    if workload == "sentence":   # no prediction file: the trainer's last dev evaluation
        score = 100 * state["history"][-1]["accuracy"]
    elif workload == "qa":
        score = state["history"][-1]["f1"]
    else:
        output = run.dir / ("test.trees" if workload == "parsing" else "hypotheses/test2016.de")
        score = score_test_output(run.commit(output))[1]
    family, what, metric = PRECISION_WORKLOADS[workload]
    return {"workload": workload, "family": family, "what": what, "precision": precision,
            "updates": state["step"], "train_seconds": round(state["train_seconds"], 1),
            "seconds_per_update": round(state["train_seconds"] / state["step"], 3),
            "metric": metric, "score": round(score, 2),
            "torch_threads": 1, "cpu": cpu_name(), "cpu_flags": cpu_flags(),
            "command": run.dir.with_name(f"{run.dir.name}.command").read_text().strip()}


def precision_table(lines: list[dict]) -> str:
    rows = ["| family | workload | metric | fp32 | bf16 | Δ (bf16 − fp32) | s / update fp32 | s / update bf16 "
            "| bf16 / fp32 time |", "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    by = {(x["workload"], x["precision"]): x for x in lines}
    for workload, (family, what, metric) in PRECISION_WORKLOADS.items():
        if (workload, "fp32") not in by or (workload, "bf16") not in by:
            continue
        a, b = by[workload, "fp32"], by[workload, "bf16"]
        rows.append(f"| {family} | {what} | {metric} | {a['score']:.2f} | {b['score']:.2f} | "
                    f"{b['score'] - a['score']:+.2f} | {a['seconds_per_update']:.3f} | {b['seconds_per_update']:.3f}"
                    f" | {b['seconds_per_update'] / a['seconds_per_update']:.2f}x |")
    return "\n".join(rows)


def precision_page(run: Run) -> None:
    """PRECISION.md beside the results file: the table of every workload recorded in both precisions."""
    path = run.results_file
    lines = read_jsonl(path, missing_ok=True)
    table = precision_table(lines)
    commands = "\n".join(f"{x['workload']}-{x['precision']}: {x['command']}" for x in lines)
    machine = f"{lines[0]['cpu']} ({lines[0]['cpu_flags']}), torch threads 1" if lines else "no runs"
    (path.parent / "PRECISION.md").write_text(f"""# fp32 against bf16 autocast: one short training run per trainer family

Generated by `python experiments/record.py precision RUN_DIR NAME` from the runs of
`python experiments/run.py precision` (lines: `results/precision_runs.jsonl`). Each pair is the same
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
""")
    print(table)


def precision_report(line: dict) -> str:
    return f"{line['metric']} {line['score']:.2f}, {line['seconds_per_update']:.3f} s / update"


# ---------------------------------------------------------------------------------------------- reading
def reading_options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--note", default="")
    ap.add_argument("--train-device", default=None,
                    help="where the run trained, when not here (the line's 'device' is where it was predicted)")
    ap.add_argument("--task", default=None, help="span QA: record on this task's test split (default: the run's)")
    ap.add_argument("--reuse-predictions", action="store_true",
                    help="span QA: score the test predictions already in RUN_DIR instead of predicting again")
    ap.add_argument("--predictions", type=Path, default=None,
                    help="multiple choice: test predictions {qid: letter} made elsewhere (needs --device)")
    ap.add_argument("--device", default=None, help="with --predictions: where they were made")
    ap.add_argument("--encoder-from", default=None,
                    help="the saved model whose encoder the run kept (--model-parts encoder), when the config's model "
                         "is a path on another machine (e.g. /tmp/sa/reader on a GPU machine)")
    ap.add_argument("--stopped-log", type=Path, default=None,
                    help="with --predictions: the train.log of a run its wall-clock limit stopped (no trainer_state.json)")


def reading_variant(cfg) -> str:
    """The variant's name as results lines give it: baseline, sgnet, sgnet:agg=concat, sla:m=3,sg=dual ..."""
    if cfg.sgnet == "none":
        return "baseline" if cfg.mechanism == "global" else cfg.mechanism
    opts = [] if cfg.sgnet == "dual" else [f"agg={cfg.sgnet}"]
    if cfg.sgnet == "dual" and cfg.sgnet_alpha != 0.5:
        opts.append("alpha=learned" if cfg.sgnet_alpha is None else f"alpha={cfg.sgnet_alpha:g}")
    if cfg.sgnet_init != "fresh":
        opts.append(f"init={cfg.sgnet_init}")
    name = "sgnet" + (":" + ",".join(opts) if opts else "")
    return name if cfg.mechanism == "global" else f"{cfg.mechanism}+{name}"


#: What a line keeps of each evaluation during training (its dev learning curve), when the evaluation has it.
CURVE_KEYS = ("step", "elapsed_s", "train_loss", "f1", "HasAns_f1", "NoAns_f1", "accuracy")


def dev_curve(history: list[dict]) -> list[dict]:
    """The run's dev learning curve: each evaluation of trainer_state.json's history, cut to :data:`CURVE_KEYS`."""
    return [{k: h[k] for k in CURVE_KEYS if k in h} for h in history]


_EVAL_LINE = re.compile(r"(\d+)/(\d+) \[(?:(\d+):)?(\d+):(\d+)<[^\]]*\][^\n]*?step ([\d,]+): dev (\w+) ([\d.]+) "
                        r"\(best [\d.]+ at step ([\d,]+)\)(?:, train loss ([\d.]+))?")
_PROGRESS = re.compile(r"(\d+)/(\d+) \[")


def state_from_log(text: str) -> dict:
    """What trainer_state.json would hold of a run stopped before its end, read from its log (``text``): each
    evaluation line (``NAME step N: dev METRIC X (best Y at step M), train loss L``, after the progress bar's
    ``N/TOTAL [MM:SS<...]``, whose time is ``elapsed_s``: seconds of the training loop, features excluded), the
    best step, the last update the progress bar shows (``step``) and its total (``planned_steps``)."""
    text = text.replace("\r", "\n")
    history, best_step = [], None
    for m in _EVAL_LINE.finditer(text):
        hours, minutes, seconds = (int(g or 0) for g in m.group(3, 4, 5))
        entry = {"step": int(m.group(6).replace(",", "")), "elapsed_s": float(3600 * hours + 60 * minutes + seconds),
                 m.group(7): float(m.group(8))}
        if m.group(10) is not None:
            entry["train_loss"] = float(m.group(10))
        history.append(entry)
        best_step = int(m.group(9).replace(",", ""))
    progress = _PROGRESS.findall(text)
    if not history or not progress:
        raise UserError("--stopped-log: no evaluation lines (\"step N: dev ...\") or progress bar in the log")
    return {"history": history, "best_step": best_step, "step": int(progress[-1][0]),
            "planned_steps": int(progress[-1][1]), "finished": False}


def _span_qa_scores(run: Run, trainer) -> dict:
    """Test predictions of a span-QA reader (or those in RUN_DIR) -> results/<task>/NAME.json, scored."""
    from structattn.commands.predict import side_files
    from structattn.io import atomic_write_json
    from structattn.sgnet.span_qa import na_probabilities
    from structattn.tasks.squad_eval import evaluate

    task = trainer.task.name
    threshold = trainer.fixed_threshold   # load_trained: the saved one, never "no answer" on squad11
    in_run = run.dir / (f"test_predictions.{task}.json" if run.args.task is not None else "test_predictions.json")
    na_file, nbest_file = side_files(in_run)
    if not (run.args.reuse_predictions and in_run.is_file() and nbest_file.is_file()):
        data, feats = trainer.features("test")
        preds, na_scores, nbest, _ = trainer.answers(data, feats, threshold=threshold)
        atomic_write_json(in_run, preds)
        atomic_write_json(na_file, na_probabilities(na_scores))
        atomic_write_json(nbest_file, nbest)
    nbest = json.loads(nbest_file.read_text(encoding="utf-8"))
    target = run.commit(in_run, run.results / task / f"{run.name}.json")
    answer_all = run.results / task / f"{run.name}.answer_all.json"
    atomic_write_json(answer_all, {qid: entries[0]["text"] for qid, entries in nbest.items()})
    dataset = trainer.task.read("test").dataset
    scores = evaluate(dataset, json.loads(target.read_text(encoding="utf-8")))
    everything = evaluate(dataset, json.loads(answer_all.read_text(encoding="utf-8")))
    return {**scores, "na_threshold": None if threshold == float("inf") else threshold,
            "predictions": run.relative(target),
            "answer_all": {**everything, "predictions": run.relative(answer_all)}}


def _multiple_choice_scores(run: Run, task, trainer=None) -> dict:
    """Test predictions of ``trainer`` (or the file --predictions made elsewhere) -> results/<file>/NAME.json."""
    from structattn.commands.predict import option_scores_file, write_option_letters
    from structattn.tasks.multiple_choice import results_file, score_option_letters

    target = run.results / results_file(task.name) / f"{run.name}.json"
    predictions = run.args.predictions
    if predictions is None:
        target.parent.mkdir(parents=True, exist_ok=True)
        examples, feats = trainer.features("test")
        questions = examples.questions
        write_option_letters(questions, trainer.option_scores(feats), target)
    else:
        questions = task.read("test")
        run.commit(predictions, target)
        if option_scores_file(predictions).is_file():
            run.commit(option_scores_file(predictions), option_scores_file(target))
    letters = json.loads(target.read_text(encoding="utf-8"))
    return {**score_option_letters(task.name, questions, letters), "predictions": run.relative(target)}


def reading_line(run: Run) -> dict:
    from structattn.tasks.multiple_choice import results_file
    from structattn.trainers import load_trained, task_family

    args = run.args
    if args.stopped_log is not None:
        if args.predictions is None:
            raise UserError("--stopped-log needs --predictions: the test predictions of the stopped run's best/")
        state = state_from_log(args.stopped_log.read_text(errors="replace"))
    else:
        state = run.summary("trainer_state.json")
        if not state.get("finished"):
            raise UserError(f"{run.dir}: the run has not finished (trainer_state.json finished = false)")
    from structattn.run_config import RunConfig

    # the line records every system's options (the run's key), whichever system's config the run folder holds
    run_config = RunConfig.load(run.dir / "train_config.json")
    trainer = None
    if args.predictions is None:
        trainer = load_trained(str(run.dir / "best"), args.task)
        trainer.show_progress = False
        cfg = trainer.cfg
    else:
        cfg = run_config
        if not args.device:
            raise UserError("--predictions needs --device: where the predictions were made")
    family = task_family(cfg.task)
    if args.task is not None and family != "span_qa":
        raise UserError("--task is for span-QA runs")
    if args.predictions is not None and family != "multiple_choice":
        raise UserError("--predictions is for multiple-choice runs (span QA: --reuse-predictions)")
    t0 = time.time()
    if family == "span_qa":
        scores = _span_qa_scores(run, trainer)
        task = trainer.task
    else:
        from structattn.tasks.multiple_choice import get_mc_task

        task = trainer.task if trainer is not None else get_mc_task(cfg.task)
        scores = _multiple_choice_scores(run, task, trainer)
    best = next((h for h in state["history"] if h["step"] == state["best_step"]), {})
    line = {"task": task.name, "run": run.name, "variant": reading_variant(cfg), "seed": cfg.seed, **scores,
            "dev": {k: v for k, v in best.items() if k not in ("step", "epoch", "elapsed_s")},
            "best_step": state["best_step"], "steps": state.get("step", state.get("global_step")),
            "dev_curve": dev_curve(state["history"]),
            "train_wall_s": max((h.get("elapsed_s", 0) for h in state["history"]), default=None),
            "test_predict_s": round(time.time() - t0, 1) if trainer is not None else None,
            "kernel": "+".join(state.get("extra", state).get("kernels", [])) or None,  # engine or earlier layout
            "config": dataclasses.asdict(run_config), "note": args.note}
    if not state["finished"]:   # stopped by a wall-clock limit: how far it got
        line.update(finished=False, planned_steps=state["planned_steps"])
    from structattn.train.engine import device_description
    from structattn.train.provenance import provenance

    here = trainer is not None
    line.update(provenance(), device=device_description(trainer.device) if here else args.device,
                torch_threads=__import__("torch").get_num_threads() if here else None)
    if args.train_device:
        line["train_device"] = args.train_device
    if args.encoder_from:
        line["encoder_from"] = args.encoder_from
    run.results_file = run.results / f"{results_file(task.name)}.jsonl"
    return line


def reading_report(line: dict) -> str:
    metric = "f1" if "na_threshold" in line else "accuracy"   # span QA lines carry their threshold
    return f"test {metric} {line[metric]:.4f}"


# ---------------------------------------------------------------------------------------------- the kinds
@dataclass(frozen=True)
class Kind:
    """What one kind of run records; everything else is the shared steps of :func:`record`."""
    name: str
    results: str                          # the results file under results/ ("" : the line decides, reading)
    outputs: str                          # the folder under results/ for the committed outputs
    line: Callable[[Run], dict]           # copy, score and collect the fields: the line to record
    report: Callable[[dict], str]         # what the terminal is told after the name
    options: Callable[[argparse.ArgumentParser], None] = note_option
    key: str | Callable[[dict], Any] = "run"
    after: Callable[[Run], None] | None = None   # run once the line is in (precision: its page)
    names: Callable[[dict], str] | None = None   # the run name a line is for, when not its key

    def run_name(self, line: dict) -> str | None:
        """The name of the run a line of this kind's results file records (the NAME it was recorded as)."""
        return self.names(line) if self.names else line.get(self.key)


KINDS = {kind.name: kind for kind in (
    Kind("nmt", "nmt.jsonl", "nmt", nmt_line, nmt_report, nmt_options),
    Kind("parsing", "parsing.jsonl", "parsing", parsing_line, parsing_report),
    Kind("laptop", "laptop_defaults.jsonl", "laptop", laptop_line, laptop_report, laptop_options, key="name"),
    Kind("precision", "precision_runs.jsonl", "precision", precision_line, precision_report, lambda ap: None,
         key=lambda x: (x["workload"], x["precision"]), after=precision_page,
         names=lambda x: f"{x['workload']}-{x['precision']}"),
    Kind("reading", "", "", reading_line, reading_report, reading_options),
)}


def record(run: Run) -> dict:
    """The shared steps: the kind's line (its outputs copied and scored), upserted by run name; returns the line."""
    line = run.kind.line(run)
    run.results_file = getattr(run.args, "results", None) or run.results_file or run.results / run.kind.results
    upsert_locked(run.results_file, line, run.kind.key)
    if run.kind.after is not None:
        run.kind.after(run)
    return line


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="record.py", description=__doc__.splitlines()[0])
    kinds = ap.add_subparsers(dest="kind", required=True, metavar="KIND", help=", ".join(KINDS))
    for kind in KINDS.values():
        sub = kinds.add_parser(kind.name, help=f"a {kind.name} run")
        sub.add_argument("run_dir", type=Path)
        sub.add_argument("name")
        kind.options(sub)
    return ap


def main(argv: list[str] | None = None, root: Path = REPO) -> dict:
    """Record the run ``argv`` names; ``root``: the checkout whose results/ it goes to."""
    args = parser().parse_args(argv)
    run = Run(KINDS[args.kind], args.run_dir, args.name, args, root)
    line = record(run)
    print(f"{run.name}: {run.kind.report(line)} -> {run.results_file}")
    return line


if __name__ == "__main__":
    try:
        main()
    except UserError as exc:  # a message, not a traceback
        raise SystemExit(f"record.py: {exc}") from None
