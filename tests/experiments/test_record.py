"""experiments/record.py on fabricated run folders, one per kind: the committed copy of the run's output is the
run's file byte for byte, every score is the project's scorer on that copy, every summary field lands in the line,
and a re-recorded run keeps its place in the results file."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tasks"))
from tasks_testutil import needs  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from experiments_testutil import load_experiment  # noqa: E402

from structattn.errors import UserError  # noqa: E402
from structattn.tasks.bleu import corpus_bleu  # noqa: E402
from structattn.tasks.evalb import evalb_files  # noqa: E402
from structattn.tasks.multi30k import read_split  # noqa: E402
from structattn.tasks.ptb import split_files  # noqa: E402



@pytest.fixture(scope="module")
def recorder():
    return load_experiment("record")


def _bleu(path: Path, split: str) -> float:
    return corpus_bleu(path.read_text(encoding="utf-8").split("\n")[:-1], read_split(split).targets)["bleu"]


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def _hypotheses(run: Path, split: str) -> Path:
    """The references of ``split`` as a run's translations, every 4th line cut short (BLEU < 100)."""
    refs = read_split(split).targets
    hyps = [" ".join(r.split()[:2]) if i % 4 == 0 else r for i, r in enumerate(refs)]
    path = run / "hypotheses" / f"{split}.de"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    return path


def _trees(run: Path) -> Path:
    """A run's test parse: the cleaned gold trees, every 3rd one flattened to its preterminals under its root."""
    from structattn.tasks.ptb import Tree, read_split as read_trees   # noqa: PLC0415

    trees = [Tree(t.label, t.preterminals()) if i % 3 == 0 else t for i, t in enumerate(read_trees("test"))]
    path = run / "test.trees"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(t.to_string() + "\n" for t in trees), encoding="utf-8")
    return path


def _nmt_run(tmp: Path, splits: list[str], tests: list[str]) -> Path:
    run = tmp / "run"
    for split in splits:
        _hypotheses(run, split)
    summary = {"variant": "hybrid_gate", "seed": 1, "config": {"k": 2, "output_dir": "x"},
               "tests": {s: {} for s in tests}, "dev_bleu_beam": {"best": 1.0}, "command": "structattn x"}
    (run / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return run


def test_the_kinds_are_the_registry(recorder):
    assert set(recorder.KINDS) == {"nmt", "parsing", "laptop", "precision", "reading"}
    for kind in recorder.KINDS:   # each kind's command line parses with its own options
        assert recorder.parser().parse_args([kind, "r", "n", *(["t.trees", "--seconds", "1", "--threads", "1",
                                             "--load-before", "0", "--load-after", "0", "--command", "c"]
                                            if kind == "laptop" else [])]).kind == kind


@needs("multi30k/raw/val.de")
def test_nmt_records_dev_and_replaces_in_place(recorder, tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    (results / "nmt.jsonl").write_text('{"run": "a"}\n{"run": "b"}\n{"run": "c"}\n', encoding="utf-8")
    run = _nmt_run(tmp_path, ["test2016", "dev"], ["test2016"])
    recorder.main(["nmt", str(run), "b", "--note", "why"], root=tmp_path)
    lines = _lines(results / "nmt.jsonl")
    assert [ln["run"] for ln in lines] == ["a", "b", "c"]  # replaced where it was
    line = lines[1]
    for split in ("test2016", "dev"):
        path = tmp_path / line[f"hypotheses_{split}"]
        assert path == results / "nmt" / f"b.{split}.de"
        assert path.read_bytes() == (run / "hypotheses" / f"{split}.de").read_bytes()
        assert line[f"bleu_{split}"] == round(_bleu(path, split), 2)
    assert line["bleu_dev"] < 100 and line["mechanism_options"] == {"k": 2} and "output_dir" not in line["config"]
    assert line["note"] == "why" and line["command"] == "structattn x" and line["dev_bleu_beam"] == {"best": 1.0}
    assert set(recorder.NMT_FIELDS) <= set(line) and line["bleu_signature"].startswith("nrefs:1|case:mixed")
    # no dev file: no dev fields; --results / --outputs: another file and folder (the recipe ablation's)
    again = _nmt_run(tmp_path / "again", ["test2016"], ["test2016"])
    recorder.main(["nmt", str(again), "d"], root=tmp_path)
    last = _lines(results / "nmt.jsonl")[-1]
    assert last["run"] == "d" and "bleu_dev" not in last and "hypotheses_dev" not in last and "note" not in last
    recorder.main(["nmt", str(again), "e", "--results", str(results / "peers" / "abl.jsonl"),
                   "--outputs", str(results / "peers" / "ablation")], root=tmp_path)
    assert _lines(results / "peers" / "abl.jsonl")[0]["hypotheses_test2016"] == "results/peers/ablation/e.test2016.de"


@needs("ptb_sample_nltk")
def test_parsing_scores_the_committed_trees(recorder, tmp_path):
    run = tmp_path / "run"
    trees = _trees(run)
    config = {"variant": "bna", "layers": None, "seed": 2, "encoder": None, "pos": "spacy", "ngram": 3}
    (run / "summary.json").write_text(json.dumps({"config": config, "dev": {"f1": 80.0}, "wall_seconds": 12.5,
                                                  "command": "structattn train-parsing"}))
    line = recorder.main(["parsing", str(run), "p1", "--note", "n"], root=tmp_path)
    target = tmp_path / "results" / "parsing" / "p1.test.trees"
    assert target.read_bytes() == trees.read_bytes() and line["predictions"] == "results/parsing/p1.test.trees"
    score = evalb_files(split_files("test"), target).to_dict()
    assert {k: line[k] for k in ("recall", "precision", "f1", "complete_match")} == \
        {k: score[k] for k in ("recall", "precision", "f1", "complete_match")}
    assert (line["variant"], line["seed"], line["encoder"], line["ngram"], line["wall_s"], line["note"]) == \
        ("bna", 2, "all-MiniLM-L6-v2", 3, 12.5, "n")
    assert _lines(tmp_path / "results" / "parsing.jsonl") == [json.loads(json.dumps(line))]


@needs("multi30k/raw/val.de")
def test_laptop_line_times_and_scores_the_output(recorder, tmp_path):
    run = tmp_path / "run"
    hyps = _hypotheses(run, "test2016")
    (run / "summary.json").write_text(json.dumps({"config": {"preset": "laptop"}, "updates": 800,
                                                  "best_step": 600, "final_model": "best"}))
    line = recorder.main(["laptop", str(run), "hg", "hypotheses/test2016.de", "--seconds", "125.44", "--threads",
                          "2", "--load-before", "1.0 1.0 1.0", "--load-after", "2.0 2.0 2.0", "--command",
                          "structattn train-translation"], root=tmp_path)
    target = tmp_path / "results" / "laptop" / "hg.test2016.de"
    assert target.read_bytes() == hyps.read_bytes() and line["output"] == "results/laptop/hg.test2016.de"
    assert (line["metric"], line["score"]) == ("test2016 BLEU", round(_bleu(target, "test2016"), 2))
    assert (line["wall_seconds"], line["wall_minutes"], line["steps"], line["stopped"]) == \
        (125.4, 2.1, 800, {"best_step": 600, "updates": 800, "final_model": "best"})
    assert _lines(tmp_path / "results" / "laptop_defaults.jsonl")[0]["name"] == "hg"


@needs("multi30k/raw/val.de")
def test_precision_pairs_make_the_table(recorder, tmp_path):
    runs = tmp_path / "runs"
    for precision, seconds in (("fp32", 30.0), ("bf16", 45.0)):
        for workload in ("translation", "sentence"):
            run = runs / f"{workload}-{precision}"
            if workload == "translation":
                _hypotheses(run, "test2016")
            (run / "checkpoint").mkdir(parents=True)
            (run / "checkpoint" / "state.json").write_text(json.dumps(
                {"step": 300, "train_seconds": seconds, "finished": True, "history": [{"accuracy": 0.875}]}))
            (runs / f"{workload}-{precision}.command").write_text(f"structattn {workload} --precision {precision}\n")
            recorder.main(["precision", str(run), f"{workload}-{precision}"], root=tmp_path)
    lines = _lines(tmp_path / "results" / "precision_runs.jsonl")
    assert [(x["workload"], x["precision"]) for x in lines] == [
        ("translation", "fp32"), ("sentence", "fp32"), ("translation", "bf16"), ("sentence", "bf16")]
    committed = tmp_path / "results" / "precision" / "translation-bf16.test2016.de"
    assert lines[2]["score"] == round(_bleu(committed, "test2016"), 2) and lines[3]["score"] == 87.5
    assert lines[2]["seconds_per_update"] == 0.15 and lines[2]["command"] == "structattn translation --precision bf16"
    page = (tmp_path / "results" / "PRECISION.md").read_text()
    assert "| sentence (train) | MiniLM, SST-2" in page and "| 0.100 | 0.150 | 1.50x |" in page
    with pytest.raises(UserError, match="WORKLOAD-PRECISION"):
        recorder.main(["precision", str(runs / "sentence-fp32"), "sentence-fp16"], root=tmp_path)


@needs("race/test/middle")
def test_reading_multiple_choice_predictions_made_elsewhere(recorder, tmp_path):
    """--predictions / --device / --stopped-log: the committed letters scored with `score race`'s function."""
    from structattn.tasks.multiple_choice import get_mc_task, score_option_letters
    from structattn.run_config import RunConfig

    questions = get_mc_task("race_m").read("test")
    letters = {q.qid: "ABCD"[i % 4] for i, q in enumerate(questions)}
    run = tmp_path / "run"
    run.mkdir()
    (run / "test.json").write_text(json.dumps(letters))
    RunConfig(task="race_m", output_dir=str(run), seed=3).save(run / "train_config.json")
    (run / "train.log").write_text("race_m global:   9%| 300/3178 [00:36<06:15,  7.66it/s]race_m global step 300: "
                                   "dev accuracy 0.415 (best 0.415 at step 300), train loss 1.3537\n"
                                   "race_m global:  85%| 2689/3178 [04:53<00:34, 14.10it/s]stopped\n")
    line = recorder.main(["reading", str(run), "mc", "--predictions", str(run / "test.json"), "--device", "D",
                          "--stopped-log", str(run / "train.log"), "--encoder-from", "E"], root=tmp_path)
    target = tmp_path / "results" / "race" / "mc.json"
    assert target.read_bytes() == (run / "test.json").read_bytes() and line["predictions"] == "results/race/mc.json"
    assert line["accuracy"] == score_option_letters("race_m", questions, letters)["accuracy"]
    assert (line["seed"], line["variant"], line["device"], line["encoder_from"]) == (3, "baseline", "D", "E")
    assert (line["finished"], line["steps"], line["planned_steps"], line["dev"]) == \
        (False, 2689, 3178, {"accuracy": 0.415, "train_loss": 1.3537})
    assert _lines(tmp_path / "results" / "race.jsonl")[0]["run"] == "mc"
    with pytest.raises(UserError, match="--predictions needs --device"):
        recorder.main(["reading", str(run), "mc", "--predictions", str(run / "test.json"), "--stopped-log",
                       str(run / "train.log")], root=tmp_path)


def test_a_missing_summary_says_which_run(recorder, tmp_path):
    with pytest.raises(UserError, match="summary.json not found"):
        recorder.main(["parsing", str(tmp_path), "x"], root=tmp_path)
