"""Multiple-choice registry and accuracy (hand-worked numbers)."""
from __future__ import annotations

import pytest

from structattn.errors import UserError
from structattn.tasks.multiple_choice import MC_TASKS, MCQuestion, accuracy, answer_index, get_mc_task


def q(qid, label, group, kind=""):
    return MCQuestion(qid=qid, passage="P.", question="Q?", options=["a", "b", "c", "d"], label=label, group=group,
                      kind=kind)


RACE = [q("m1", 0, "middle"), q("m2", 1, "middle"), q("h1", 2, "high"), q("h2", 3, "high"), q("h3", 0, "high")]


def test_accuracy_overall_and_per_group():
    # right: m1, h1, h3 -> 3/5 overall; middle 1/2; high 2/3
    out = accuracy([0, 0, 2, 1, 0], RACE)
    assert out == {"accuracy": 0.6, "accuracy_middle": 0.5, "accuracy_high": 2 / 3, "total": 5}
    assert list(out) == ["accuracy", "accuracy_middle", "accuracy_high", "total"]
    # by qid, any order
    assert accuracy({"h3": 0, "h2": 1, "h1": 2, "m2": 0, "m1": 0}, RACE) == out


def test_accuracy_per_mctest_kind():
    qs = [q("s:0", 0, "mc160", "one"), q("s:1", 1, "mc160", "multiple"), q("s:2", 2, "mc160", "multiple"),
          q("s:3", 3, "mc160", "one")]
    # right: s:0 (one), s:2 (multiple) -> 2/4; one 1/2; multiple 1/2
    out = accuracy([0, 0, 2, 0], qs)
    assert out == {"accuracy": 0.5, "accuracy_mc160": 0.5, "accuracy_one": 0.5, "accuracy_multiple": 0.5, "total": 4}
    assert accuracy([0, 1, 2, 3], qs)["accuracy"] == 1.0


def test_accuracy_refuses_what_it_cannot_score():
    with pytest.raises(UserError, match="4 predictions for 5 questions"):
        accuracy([0, 0, 0, 0], RACE)
    with pytest.raises(UserError, match="no prediction for 1 of 5 questions \\(first: h3\\)"):
        accuracy({"m1": 0, "m2": 0, "h1": 0, "h2": 0}, RACE)
    with pytest.raises(UserError, match="1 questions have no gold answer"):
        accuracy([0, 0], [q("a", 0, "middle"), q("b", None, "middle")])
    with pytest.raises(UserError, match="no questions"):
        accuracy([], [])


def test_answer_letters():
    assert [answer_index(x, 4, "f") for x in ("A", "B", " C", "D\n")] == [0, 1, 2, 3]
    for bad in ("E", "a", "", "AB", "1"):
        with pytest.raises(UserError, match="f: answer"):
            answer_index(bad, 4, "f")


def test_registry():
    assert list(MC_TASKS) == ["race", "race_m", "race_h", "mctest160", "mctest500"]
    assert get_mc_task("race").groups == ("middle", "high") and get_mc_task("race_m").groups == ("middle",)
    assert all(spec.num_choices == 4 and spec.splits == ("train", "dev", "test") for spec in MC_TASKS.values())
    with pytest.raises(UserError, match="unknown multiple-choice task 'dream'; valid tasks: mctest160, mctest500, race, race_h, race_m"):
        get_mc_task("dream")
    with pytest.raises(UserError, match="task race: unknown split 'validation'; valid splits: train, dev, test"):
        get_mc_task("race").read("validation", data_dir="/nonexistent")


def test_option_letters_are_scored_in_percent_and_bad_letters_refused():
    from structattn.tasks.multiple_choice import score_option_letters

    questions = [MCQuestion(qid=f"q{i}", passage="p", question="q", options=["a", "b", "c", "d"], label=i % 4,
                            group="mc500") for i in range(4)]
    scores = score_option_letters("mctest500", questions, {"q0": "A", "q1": "B", "q2": "A", "q3": " D"})
    assert scores["accuracy"] == 75.0 and scores["accuracy_mc500"] == 75.0 and scores["total"] == 4
    race = score_option_letters("race_m", questions, {"q0": "A", "q1": "B"})   # RACE: missing ones count wrong
    assert race["accuracy"] == 50.0 and race["missing"] == 2
    with pytest.raises(UserError, match="not an option letter"):
        score_option_letters("mctest500", questions, {"q0": "AB", "q1": "B", "q2": "A", "q3": "D"})
