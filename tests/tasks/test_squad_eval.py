"""The official SQuAD evaluate-v2.0 rules on hand-worked examples (numbers worked in the comments)."""
from __future__ import annotations

import json
import random

import pytest

from structattn.errors import UserError
from structattn.tasks import squad_eval as ev
from tasks_testutil import DATA, needs

SQUAD2 = "squad2/dev-v2.0.reconstructed-from-explorer.json"
CONTEXT = "The Eiffel Tower in Paris was finished in 1889."


def qa(qid, *texts):
    return {"id": qid, "question": f"{qid}?", "answers": [{"text": t, "answer_start": 0} for t in texts],
            "is_impossible": not texts}


# q1, q2, q5 answerable, q3, q4 unanswerable; q5's only answer normalises to "" (gold becomes [""])
DATASET = {"version": "v2.0", "data": [
    {"title": "A", "paragraphs": [{"context": CONTEXT, "qas": [
        qa("q1", "the Eiffel Tower", "Eiffel Tower, Paris"), qa("q2", "1889"), qa("q3")]}]},
    {"title": "B", "paragraphs": [{"context": CONTEXT, "qas": [qa("q4")]}]},
]}
PREDS = {"q1": "Eiffel tower", "q2": "in 1889", "q3": "", "q4": "Paris"}


def test_normalize_answer():
    assert ev.normalize_answer("The  Eiffel-Tower, (Paris)!") == "eiffeltower paris"
    assert ev.normalize_answer("An apple a day") == "apple day"
    assert ev.normalize_answer("theater anthem") == "theater anthem"  # whole words only
    assert ev.normalize_answer("a the An") == ""
    assert ev.normalize_answer("  \t\n ") == ""
    assert ev.normalize_answer("Über\u00a0café") == "über café"  # unicode lower and whitespace


def test_exact_match_and_f1():
    assert ev.exact_match("The Eiffel Tower", "eiffel tower.") == 1
    assert ev.exact_match("1889", "in 1889") == 0
    # gold [1889], pred [in, 1889]: overlap 1, P = 1/2, R = 1, F1 = 2 * 0.5 / 1.5 = 2/3
    assert ev.f1_score("1889", "in 1889") == pytest.approx(2 / 3)
    # bag of tokens: gold [a1, b, b], pred [b, b, b, c]: overlap min counts = 2, P = 2/4, R = 2/3, F1 = 4/7
    assert ev.f1_score("a1 b b", "b b b c") == pytest.approx(4 / 7)
    assert ev.f1_score("x", "y") == 0.0
    # empty on either side: 1 only when both are empty (after normalising)
    assert ev.f1_score("", "") == 1.0 and ev.f1_score("the", "") == 1.0
    assert ev.f1_score("", "Paris") == 0.0 and ev.f1_score("Paris", "") == 0.0


def test_evaluate_without_na_probs():
    out = ev.evaluate(DATASET, PREDS)
    # raw EM: q1 1 (vs "eiffel tower"), q2 0, q3 1 ("" == ""), q4 0 -> 2/4
    # raw F1: q1 1, q2 2/3, q3 1, q4 0 -> (2 + 2/3) / 4
    assert list(out) == ["exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total",
                         "NoAns_exact", "NoAns_f1", "NoAns_total"]
    assert out["exact"] == 50.0 and out["total"] == 4
    assert out["f1"] == pytest.approx(100 * (2 + 2 / 3) / 4)  # 66.67
    assert out["HasAns_exact"] == 50.0 and out["HasAns_f1"] == pytest.approx(100 * (1 + 2 / 3) / 2)  # 83.33
    assert out["HasAns_total"] == 2
    assert (out["NoAns_exact"], out["NoAns_f1"], out["NoAns_total"]) == (50.0, 50.0, 2)


def test_evaluate_with_na_probs_and_threshold():
    na = {"q1": 0.1, "q2": 0.9, "q3": 0.8, "q4": 0.95}
    out = ev.evaluate(DATASET, PREDS, na, na_prob_thresh=0.85)
    # above 0.85: q2 (answerable -> 0) and q4 (unanswerable -> 1); q1 1, q3 1
    assert out["exact"] == 75.0 and out["f1"] == 75.0
    assert (out["HasAns_exact"], out["HasAns_f1"], out["NoAns_exact"]) == (50.0, 50.0, 100.0)
    assert list(out)[-4:] == ["best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"]
    # sweep over na order q1 .1, q3 .8, q2 .9, q4 .95 from 2 (both unanswerable right):
    # F1: q1 +1 -> 3 (best, .1); q3 +0; q2 +2/3 -> 3.67 (best, .9); q4 -1 -> 2.67  => 91.67 at 0.9
    assert out["best_f1"] == pytest.approx(100 * (3 + 2 / 3) / 4) and out["best_f1_thresh"] == 0.9
    # EM: q1 +1 -> 3 (best, .1); q3 0; q2 +0 (not strictly better); q4 -1  => 75 at 0.1
    assert out["best_exact"] == 75.0 and out["best_exact_thresh"] == 0.1
    assert ev.best_threshold(PREDS, na, DATASET) == (out["best_f1"], 0.9)
    # the default threshold 1.0 never fires for probabilities: the plain scores
    plain = ev.evaluate(DATASET, PREDS, na)
    assert plain["exact"] == 50.0 and "best_f1" in plain


def test_sweep_with_ties_follows_the_mapping_order():
    # q4 and q1 tie at 0.2, q3 and q2 at 0.5. Start 2.
    # order q4, q1, q3, q2: q4 -1 -> 1; q1 +1 -> 2 (not > 2); q3 0; q2 +2/3 -> 2.67 (best at .5) => 66.67
    na = {"q4": 0.2, "q1": 0.2, "q3": 0.5, "q2": 0.5}
    assert ev.best_threshold(PREDS, na, DATASET) == (pytest.approx(100 * (2 + 2 / 3) / 4), 0.5)
    # order q1, q4, ...: q1 +1 -> 3 (best at .2); then 2, 2, 2.67 => 75 at 0.2, as the official script reports,
    # although the threshold 0.2 answers q1 and q4 together: q1 1 + q4 0 + q3 1 + q2 0 = 2 / 4 = 50
    na = {"q1": 0.2, "q4": 0.2, "q3": 0.5, "q2": 0.5}
    assert ev.best_threshold(PREDS, na, DATASET) == (75.0, 0.2)
    real = ev.evaluate(DATASET, PREDS, na, na_prob_thresh=0.2)
    assert real["f1"] == 50.0  # q1 1, q4 0 (answered), q2 0 and q3 1 (no answer)


def test_sweep_equals_brute_force_over_thresholds():
    # distinct na_probs in (0, 1) and non-empty predictions: the sweep's best is the best evaluate() over every
    # threshold (each na_prob, and 0.0 = answer nothing), and evaluate() at its threshold gives that score
    rng = random.Random(7)
    words = ["red", "blue", "green", "the", "sky", "sea"]
    qas = [qa(f"q{i}", *[" ".join(rng.choices(words, k=rng.randint(1, 3))) for _ in range(rng.randint(0, 2))])
           for i in range(40)]
    data = {"data": [{"title": "R", "paragraphs": [{"context": "c", "qas": qas}]}]}
    # no "the" in predictions: the sweep counts any non-empty prediction of an unanswerable question as wrong,
    # while "the" normalises to "" and scores 1 there
    preds = {q["id"]: " ".join(rng.choices(words[:3] + words[4:], k=rng.randint(1, 3))) for q in qas}
    values = rng.sample(range(1, 1000), len(qas))
    na = {q["id"]: v / 1000 for q, v in zip(qas, values)}
    best_f1, threshold = ev.best_threshold(preds, na, data)
    brute = max(ev.evaluate(data, preds, na, t)["f1"] for t in [0.0, *na.values()])
    assert best_f1 == pytest.approx(brute)
    assert ev.evaluate(data, preds, na, threshold)["f1"] == pytest.approx(best_f1)


def test_sweep_never_better_than_all_no_answer_keeps_zero():
    # every answer wrong: the best is predicting no answer everywhere, threshold stays 0.0 => 2/4
    preds = {"q1": "x", "q2": "y", "q3": "z", "q4": "w"}
    na = {"q1": 0.3, "q2": 0.4, "q3": 0.5, "q4": 0.6}
    assert ev.best_threshold(preds, na, DATASET) == (50.0, 0.0)


def test_gold_that_normalises_to_nothing():
    data = {"data": [{"title": "T", "paragraphs": [{"context": "The", "qas": [qa("q5", "The")]}]}]}
    # q5 has answers (HasAns) but its gold list becomes [""]: predicting "" is right, "The" too (normalises to "")
    for prediction, score in (("", 100.0), ("the", 100.0), ("Paris", 0.0)):
        out = ev.evaluate(data, {"q5": prediction})
        assert (out["exact"], out["HasAns_f1"], out["HasAns_total"]) == (score, score, 1)
        assert "NoAns_total" not in out


def test_squad11_format():
    # no is_impossible, every question answerable: no NoAns keys; several answers -> max over them
    data = {"version": "1.1", "data": [{"title": "T", "paragraphs": [{"context": CONTEXT, "qas": [
        {"id": "a", "question": "?", "answers": [{"text": "Eiffel Tower", "answer_start": 4},
                                                  {"text": "The Eiffel Tower in Paris", "answer_start": 0}]},
        {"id": "b", "question": "?", "answers": [{"text": "1889", "answer_start": 42}]}]}]}]}
    out = ev.evaluate(data, {"a": "Tower in Paris", "b": ""})
    # a: vs "eiffel tower" overlap 1 of 3 pred / 2 gold -> 0.4; vs "eiffel tower in paris" 3/3, 3/4 -> 6/7
    # b: empty prediction, gold has tokens -> 0.  F1 = (6/7 + 0) / 2; EM 0
    assert list(out) == ["exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total"]
    assert out["exact"] == 0.0 and out["f1"] == pytest.approx(100 * 6 / 7 / 2) and out["total"] == 2
    assert out["HasAns_f1"] == out["f1"]
    # the empty list form of the data works too, and extra prediction ids are ignored
    assert ev.evaluate(data["data"], {"a": "Tower in Paris", "b": "", "zz": "?"}) == out


def test_missing_predictions_count_as_wrong_and_are_listed():
    """As the issue asks (the official script leaves them out of the total, then crashes): a missing question
    scores as a wrong answer would, whether it is answerable or not."""
    partial = {"q1": "x", "q3": ""}
    assert ev.missing_predictions(DATASET, partial) == ["q2", "q4"]
    wrong = {**partial, "q2": "zzzz qqqq", "q4": "zzzz qqqq"}  # matches no gold answer, and is not ""
    assert ev.evaluate(DATASET, partial) == ev.evaluate(DATASET, wrong)
    # with na_probs only the predicted questions need one, and the sweep never counts a missing one as right
    na = {"q1": 0.1, "q3": 0.3}
    out = ev.evaluate(DATASET, partial, na)
    assert out["total"] == 4 and out["best_f1"] <= 50.0
    many = {"data": [{"title": "T", "paragraphs": [{"context": "c", "qas": [qa(f"id{i}") for i in range(8)]}]}]}
    assert ev.evaluate(many, {})["exact"] == 0.0


def test_bad_inputs():
    with pytest.raises(UserError, match=r"1 of 4 questions have no na_prob \(first: 'q4'\)"):
        ev.evaluate(DATASET, PREDS, {"q1": 0.1, "q2": 0.2, "q3": 0.3})
    with pytest.raises(UserError, match=r"prediction for 'q2' is None, not a string"):
        ev.evaluate(DATASET, {**PREDS, "q2": None})
    with pytest.raises(UserError, match=r"na_prob for 'q3' is 'high', not a number"):
        ev.best_threshold(PREDS, {"q1": 0, "q2": 0, "q3": "high", "q4": 1}, DATASET)
    with pytest.raises(UserError, match=r"na_prob for 'q1' is nan"):
        ev.evaluate(DATASET, PREDS, {"q1": float("nan"), "q2": 0, "q3": 0, "q4": 0})
    with pytest.raises(UserError, match=r"holds no question"):
        ev.evaluate({"data": []}, {})
    with pytest.raises(UserError, match=r"not in SQuAD format"):
        ev.evaluate({"articles": []}, {})
    with pytest.raises(UserError, match=r"article 0 \('T'\), paragraph 0, question 0 \(id 'x'\): 'answers'"):
        ev.evaluate({"data": [{"title": "T", "paragraphs": [{"qas": [{"id": "x", "answers": "Paris"}]}]}]}, {})


@needs(SQUAD2)
def test_gold_predictions_score_100_on_the_squad2_file():
    data = json.loads((DATA / SQUAD2).read_text(encoding="utf-8"))
    preds = {q["id"]: (q["answers"][0]["text"] if q["answers"] else "")
             for a in data["data"] for p in a["paragraphs"] for q in p["qas"]}
    out = ev.evaluate(data, preds)
    assert (out["exact"], out["f1"], out["total"]) == (100.0, 100.0, 11873)
    assert (out["HasAns_total"], out["NoAns_total"]) == (5928, 5945)  # SOURCE.md counts
    # answering nothing: exactly the unanswerable share
    out = ev.evaluate(data, {qid: "" for qid in preds})
    assert out["exact"] == pytest.approx(100 * 5945 / 11873) and out["HasAns_f1"] == 0.0
