"""``structattn score mctest``: MCTest accuracy, worked by hand on a tiny MC500 test file."""
from __future__ import annotations

import json

import pytest


QUESTIONS = ("one: Who came?\tLion\tTiger\tSnake\tBear\tmultiple: What did they eat?\tcake\tpie\tfish\tnothing\t"
             "one: Where?\thome\tpark\tschool\tzoo\tmultiple: When?\tMonday\tFriday\tSunday\ttoday")


@pytest.fixture
def mctest_data(tmp_path, monkeypatch):
    """mc500 test: two stories of four questions, answers A C B D and B B A C (kinds one, multiple, one, multiple)."""
    root = tmp_path / "mctest"
    root.mkdir()
    lines = [f"mc500.test.{k}\tAuthor: 1;Work Time(s): 2\tA story.\t{QUESTIONS}" for k in range(2)]
    (root / "mc500.test.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root / "mc500.test.ans").write_text("A\tC\tB\tD\nB\tB\tA\tC\n", encoding="utf-8")
    monkeypatch.setenv("STRUCTATTN_DATA", str(tmp_path))
    return tmp_path


ALL_RIGHT = {"mc500.test.0:0": "A", "mc500.test.0:1": "C", "mc500.test.0:2": "B", "mc500.test.0:3": "D",
             "mc500.test.1:0": "B", "mc500.test.1:1": "B", "mc500.test.1:2": "A", "mc500.test.1:3": "C"}


def test_accuracy_overall_and_per_kind(mctest_data, cli, json_file):
    # wrong: 0:1 (multiple), 1:2 (one), 1:3 (multiple) -> 5 / 8 overall, one 3 / 4, multiple 2 / 4
    pred = dict(ALL_RIGHT, **{"mc500.test.0:1": "A", "mc500.test.1:2": "D", "mc500.test.1:3": "B"})
    out_file = mctest_data / "eval.json"
    code, out, _ = cli(["score", "mctest", "--predictions", json_file(pred), "--output", str(out_file)])
    d = json.loads(out)
    assert code == 0
    assert d == {"accuracy": 62.5, "accuracy_mc500": 62.5, "accuracy_one": 75.0, "accuracy_multiple": 50.0,
                 "total": 8}
    assert json.loads(out_file.read_text()) == d


def test_a_missing_prediction_is_an_error(mctest_data, cli, json_file):
    pred = {k: v for k, v in ALL_RIGHT.items() if k != "mc500.test.1:3"}
    code, _, err = cli(["score", "mctest", "--predictions", json_file(pred)])
    assert code == 2 and "no prediction for 1 of 8 questions (first: mc500.test.1:3)" in err
    assert "Traceback" not in err


def test_unknown_ids_and_values_that_are_not_letters_are_errors(mctest_data, cli, json_file):
    code, _, err = cli(["score", "mctest", "--predictions",
                        json_file(dict(ALL_RIGHT, **{"mc500.dev.0:0": "A"}))])
    assert code == 2 and "1 predicted question id(s) are not questions of mctest500/test (first: 'mc500.dev.0:0')" in err
    code, _, err = cli(["score", "mctest", "--predictions",
                        json_file(dict(ALL_RIGHT, **{"mc500.test.0:0": "AB"}))])
    assert code == 2 and "question 'mc500.test.0:0': prediction 'AB' is not an option letter" in err
