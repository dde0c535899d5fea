"""Record one finished reading-comprehension run (`structattn train --task squad2|race_m|mctest500 ...`).

    python experiments/record_reading_run.py RUN_DIR NAME [--task TASK] [--note TEXT]

Span QA (squad2, squad11): predicts the test split with RUN_DIR/best at the no-answer threshold saved with it
(tuned on the dev split during training), writes the predictions to results/<task>/NAME.json (the na-prob and
n-best files stay in RUN_DIR), scores that committed file with the project's scorer (the figures
`structattn score squad --task <task> --split test --predictions results/<task>/NAME.json` prints) and appends one
line to results/<task>.jsonl. It also commits results/<task>/NAME.answer_all.json, the best non-null answer of
every question (the first n-best entry: what the model answers when the threshold never says "no answer"), and
records its scores under "answer_all" (its HasAns figures measure span extraction alone). Every line keeps the
run's dev learning curve ("dev_curve": step, seconds, train loss and dev scores of each evaluation). With
--reuse-predictions the test predictions already in RUN_DIR (test_predictions*.json) are scored again instead of
predicted anew.
--task records the run on another span-QA task's test split than the one it trained on (a squad2_plus11 reader on
squad11 -> results/squad11.jsonl, on squad2 -> results/squad2.jsonl): "no answer" is never given on a task without
unanswerable questions (squad11), the saved threshold is used otherwise, and the predictions in RUN_DIR are named
test_predictions.TASK.json.
Multiple choice (race, race_m, race_h -> results/race.jsonl; mctest160, mctest500 -> results/mctest.jsonl):
predicts the test split into results/<file>/NAME.json ({qid: option letter}, what `structattn score race
--task <task> --predictions results/race/NAME.json` and `structattn score mctest --task <task> --predictions
results/mctest/NAME.json` read; NAME.scores.json beside it holds every option's score), scores that committed file
(RACE: `score race`'s accuracy overall and per level; MCTest: `score mctest`'s accuracy overall, per set and per
question kind) and appends a line (its "task" names the task) to results/<file>.jsonl. With --predictions PRED.json the
test predictions were made elsewhere (`structattn predict RUN/best --split test --output PRED.json`, e.g. on a GPU
machine whose model did not come back): they are copied and scored, and RUN_DIR needs only trainer_state.json and
train_config.json. With --stopped-log TRAIN_LOG (and --predictions) the run was stopped before its end by a wall-clock limit
(experiments/run_reading_gpu.sh's TRAIN_SECONDS) and left no trainer_state.json: its dev evaluations are read from the
trainer's own lines in TRAIN_LOG, and the line says so ("finished": false, "steps" = the last update the log shows,
"planned_steps"). A line for NAME already there is replaced.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import time
from pathlib import Path

from structattn.io import upsert_jsonl
from structattn.tasks.multiple_choice import results_file
from structattn.trainers import load_trained
from structattn.trainers import task_family

RESULTS = Path(__file__).resolve().parent.parent / "results"


def _variant(cfg) -> str:
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
        raise SystemExit("--stopped-log: no evaluation lines (\"step N: dev ...\") or progress bar in the log")
    return {"history": history, "best_step": best_step, "step": int(progress[-1][0]),
            "planned_steps": int(progress[-1][1]), "finished": False}


def _record_span_qa(trainer, run_dir: Path, name: str, reuse: bool = False, other_task: bool = False) -> dict:
    from structattn.commands.predict import side_files
    from structattn.sgnet.span_qa import na_probabilities
    from structattn.tasks.squad_eval import evaluate
    from structattn.io import atomic_write_json

    task = trainer.task.name
    threshold = trainer.fixed_threshold   # load_trained: the saved one, never "no answer" on squad11
    in_run = run_dir / (f"test_predictions.{task}.json" if other_task else "test_predictions.json")
    na_file, nbest_file = side_files(in_run)
    if not (reuse and in_run.is_file() and nbest_file.is_file()):
        data, feats = trainer.features("test")
        preds, na_scores, nbest, _ = trainer.answers(data, feats, threshold=threshold)
        atomic_write_json(in_run, preds)
        atomic_write_json(na_file, na_probabilities(na_scores))
        atomic_write_json(nbest_file, nbest)
    nbest = json.loads(nbest_file.read_text(encoding="utf-8"))
    target = RESULTS / task / f"{name}.json"
    answer_all = RESULTS / task / f"{name}.answer_all.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(in_run, target)
    atomic_write_json(answer_all, {qid: entries[0]["text"] for qid, entries in nbest.items()})
    dataset = trainer.task.read("test").dataset
    scores = evaluate(dataset, json.loads(target.read_text(encoding="utf-8")))
    everything = evaluate(dataset, json.loads(answer_all.read_text(encoding="utf-8")))
    return {**scores, "na_threshold": None if threshold == float("inf") else threshold,
            "predictions": str(target.relative_to(RESULTS.parent)),
            "answer_all": {**everything, "predictions": str(answer_all.relative_to(RESULTS.parent))}}


def _record_multiple_choice(task, name: str, trainer=None, predictions: Path | None = None) -> dict:
    """Test predictions of ``trainer`` (or the file ``predictions`` made elsewhere) -> results/<file>/NAME.json."""
    from structattn.commands.predict import option_scores_file, write_option_letters
    from structattn.tasks.multiple_choice import score_option_letters

    target = RESULTS / results_file(task.name) / f"{name}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    if predictions is None:
        examples, feats = trainer.features("test")
        questions = examples.questions
        write_option_letters(questions, trainer.option_scores(feats), target)
    else:
        questions = task.read("test")
        shutil.copyfile(predictions, target)
        if option_scores_file(predictions).is_file():
            shutil.copyfile(option_scores_file(predictions), option_scores_file(target))
    letters = json.loads(target.read_text(encoding="utf-8"))
    return {**score_option_letters(task.name, questions, letters),
            "predictions": str(target.relative_to(RESULTS.parent))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("name")
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
    args = ap.parse_args()
    if args.stopped_log is not None:
        if args.predictions is None:
            raise SystemExit("--stopped-log needs --predictions: the test predictions of the stopped run's best/")
        state = state_from_log(args.stopped_log.read_text(errors="replace"))
    else:
        state = json.loads((args.run_dir / "trainer_state.json").read_text())
        if not state.get("finished"):
            raise SystemExit(f"{args.run_dir}: the run has not finished (trainer_state.json finished = false)")
    trainer = None
    if args.predictions is None:
        trainer = load_trained(str(args.run_dir / "best"), args.task)
        trainer.show_progress = False
        cfg = trainer.cfg
    else:
        from structattn.train.config import TrainConfig

        cfg = TrainConfig.load(args.run_dir / "train_config.json")
        if not args.device:
            raise SystemExit("--predictions needs --device: where the predictions were made")
    family = task_family(cfg.task)
    if args.task is not None and family != "span_qa":
        raise SystemExit("--task is for span-QA runs")
    if args.predictions is not None and family != "multiple_choice":
        raise SystemExit("--predictions is for multiple-choice runs (span QA: --reuse-predictions)")
    t0 = time.time()
    if family == "span_qa":
        scores = _record_span_qa(trainer, args.run_dir, args.name, args.reuse_predictions, args.task is not None)
        task = trainer.task
    else:
        from structattn.tasks.multiple_choice import get_mc_task

        task = trainer.task if trainer is not None else get_mc_task(cfg.task)
        scores = _record_multiple_choice(task, args.name, trainer, args.predictions)
    train_cfg = json.loads((args.run_dir / "train_config.json").read_text())
    best = next((h for h in state["history"] if h["step"] == state["best_step"]), {})
    line = {"task": task.name, "run": args.name, "variant": _variant(cfg), "seed": cfg.seed, **scores,
            "dev": {k: v for k, v in best.items() if k not in ("step", "epoch", "elapsed_s")},
            "best_step": state["best_step"], "steps": state.get("step", state.get("global_step")),
            "dev_curve": dev_curve(state["history"]),
            "train_wall_s": max((h.get("elapsed_s", 0) for h in state["history"]), default=None),
            "test_predict_s": round(time.time() - t0, 1) if trainer is not None else None,
            "kernel": "+".join(state.get("extra", state).get("kernels", [])) or None,  # engine or earlier layout
            "config": train_cfg, "note": args.note}
    if not state["finished"]:   # stopped by a wall-clock limit: how far it got
        line.update(finished=False, planned_steps=state["planned_steps"])
    from structattn.train.provenance import provenance
    from structattn.train.engine import device_description

    here = trainer is not None
    line.update(provenance(), device=device_description(trainer.accelerator.device) if here else args.device,
                torch_threads=__import__("torch").get_num_threads() if here else None)
    if args.train_device:
        line["train_device"] = args.train_device
    if args.encoder_from:
        line["encoder_from"] = args.encoder_from
    out = RESULTS / f"{results_file(task.name)}.jsonl"
    upsert_jsonl(out, line, key="run")
    main_metric = "f1" if family == "span_qa" else "accuracy"
    print(f"{args.name}: test {main_metric} {scores[main_metric]:.4f} -> {out}")


if __name__ == "__main__":
    from structattn.errors import UserError

    try:
        main()
    except UserError as exc:  # a message, not a traceback
        raise SystemExit(f"record_reading_run.py: {exc}") from None
