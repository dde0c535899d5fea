"""``structattn score race``: accuracy as the RACE papers count it, worked by hand on a tiny RACE folder."""
from __future__ import annotations

import json

import pytest

from structattn.errors import UserError
from structattn.tasks.race import read_race, score_race

OPTIONS = [["w", "x", "y", "z"]]


def passage(pid: str, answers: list[str]) -> str:
    return json.dumps({"article": "A short passage.", "questions": [f"Q{k}?" for k in range(len(answers))],
                       "options": OPTIONS * len(answers), "answers": answers, "id": pid})


@pytest.fixture
def race_data(tmp_path, monkeypatch):
    """test split: middle1.txt with answers A B C, high1.txt with D A (5 questions); dev: middle1.txt with B."""
    for split, level, name, pid, answers in [("test", "middle", "1.txt", "middle1.txt", ["A", "B", "C"]),
                                             ("test", "high", "1.txt", "high1.txt", ["D", "A"]),
                                             ("dev", "middle", "1.txt", "middle1.txt", ["B"]),
                                             ("dev", "high", "1.txt", "high1.txt", ["C"])]:
        folder = tmp_path / "race" / split / level
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(passage(pid, answers), encoding="utf-8")
    monkeypatch.setenv("STRUCTATTN_DATA", str(tmp_path))
    return tmp_path


def test_accuracy_pools_the_levels_and_a_missing_prediction_counts_as_wrong(race_data, cli, json_file):
    # middle: A right, C wrong (gold B), C right -> 2 / 3; high: D right, high1.txt:1 missing -> 1 / 2
    pred = json_file({"middle1.txt:0": "A", "middle1.txt:1": "C", "middle1.txt:2": "C", "high1.txt:0": "D"})
    out_file = race_data / "eval.json"
    code, out, err = cli(["score", "race", "--predictions", pred, "--output", str(out_file)])
    d = json.loads(out)
    assert code == 0
    # RACE = 3 correct of all 5 questions = 60.00, not the mean of RACE-M and RACE-H (58.33)
    assert (d["accuracy"], d["correct"], d["total"], d["missing"]) == (60.0, 3, 5, 1)
    assert (d["accuracy_middle"], d["correct_middle"], d["total_middle"]) == (pytest.approx(200 / 3), 2, 3)
    assert (d["accuracy_high"], d["correct_high"], d["total_high"]) == (50.0, 1, 2)
    assert list(d)[:4] == ["accuracy", "correct", "total", "missing"]
    assert "1 question(s) of race/test have no prediction and count as wrong (first: 'high1.txt:1')" in err
    assert json.loads(out_file.read_text()) == d


def test_split_and_level_task(race_data, cli, json_file):
    pred = json_file({"middle1.txt:0": "B"})
    code, out, err = cli(["score", "race", "--task", "race_m", "--split", "dev", "--predictions", pred])
    d = json.loads(out)
    assert code == 0 and err == ""
    assert (d["accuracy"], d["total"], d["missing"], d["accuracy_middle"]) == (100.0, 1, 0, 100.0)
    assert "accuracy_high" not in d


def test_unknown_ids_are_an_error_naming_them(race_data, cli, json_file):
    pred = json_file({"middle1.txt:0": "A", "high1.txt:0": "D", "middle9.txt:0": "A"})
    code, out, err = cli(["score", "race", "--task", "race_m", "--predictions", pred])
    assert code == 2 and out == ""
    assert ("structattn score: error: 2 predicted question id(s) are not questions of race_m/test (first: "
            "'high1.txt:0', 'middle9.txt:0')") in err


@pytest.mark.parametrize("value", ["E", "a", 1, None, "AB"])
def test_a_value_that_is_not_an_option_letter_is_an_error(race_data, cli, json_file, value):
    pred = json_file({"middle1.txt:0": value})
    code, _, err = cli(["score", "race", "--predictions", pred])
    assert code == 2 and f"question 'middle1.txt:0': prediction {value!r} is not an option letter (A, B, C, D)" in err


def test_the_prediction_file_must_be_an_object(race_data, cli, json_file):
    pred = json_file(["A", "B"])
    code, _, err = cli(["score", "race", "--predictions", pred])
    assert code == 2 and "expected a JSON object mapping question id -> option letter, got list" in err


def test_score_race_function_without_any_prediction(race_data):
    questions = read_race(race_data / "race", "test")
    d = score_race(questions, {})
    assert (d["accuracy"], d["correct"], d["missing"]) == (0.0, 0, 5)
    with pytest.raises(UserError, match="no questions to score"):
        score_race([], {})
