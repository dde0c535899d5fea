"""Span-QA decoding: exact span search against brute force, null scores, threshold, n-best, files."""
from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from structattn.errors import UserError
from structattn.sgnet.span_qa import (NA_PROB_FILE, NBEST_FILE, PREDICTIONS_FILE, QAContext, f1_by_threshold,
                                      na_probabilities, predict_answers, tune_threshold, window_candidates,
                                      write_predictions)

S = -1  # special token


def context_of(words):
    """Join words with single spaces; return the text and each word's character span."""
    spans, pos = [], 0
    for w in words:
        spans.append((pos, pos + len(w)))
        pos += len(w) + 1
    return " ".join(words), spans


def window(n_q, words_subwords):
    """token_word of ``[CLS] q.. [SEP] passage.. [SEP]``; words_subwords: (passage word, sub-word count) pairs."""
    tw = [S] + list(range(n_q)) + [S]
    for w, k in words_subwords:
        tw += [n_q + w] * k
    return np.array(tw + [S])


# ------------------------------------------------------------------------------------------ brute force
def brute_force(questions, features, starts, ends, n_best, max_len):
    """All token pairs of all windows, one by one: best score per text, null = min of [CLS] scores."""
    best_text: list[dict] = [dict() for _ in questions]
    null = [math.inf] * len(questions)
    for f, st, en in zip(features, starts, ends):
        q = f["example_index"]
        ctx = questions[q]
        tw = f["token_word"]
        null[q] = min(null[q], st[0] + en[0])
        for s, e in itertools.product(range(len(tw)), repeat=2):
            if s > e or tw[s] < ctx.offset or tw[e] < ctx.offset:
                continue
            a, b = tw[s] - ctx.offset, tw[e] - ctx.offset
            if b - a + 1 > max_len:
                continue
            text = ctx.context[ctx.spans[a][0]:ctx.spans[b][1]]
            score = st[s] + en[e]
            if text not in best_text[q] or score > best_text[q][text]:
                best_text[q][text] = score
    out = []
    for q in range(len(questions)):
        ranked = sorted(best_text[q].items(), key=lambda kv: -kv[1])[:n_best]
        out.append((ranked, null[q] - ranked[0][1]))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_span_search_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    vocab = ["a", "b", "c", "dd", "e"]  # few words: the same text recurs, so text de-duplication matters
    questions, features, starts, ends = [], [], [], []
    for q in range(3):
        n_q = int(rng.integers(1, 4))
        P = int(rng.integers(3, 14))
        words = [vocab[i] for i in rng.integers(0, len(vocab), P)]
        text, spans = context_of(words)
        questions.append(QAContext(qid=f"q{q}", context=text, spans=spans, offset=n_q, words=words))
        sub = rng.integers(1, 4, P)
        # overlapping windows over whole words
        start = 0
        while True:
            end = min(P, start + int(rng.integers(2, 7)))
            tw = window(n_q, [(w, int(sub[w])) for w in range(start, end)])
            features.append({"token_word": tw, "example_index": q})
            starts.append(rng.normal(size=len(tw)) * 3)
            ends.append(rng.normal(size=len(tw)) * 3)
            if end == P:
                break
            start = max(start + 1, end - int(rng.integers(0, 3)))
    n_best, max_len = int(rng.integers(1, 8)), int(rng.integers(1, 5))
    preds, na, nbest = predict_answers(questions, features, starts, ends, threshold=math.inf, n_best=n_best,
                                       max_answer_length=max_len)
    for ctx, (ranked, na_bf) in zip(questions, brute_force(questions, features, starts, ends, n_best, max_len)):
        got = nbest[ctx.qid]
        assert [x["text"] for x in got] == [t for t, _ in ranked]
        np.testing.assert_allclose([x["start_logit"] + x["end_logit"] for x in got], [s for _, s in ranked],
                                   rtol=0, atol=1e-12)
        assert preds[ctx.qid] == ranked[0][0]
        assert na[ctx.qid] == pytest.approx(na_bf, abs=1e-12)
        probs = np.array([x["probability"] for x in got])
        assert probs.sum() == pytest.approx(1.0) and np.all(np.diff(probs) <= 1e-15)


def test_window_candidates_one_entry_per_word_span():
    # [CLS] q [SEP] p0 p1 p1' [SEP]: word spans (0,0), (0,1), (1,1) -> three candidates
    tw = window(1, [(0, 1), (1, 2)])
    st = np.array([0, 0, 0, 1.0, 2.0, 5.0, 0])
    en = np.array([0, 0, 0, 0.5, 0.25, 3.0, 0])
    c = window_candidates(st, en, tw, offset=1, max_answer_length=30)
    got = {(int(a), int(b)): s + e for a, b, s, e in zip(c.first, c.last, c.start_logit, c.end_logit)}
    # (0,0): 1 + .5; (0,1): 1 + max(.25, 3); (1,1): best of s<=e inside p1: 2+.25, 2+3, 5+3 -> 8
    assert got == {(0, 0): 1.5, (0, 1): 4.0, (1, 1): 8.0}


# ------------------------------------------------------------------------------------------ hand-worked
def two_windows():
    words = ["The", "Normans", "came", "from", "Normandy", "."]
    text, spans = context_of(words)
    ctx = QAContext(qid="q", context=text, spans=spans, offset=2, words=words)
    w1 = window(2, [(0, 1), (1, 2), (2, 1), (3, 1)])  # The Normans(2 sub-words) came from
    w2 = window(2, [(3, 1), (4, 3), (5, 1)])  # from Normandy(3 sub-words) .
    st1 = np.zeros(len(w1))
    en1 = np.zeros(len(w1))
    st1[0], en1[0] = 0.5, 0.5  # null 1.0
    st1[5], en1[7] = 1.0, 1.0  # start on "Normans" (sub-words at 5, 6), end on "came" (7): 2.0
    st2 = np.zeros(len(w2))
    en2 = np.zeros(len(w2))
    st2[0], en2[0] = 1.5, 1.5  # null 3.0
    st2[5], en2[7] = 1.25, 1.25  # "Normandy" (positions 5..7): 2.5
    feats = [{"token_word": w1, "example_index": 0}, {"token_word": w2, "example_index": 0}]
    return ctx, feats, [st1, st2], [en1, en2]


def test_null_is_min_over_windows_and_threshold():
    ctx, feats, st, en = two_windows()
    # best span "Normandy" 2.5; null = min(1.0, 3.0) = 1.0; na = 1.0 - 2.5 = -1.5
    preds, na, nbest = predict_answers([ctx], feats, st, en, threshold=0.0)
    assert na == {"q": pytest.approx(-1.5)}
    assert preds == {"q": "Normandy"}
    assert nbest["q"][0]["text"] == "Normandy" and nbest["q"][1]["text"] == "Normans came"
    preds, _, _ = predict_answers([ctx], feats, st, en, threshold=-2.0)  # -1.5 > -2: no answer
    assert preds == {"q": ""}
    preds, _, _ = predict_answers([ctx], feats, st, en, threshold=-1.5)  # not strictly above: answer
    assert preds == {"q": "Normandy"}


def test_max_answer_length_counts_words_not_subwords():
    ctx, feats, st, en = two_windows()
    # with one word at most, "Normans came" (two words) is gone but the 3-sub-word "Normandy" stays
    _, _, nbest = predict_answers([ctx], feats, st, en, n_best=50, max_answer_length=1)
    texts = [x["text"] for x in nbest["q"]]
    assert texts[0] == "Normandy" and "Normans came" not in texts
    assert sorted(texts) == sorted(["The", "Normans", "came", "from", "Normandy", "."])
    _, _, nbest = predict_answers([ctx], feats, st, en, n_best=50, max_answer_length=2)
    assert "Normans came" in [x["text"] for x in nbest["q"]]


def test_text_keeps_original_characters():
    text = "Paris  is   the CAPITAL,of France."
    spans = [(0, 5), (7, 9), (12, 15), (16, 23), (23, 24), (24, 26), (27, 33), (33, 34)]
    ctx = QAContext(qid="x", context=text, spans=spans, offset=1)
    tw = window(1, [(w, 1) for w in range(8)])
    st, en = np.zeros(len(tw)), np.zeros(len(tw))
    st[3 + 1], en[3 + 4] = 5.0, 5.0  # words 1 .. 4: "is   the CAPITAL,"
    preds, _, _ = predict_answers([ctx], [{"token_word": tw, "example_index": 0}], [st], [en])
    assert preds["x"] == "is   the CAPITAL,"


def test_padded_logit_rows_and_bad_inputs():
    ctx, feats, st, en = two_windows()
    T = max(len(f["token_word"]) for f in feats)
    pad_st = np.full((2, T + 3), 100.0)  # padded positions score high but must be ignored
    pad_en = np.full((2, T + 3), 100.0)
    for i in range(2):
        pad_st[i, :len(st[i])], pad_en[i, :len(en[i])] = st[i], en[i]
    assert predict_answers([ctx], feats, pad_st, pad_en)[0] == predict_answers([ctx], feats, st, en)[0]
    other = QAContext(qid="lonely", context="x", spans=[(0, 1)], offset=1)
    with pytest.raises(ValueError, match=r"1 question\(s\) have no window.*lonely"):
        predict_answers([ctx, other], feats, st, en)
    with pytest.raises(UserError, match="n_best"):
        predict_answers([ctx], feats, st, en, n_best=0)
    with pytest.raises(UserError, match="max_answer_length"):
        predict_answers([ctx], feats, st, en, max_answer_length=0)


# ------------------------------------------------------------------------------------------ threshold, files
DATASET = {"version": "v2.0", "data": [{"title": "T", "paragraphs": [{"context": "red blue green", "qas": [
    {"id": "a1", "question": "?", "answers": [{"text": "red", "answer_start": 0}], "is_impossible": False},
    {"id": "a2", "question": "?", "answers": [{"text": "blue", "answer_start": 4}], "is_impossible": False},
    {"id": "n1", "question": "?", "answers": [], "is_impossible": True},
    {"id": "n2", "question": "?", "answers": [], "is_impossible": True}]}]}]}


def test_tune_threshold_follows_the_official_sweep():
    from structattn.tasks.squad_eval import evaluate

    preds = {"a1": "red", "a2": "green", "n1": "blue", "n2": "red"}
    na = {"a1": -3.0, "n1": -1.0, "a2": 0.5, "n2": 2.0}
    # Sweep in na order, starting from "all no-answer" = 2 correct (n1, n2):
    # a1 (-3): +1 -> 3 (best, thresh -3); n1 (-1): -1 -> 2; a2 (0.5): +0 -> 2; n2 (2): -1 -> 1.
    threshold = tune_threshold(DATASET, preds, na)
    assert threshold == -3.0
    answered = {q: ("" if na[q] > threshold else p) for q, p in preds.items()}
    assert evaluate(DATASET, answered)["f1"] == pytest.approx(75.0)  # a1, n1, n2 right; a2 wrong


def test_f1_by_threshold_is_the_scorer_at_every_point_of_the_sweep():
    """Each point's F1 equals the official scorer on the predictions that threshold makes (hand-worked above:
    50, 75, 50, 50, 25 from "all no-answer" to "all answered")."""
    from structattn.tasks.squad_eval import evaluate

    preds = {"a1": "red", "a2": "green", "n1": "blue", "n2": "red"}
    na = {"a1": -3.0, "n1": -1.0, "a2": 0.5, "n2": 2.0}
    curve = f1_by_threshold(DATASET, preds, na)
    assert [t for t, _ in curve] == [-4.0, -3.0, -1.0, 0.5, 2.0]
    assert [f for _, f in curve] == pytest.approx([50.0, 75.0, 50.0, 50.0, 25.0])
    for threshold, f1 in curve:
        answered = {q: ("" if na[q] > threshold else p) for q, p in preds.items()}
        assert evaluate(DATASET, answered)["f1"] == pytest.approx(f1)


def test_na_probabilities_keep_the_order_and_leave_predictions_alone_at_the_default_threshold():
    from structattn.tasks.squad_eval import evaluate

    na = {"a1": -3.0, "n1": -1.0, "a2": 0.5, "n2": 40.0}
    probs = na_probabilities(na)
    assert sorted(na, key=na.get) == sorted(probs, key=probs.get) and probs["a2"] == pytest.approx(0.6224593)
    preds = {"a1": "red", "a2": "blue", "n1": "", "n2": ""}
    # the official default threshold (1.0) changes nothing: exact/f1 are those of the predictions themselves
    assert evaluate(DATASET, preds, probs)["exact"] == evaluate(DATASET, preds)["exact"] == 100.0


def test_tune_threshold_answers_nothing_when_that_is_best():
    """All unanswerable questions scored below 0: the official sweep's start (0.0) would answer them all; the
    tuned threshold lies below every na-score, so every prediction is ""."""
    preds = {"a1": "blue", "a2": "red", "n1": "blue", "n2": "red"}  # a1, a2 wrong when answered
    na = {"a1": -3.0, "n1": -2.0, "a2": -1.5, "n2": -1.0}
    threshold = tune_threshold(DATASET, preds, na)
    assert threshold < -3.0
    assert all(na[q] > threshold for q in na)


def test_tune_threshold_never_splits_tied_scores():
    """a1 (right) and n1 tie at 0.5: answering both gains 1 and loses 1, so the pair is left unanswered (a2 is
    answered wrong, n2 is unanswerable: nothing above helps either)."""
    preds = {"a1": "red", "a2": "green", "n1": "blue", "n2": "red"}
    na = {"a1": 0.5, "n1": 0.5, "a2": 1.0, "n2": 2.0}
    assert tune_threshold(DATASET, preds, na) < 0.5


def test_write_predictions_round_trip(tmp_path):
    ctx, feats, st, en = two_windows()
    preds, na, nbest = predict_answers([ctx], feats, st, en, n_best=3)
    paths = write_predictions(tmp_path / "out", preds, na, nbest)
    assert {p.name for p in paths.values()} == {PREDICTIONS_FILE, NA_PROB_FILE, NBEST_FILE}
    assert json.loads(paths["predictions"].read_text()) == preds
    probs = json.loads(paths["na_prob"].read_text())
    assert probs.keys() == na.keys() and all(0.0 < probs[q] < 1.0 for q in probs)
    assert probs == na_probabilities(na)
    assert json.loads(paths["nbest"].read_text()) == nbest
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(p.name for p in paths.values())


def test_write_predictions_refuses_non_finite_before_writing(tmp_path):
    with pytest.raises(ValueError, match="na_score of 'q' is inf"):
        write_predictions(tmp_path, {"q": ""}, {"q": math.inf})
    assert list(tmp_path.iterdir()) == []
    paths = write_predictions(tmp_path, {"q": "x"})  # predictions alone
    assert list(paths) == ["predictions"]
