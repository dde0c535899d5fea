"""Metrics: hand-worked cases and agreement with sklearn / scipy / seqeval."""
from __future__ import annotations

import math
import random

import numpy as np
import pytest
from sklearn.metrics import f1_score, fbeta_score, matthews_corrcoef
from seqeval.metrics.sequence_labeling import get_entities

from structattn.tasks import metrics as M

# ------------------------------------------------------------------ classification / regression


def test_accuracy_hand_worked():
    assert M.accuracy([1, 0, 1, 1], [1, 1, 1, 0]) == {"accuracy": 0.5}
    assert M.accuracy(np.array([2, 2]), [2, 2])["accuracy"] == 1.0


def test_matthews_hand_worked():
    # TP=1 FP=1 TN=2 FN=0: (1*2 - 1*0) / sqrt((1+1)(1+0)(2+1)(2+0)) = 2/sqrt(12)
    out = M.matthews([1, 1, 0, 0], [1, 0, 0, 0])
    assert out["mcc"] == pytest.approx(2 / math.sqrt(12))
    assert out["accuracy"] == 0.75
    assert M.matthews([1, 1, 1], [0, 1, 0])["mcc"] == 0.0  # constant prediction: undefined -> 0


def test_f1_binary_hand_worked_and_sklearn():
    # positive = 1: TP=2 FP=1 FN=1 -> P = R = 2/3, F1 = 2/3; accuracy 3/5
    pred, ref = [1, 1, 1, 0, 0], [1, 1, 0, 1, 0]
    out = M.accuracy_f1(pred, ref)
    assert out["f1"] == pytest.approx(2 / 3)
    assert out["accuracy"] == pytest.approx(0.6)
    assert out["acc_and_f1"] == pytest.approx((0.6 + 2 / 3) / 2)
    assert M.f1_binary([0, 0], [0, 0]) == 0.0  # no positives at all: 0 by the zero-division rule
    rng = np.random.default_rng(0)
    for _ in range(50):
        p, r = rng.integers(0, 2, 30), rng.integers(0, 2, 30)
        assert M.f1_binary(p, r) == pytest.approx(f1_score(r, p, pos_label=1, zero_division=0))


def test_matthews_equals_sklearn():
    rng = np.random.default_rng(1)
    for _ in range(30):
        p, r = rng.integers(0, 2, 40), rng.integers(0, 2, 40)
        assert M.matthews(p, r)["mcc"] == pytest.approx(matthews_corrcoef(r, p))


def test_correlations_hand_worked():
    # x = 1,2,3; y = 2,4,7: cov = 5, var x = 2, var y = 38/3 -> r = 5 / sqrt(76/3); ranks agree -> rho = 1
    out = M.correlations([1.0, 2.0, 3.0], [2.0, 4.0, 7.0])
    assert out["pearson"] == pytest.approx(5 / math.sqrt(76 / 3))
    assert out["spearman"] == pytest.approx(1.0)
    assert out["corr"] == pytest.approx((out["pearson"] + 1) / 2)
    assert M.correlations([3.0, 2.0, 1.0], [1.0, 2.0, 3.0])["spearman"] == pytest.approx(-1.0)


def test_correlations_constant_is_zero_not_nan():
    out = M.correlations([2.5, 2.5, 2.5], [1.0, 2.0, 3.0])
    assert out == {"pearson": 0.0, "spearman": 0.0, "corr": 0.0}
    with pytest.raises(ValueError):
        M.correlations([float("nan"), 1.0], [1.0, 2.0])


def test_bad_metric_input():
    with pytest.raises(ValueError, match="2 predictions but 3 references"):
        M.accuracy([1, 0], [1, 0, 1])
    with pytest.raises(ValueError, match="no references"):
        M.accuracy([], [])
    with pytest.raises(ValueError, match="unlabelled"):
        M.accuracy([1], [None])
    with pytest.raises(ValueError, match="sequence 1"):
        M.entity_prf([["O"], ["O"]], [["O"], ["O", "O"]])
    with pytest.raises(ValueError, match="not O, B-<type> or I-<type>"):
        M.entity_prf([["PER"]], [["O"]])

# ------------------------------------------------------------------ entities


def test_entity_prf_seqeval_readme_example():
    # the example of seqeval's README: 1 of 2 entities correct -> P = R = F1 = 0.5
    ref = [["O", "O", "O", "B-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"]]
    pred = [["O", "O", "B-MISC", "I-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"]]
    out = M.entity_prf(pred, ref)
    assert (out["precision"], out["recall"], out["f1"]) == (0.5, 0.5, 0.5)
    assert out["conlleval_f1"] == 0.5


def test_entity_prf_hand_worked_per_type():
    ref = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O", "B-MISC", "I-MISC"]]
    pred = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "O", "B-MISC", "O"]]
    # gold: PER[0,2) LOC[3,4) ORG[0,1) MISC[2,4); predicted: PER[0,2) ORG[3,4) ORG[0,1) MISC[2,3); correct: PER, ORG[0,1)
    out = M.entity_prf(pred, ref)
    assert out["precision"] == 0.5 and out["recall"] == 0.5 and out["f1"] == 0.5
    assert out["f1_PER"] == 1.0
    assert out["f1_ORG"] == pytest.approx(2 * 0.5 * 1.0 / 1.5)  # P = 1/2, R = 1/1
    assert out["f1_LOC"] == 0.0 and out["f1_MISC"] == 0.0
    assert M.seqeval_prf(pred, ref, strict=True) == {"precision": 0.5, "recall": 0.5, "f1": 0.5}


def test_precision_recall_differ_hand_worked():
    # 3 gold, 2 predicted, 2 correct: P = 1, R = 2/3, F1 = 0.8
    ref = [["B-PER", "O", "B-LOC", "I-LOC", "O", "B-ORG"]]
    pred = [["B-PER", "O", "B-LOC", "I-LOC", "O", "O"]]
    out = M.entity_prf(pred, ref)
    assert out["precision"] == 1.0
    assert out["recall"] == pytest.approx(2 / 3)
    assert out["f1"] == pytest.approx(0.8)


def test_stray_inside_tag_strict_vs_conlleval():
    """The cases where strict IOB2 (reported as f1) and conlleval differ: ill-formed predictions."""
    # a predicted entity written I- I- without B-: strict sees no entity, conlleval one correct entity
    ref = [["B-PER", "I-PER", "O"]]
    pred = [["I-PER", "I-PER", "O"]]
    out = M.entity_prf(pred, ref)
    assert (out["precision"], out["recall"], out["f1"]) == (0.0, 0.0, 0.0)
    assert (out["conlleval_precision"], out["conlleval_recall"], out["conlleval_f1"]) == (1.0, 1.0, 1.0)
    assert M.seqeval_prf(pred, ref, strict=True)["f1"] == 0.0
    assert M.seqeval_prf(pred, ref, strict=False)["f1"] == 1.0

    # I-LOC after O: strict P = 1/1, R = 1/2, F1 = 2/3; conlleval P = R = F1 = 1
    ref = [["B-PER", "O", "B-LOC"]]
    pred = [["B-PER", "O", "I-LOC"]]
    out = M.entity_prf(pred, ref)
    assert out["precision"] == 1.0 and out["recall"] == 0.5 and out["f1"] == pytest.approx(2 / 3)
    assert out["conlleval_f1"] == 1.0

    # type change inside an entity: B-LOC I-PER is LOC[0,1) only (strict) or LOC[0,1) + PER[1,2) (conlleval)
    assert M.chunks_strict_iob2(["B-LOC", "I-PER"]) == [("LOC", 0, 1)]
    assert M.chunks_conlleval(["B-LOC", "I-PER"]) == [("LOC", 0, 1), ("PER", 1, 2)]
    ref = [["B-LOC", "B-PER"]]
    pred = [["B-LOC", "I-PER"]]
    out = M.entity_prf(pred, ref)
    assert out["f1"] == pytest.approx(2 / 3)  # P = 1/1, R = 1/2
    assert out["conlleval_f1"] == 1.0


def test_chunk_readers_hand_worked():
    tags = ["B-PER", "I-PER", "B-PER", "O", "I-ORG", "I-ORG", "B-MISC-X", "I-MISC-X"]
    assert M.chunks_strict_iob2(tags) == [("PER", 0, 2), ("PER", 2, 3), ("MISC-X", 6, 8)]
    assert M.chunks_conlleval(tags) == [("PER", 0, 2), ("PER", 2, 3), ("ORG", 4, 6), ("MISC-X", 6, 8)]
    assert M.chunks_strict_iob2([]) == [] and M.chunks_conlleval(["O"]) == []


def test_no_entities_zero_division_rule():
    out = M.entity_prf([["O", "O"]], [["O", "O"]])
    assert out["precision"] == out["recall"] == out["f1"] == 0.0
    out = M.entity_prf([["B-PER"]], [["O"]])
    assert out["precision"] == 0.0 and out["recall"] == 0.0


TYPES = ["PER", "LOC", "ORG"]


def _random_valid(rng: random.Random, n: int) -> list[str]:
    tags, prev = [], "O"
    for _ in range(n):
        r = rng.random()
        if prev != "O" and r < 0.35:
            tag = "I-" + prev[2:]
        elif r < 0.65:
            tag = "O"
        else:
            tag = "B-" + rng.choice(TYPES)
        tags.append(tag)
        prev = tag
    return tags


def _random_any(rng: random.Random, n: int) -> list[str]:
    return [rng.choice(["O", "O"] + [p + t for p in ("B-", "I-") for t in TYPES]) for _ in range(n)]


def _seqeval_conll_chunks(tags):
    return sorted((t, s, e + 1) for t, s, e in get_entities(list(tags)))


def test_chunkers_match_seqeval_on_random_sequences():
    from seqeval.scheme import IOB2, Entities

    rng = random.Random(1234)
    for trial in range(400):
        tags = (_random_valid if trial % 2 else _random_any)(rng, rng.randint(0, 12))
        strict = sorted(M.chunks_strict_iob2(tags))
        seq_strict = sorted((e.tag, e.start, e.end) for e in Entities([tags], IOB2).entities[0])
        assert strict == seq_strict, tags
        assert sorted(M.chunks_conlleval(tags)) == _seqeval_conll_chunks(tags), tags
        if trial % 2:  # valid IOB2: both readings coincide
            assert strict == sorted(M.chunks_conlleval(tags)), tags


@pytest.mark.parametrize("valid", [True, False])
def test_entity_prf_matches_seqeval_on_random_corpora(valid):
    rng = random.Random(99 if valid else 7)
    make = _random_valid if valid else _random_any
    for _ in range(25):
        ref = [_random_valid(rng, rng.randint(1, 15)) for _ in range(rng.randint(1, 20))]
        pred = [make(rng, len(s)) for s in ref]
        ours = M.entity_prf(pred, ref)
        strict = M.seqeval_prf(pred, ref, strict=True)
        loose = M.seqeval_prf(pred, ref, strict=False)
        for k in ("precision", "recall", "f1"):
            assert ours[k] == pytest.approx(strict[k], abs=1e-12)
            assert ours["conlleval_" + k] == pytest.approx(loose[k], abs=1e-12)
            if valid:
                assert ours[k] == pytest.approx(ours["conlleval_" + k], abs=1e-12)

# ------------------------------------------------------------------ token level


def test_token_prf_f05_hand_worked():
    ref = [["c", "i", "i", "c"], ["i", "c"]]
    pred = [["c", "i", "c", "c"], ["i", "c"]]
    # TP = 2, FP = 0, FN = 1: P = 1, R = 2/3, F0.5 = 1.25 * 2/3 / (0.25 + 2/3) = 10/11
    out = M.token_prf(pred, ref, positive="i", beta=0.5)
    assert out["precision"] == 1.0
    assert out["recall"] == pytest.approx(2 / 3)
    assert out["f0.5"] == pytest.approx(10 / 11)
    assert out["accuracy"] == pytest.approx(5 / 6)
    # TP = 1, FP = 2, FN = 1: P = 1/3, R = 1/2, F0.5 = 1.25 * (1/6) / (1/12 + 1/2) = 5/14
    out = M.token_prf([["i", "i", "i", "c"]], [["i", "c", "c", "i"]])
    assert out["f0.5"] == pytest.approx(5 / 14)
    assert M.f_beta(1 / 3, 1 / 2, 0.5) == pytest.approx(1.25 * (1 / 3) * (1 / 2) / (0.25 * (1 / 3) + 1 / 2))


def test_token_prf_zero_division_rule():
    # no predicted errors: P = 0 (no positives predicted), R = 0, F0.5 = 0
    out = M.token_prf([["c", "c"]], [["i", "c"]])
    assert (out["precision"], out["recall"], out["f0.5"]) == (0.0, 0.0, 0.0)
    # no errors anywhere: everything 0.0 as well (documented rule), accuracy 1
    out = M.token_prf([["c"]], [["c"]])
    assert (out["precision"], out["recall"], out["f0.5"], out["accuracy"]) == (0.0, 0.0, 0.0, 1.0)


def test_token_prf_matches_sklearn():
    rng = np.random.default_rng(5)
    for _ in range(30):
        lengths = rng.integers(1, 10, 8)
        ref = [list(rng.choice(["c", "c", "c", "i"], n)) for n in lengths]
        pred = [list(rng.choice(["c", "i"], n)) for n in lengths]
        flat_r = [t for s in ref for t in s]
        flat_p = [t for s in pred for t in s]
        out = M.token_prf(pred, ref)
        assert out["f0.5"] == pytest.approx(fbeta_score(flat_r, flat_p, beta=0.5, pos_label="i", zero_division=0))


def test_token_accuracy():
    assert M.token_accuracy([["NOUN", "VERB"], ["X"]], [["NOUN", "NOUN"], ["X"]]) == {"accuracy": pytest.approx(2 / 3)}
