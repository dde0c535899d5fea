"""BLEU and the paired bootstrap: sacreBLEU's figures, checks, the identical-system rule."""
from __future__ import annotations

import pytest

from structattn.errors import UserError
from structattn.tasks.bleu import corpus_bleu, paired_bootstrap

REFS = [f"Der Hund {i} läuft schnell über die grüne Wiese ." for i in range(40)]


def test_perfect_and_empty_hypotheses():
    assert corpus_bleu(REFS, REFS)["bleu"] == pytest.approx(100.0)
    assert corpus_bleu([""] * len(REFS), REFS)["bleu"] == 0.0


def test_hand_worked_brevity_and_precision():
    # 4 of 4 unigrams, 3/3 bigrams, 2/2 trigrams, 1/1 4-gram match; hyp 4 words vs ref 6: BP = exp(1 - 6/4)
    import math

    got = corpus_bleu(["a b c d"], ["a b c d e f"])["bleu"]
    assert got == pytest.approx(100 * math.exp(1 - 6 / 4), rel=1e-6)


def test_paired_bootstrap_against_a_clearly_better_and_an_identical_system():
    worse = [" ".join(r.split()[:4]) for r in REFS]
    result = paired_bootstrap(worse, {"better": REFS, "same": worse}, REFS, samples=200)
    assert result["better"]["p_value"] < 0.05 and result["better"]["bleu"] > result["better"]["baseline_bleu"]
    assert result["same"]["p_value"] == 1.0


def test_line_count_mismatch_is_refused():
    with pytest.raises(UserError, match="3 hypotheses of b for 40 references"):
        paired_bootstrap(REFS, {"b": REFS[:3]}, REFS)
