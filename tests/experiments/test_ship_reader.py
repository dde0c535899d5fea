"""experiments/ship_model.py on a reader: a tiny SG-Net reader trained here through the real trainer and recorded
by experiments/record.py is packed into a package folder that loads by name; the committed answers are the shipped
reader's, the card's scores are the project's scorer on them, its float32 figure is the recorded line's, and a
fresh `structattn answer` process is timed. (The trained reader's own tests: tests/sgnet/test_reader.py.)"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train"))  # the tiny model and data of the engine's tests
from experiments_testutil import load_experiment  # noqa: E402

from fixtures import train_tiny_reader  # noqa: E402
from structattn.models import trained  # noqa: E402
from structattn.sgnet.reader import Reader  # noqa: E402
from structattn.tasks.squad import get_qa_task  # noqa: E402
from structattn.tasks.squad_eval import evaluate  # noqa: E402

RUN = "squad11-tiny-sgnet-s1"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A tiny squad11 SG-Net run under ROOT/runs/reading/RUN, recorded into ROOT/results/squad11.jsonl."""
    root = tmp_path_factory.mktemp("ship")
    run = root / "runs" / "reading" / RUN
    data = train_tiny_reader(root, run)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STRUCTATTN_DATA", str(data))
        mp.setenv("STRUCTATTN_CACHE", str(root / "cache"))
        (root / "results").mkdir()
        line = load_experiment("record").main(["reading", str(run), RUN], root=root)
    return {"root": root, "data": data, "run": run, "line": line}


@pytest.fixture
def ship(recorded, tmp_path, monkeypatch):
    """ship_model.py with its results/ in the recorded root and a registry whose reader ``tiny-reader`` lives in
    tmp_path."""
    monkeypatch.setenv("STRUCTATTN_DATA", str(recorded["data"]))
    monkeypatch.setenv("STRUCTATTN_CACHE", str(recorded["root"] / "cache"))
    module = load_experiment("ship_model")
    monkeypatch.setattr(module, "RESULTS", recorded["root"] / "results")
    monkeypatch.setattr(module, "SHIPPED", recorded["root"] / "results" / "shipped")
    monkeypatch.setattr(module, "REPO", recorded["root"])
    monkeypatch.setattr(trained, "TRAINED_DIR", tmp_path)
    entry = trained.TrainedModel("tiny-reader", "reader", "a tiny test reader", "make nothing")
    monkeypatch.setitem(trained.TRAINED, "tiny-reader", entry)
    return module, entry


def test_a_recorded_reader_ships_by_name_with_its_answers_and_their_cost(recorded, ship):
    module, entry = ship
    card = module.ship_reader(recorded["run"], entry, first_calls=1)
    assert trained.shipped_models("reader") == [entry] and card["kind"] == "reader"
    test = card["test"]
    assert test["set"] == "squad11/test" and test["questions"] == 12 and list(card["measured"]) == ["squad11:test"]
    committed = recorded["root"] / test["predictions"]
    answers = json.loads(committed.read_text(encoding="utf-8"))
    # the card's score is the scorer on the committed file, and that file is what the shipped reader answers
    gold = get_qa_task("squad11").read("test")
    assert test["score"] == round(evaluate(gold.dataset, answers)["f1"], 2)
    by_name = Reader.from_pretrained("tiny-reader").read_questions(gold.questions)
    assert {q.qid: (r.answer.text if r.answer else "") for q, r in zip(gold.questions, by_name)} == answers
    # the float32 run's test answers are the file experiments/record.py committed, not a second copy
    assert card["measured"]["squad11:test"]["float32_predictions"] == f"results/squad11/{RUN}.json"
    assert not (recorded["root"] / "results" / "shipped" / "tiny-reader.float32.squad11-test.json").exists()
    float32 = json.loads((recorded["root"] / card["measured"]["squad11:test"]["float32_predictions"]).read_text())
    assert test["float32_f1"] == round(evaluate(gold.dataset, float32)["f1"], 2) and set(float32) == set(answers)
    # the float32 model measured here is the run the results line recorded
    assert test["float32_equals_results_line"] and test["float32_f1"] == round(recorded["line"]["f1"], 2)
    assert test["f1_lost"] == pytest.approx(test["float32_f1"] - test["score"], abs=0.011)
    assert card["command"].startswith("structattn train ") and "--sgnet dual" in card["command"]
    assert "--task squad11" in card["command"] and f"--output-dir {recorded['run']}" in card["command"]
    assert card["tokenizer"].startswith("rebuilt from vocab.txt") and card["size_bytes"] == entry.size_bytes()
    call = card["first_call"]
    assert len(call["seconds"]) == 1 and call["seconds"][0] > 0 and call["printed"]
    assert call["command"].startswith("echo ") and "structattn answer --model tiny-reader" in call["command"]
    text = module.card_markdown(card)
    assert "`structattn answer --model tiny-reader`" in text and "squad11/test (12 questions)" in text


def test_retime_rewrites_only_the_first_call_of_a_shipped_reader(recorded, ship):
    module, entry = ship
    card = module.ship_reader(recorded["run"], entry, first_calls=1)
    module.write_card(entry, card)
    assert module.main(["--retime", "tiny-reader"]) == 0
    again = json.loads((entry.folder / "card.json").read_text(encoding="utf-8"))
    assert len(again["first_call"]["seconds"]) == module.FIRST_CALLS and again["first_call"]["printed"]
    assert {k: v for k, v in again.items() if k != "first_call"} == {k: v for k, v in card.items() if k != "first_call"}
    assert f"{again['first_call']['seconds'][-1]} s" in (entry.folder / "CARD.md").read_text(encoding="utf-8")


def test_the_training_time_names_the_reader_whose_encoder_a_run_starts_from(ship, tmp_path, monkeypatch):
    module, _ = ship
    monkeypatch.setattr(module, "RESULTS", tmp_path)
    monkeypatch.setattr(module, "REPO", tmp_path.parent)
    reader = {"run": "squad2-reader-s1", "train_wall_s": 100.5, "device": "cpu", "steps": 2970,
              "config": {"output_dir": "runs/reading/reader-s1"}}
    lines = [{"run": "other", "config": {}}, reader]
    (tmp_path / "squad2.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    stage = {"train_wall_s": 20.0, "device": "cpu", "steps": 472, "best_step": 400}
    train = module.reader_training({"model": "runs/reading/reader-s1/best"}, stage)
    assert train["wall_seconds"] == 20.0 and train["best_step"] == 400
    assert train["encoder"] == {"results_line": f"{tmp_path.name}/squad2.jsonl run squad2-reader-s1",
                                "wall_seconds": 100.5, "device": "cpu", "steps": 2970}
    assert "encoder" not in module.reader_training({"model": "runs/reading/elsewhere/best"}, stage)
    assert "encoder" not in module.reader_training({"model": "sentence-transformers/all-MiniLM-L6-v2"}, stage)


def test_retime_and_ship_say_what_they_need(ship):
    module, entry = ship
    with pytest.raises(SystemExit, match="tiny-reader is a reader with no card yet"):
        module.main(["--retime", "tiny-reader"])
    with pytest.raises(SystemExit, match="needs a shipped reader; bna-scratch is a parser"):
        module.main(["--retime", "bna-scratch"])
    with pytest.raises(SystemExit):
        module.main(["tiny-reader"])


def test_the_exact_train_command_gives_back_the_recorded_config(recorded, ship):
    """Every field the command sets, parsed by `structattn train`'s own parser, rebuilds the recorded config."""
    import argparse
    import dataclasses

    from structattn.run_config import RunConfig
    from structattn.train.config import add_config_arguments, config_from_args

    module, _ = ship
    config = recorded["line"]["config"]
    words = module.train_command(config).split()[2:]
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, RunConfig)
    rebuilt = dataclasses.asdict(config_from_args(parser.parse_args(words), RunConfig))
    assert {k: v for k, v in rebuilt.items() if k != "extra"} == {k: v for k, v in config.items() if k != "extra"}


def test_a_run_without_a_results_line_is_refused(recorded, ship, tmp_path):
    module, entry = ship
    with pytest.raises(SystemExit, match="has no line for other-run; record the run first"):
        module.results_line(recorded["root"] / "results" / "squad11.jsonl", "other-run")
    with pytest.raises(SystemExit, match="is not a finished span-QA run"):
        module.ship_reader(tmp_path, entry)
    assert not entry.shipped
