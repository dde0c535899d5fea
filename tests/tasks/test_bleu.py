"""BLEU and the paired bootstraps: sacreBLEU's figures, checks, the identical-system rule, the seed-pooled test
against a brute-force resampling with sacreBLEU itself."""
from __future__ import annotations

import pytest

from structattn.errors import UserError
from structattn.tasks.bleu import corpus_bleu, paired_bootstrap, seed_paired_bootstrap, sentence_statistics, \
    bleu_from_statistics

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


def _degraded(drop_every: int, offset: int) -> list[str]:
    """REFS with every ``drop_every``-th word dropped, starting at a per-sentence offset: varied partial matches."""
    out = []
    for i, ref in enumerate(REFS):
        words = ref.split()
        out.append(" ".join(w for j, w in enumerate(words) if (j + i + offset) % drop_every))
    return out


def test_summed_sentence_statistics_give_sacrebleus_corpus_bleu():
    import sacrebleu

    hyps = _degraded(3, 0)
    want = sacrebleu.corpus_bleu(hyps, [REFS]).score
    assert bleu_from_statistics(sentence_statistics(hyps, REFS).sum(0)) == pytest.approx(want, abs=1e-9)


def test_sentence_statistics_are_cached_but_each_caller_gets_its_own_array():
    hyps = _degraded(5, 1)
    first = sentence_statistics(hyps, REFS)
    first[:] = -1.0  # a caller scribbling on its copy must not reach the cache
    again = sentence_statistics(list(hyps), list(REFS))
    assert (again >= 0).all() and again is not first
    assert bleu_from_statistics(again.sum(0)) == pytest.approx(corpus_bleu(hyps, REFS)["bleu"], abs=1e-9)


def test_seed_pooled_bootstrap_with_one_seed_is_sacrebleus_paired_bootstrap():
    import os

    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    base, system = _degraded(3, 0), _degraded(5, 1)
    os.environ["SACREBLEU_SEED"] = "7"
    try:
        test = PairedTest([("base", base), ("sys", system)], {"BLEU": BLEU(references=[REFS])}, references=None,
                          test_type="bs", n_samples=300)
        _, scores = test()
    finally:
        del os.environ["SACREBLEU_SEED"]
    got = seed_paired_bootstrap([(base, system)], REFS, samples=300, seed=7)
    assert got["p_value"] == pytest.approx(float(scores["BLEU"][1].p_value))
    assert got["delta"] == pytest.approx(scores["BLEU"][1].score - scores["BLEU"][0].score)


@pytest.mark.parametrize("plan", [[(3, 0, 4, 2), (5, 1, 4, 0)],   # a large pooled Δ
                                  [(4, 0, 5, 2), (5, 1, 4, 0)]])  # seeds that disagree: a middling p
def test_seed_pooled_bootstrap_against_brute_force_resampling(plan):
    import numpy as np
    import sacrebleu

    pairs = [(_degraded(a, b), _degraded(c, d)) for a, b, c, d in plan]
    samples, seed = 300, 3
    bleu = lambda hyps, refs: sacrebleu.corpus_bleu(hyps, [refs]).score  # noqa: E731
    observed = np.mean([bleu(s, REFS) - bleu(b, REFS) for b, s in pairs])
    idxs = np.random.default_rng(seed).choice(len(REFS), size=(samples, len(REFS)), replace=True)
    diffs = []
    for row in idxs:  # the same sentences for both seeds in each resample
        refs = [REFS[i] for i in row]
        diffs.append(abs(np.mean([bleu([s[i] for i in row], refs) - bleu([b[i] for i in row], refs)
                                  for b, s in pairs])))
    diffs = np.array(diffs)
    want_p = (np.sum(diffs - diffs.mean() > abs(observed)) + 1) / (samples + 1)
    got = seed_paired_bootstrap(pairs, REFS, samples=samples, seed=seed)
    assert got["delta"] == pytest.approx(observed)
    assert got["p_value"] == pytest.approx(want_p)
    assert got["seeds"] == 2


def test_seed_pooled_bootstrap_separates_better_from_identical():
    worse = [" ".join(r.split()[:4]) for r in REFS]
    assert seed_paired_bootstrap([(worse, REFS), (worse, REFS)], REFS, samples=200)["p_value"] < 0.05
    same = seed_paired_bootstrap([(worse, worse), (REFS, REFS)], REFS, samples=200)
    assert same == {"delta": 0.0, "p_value": 1.0, "seeds": 2}
    with pytest.raises(UserError, match="3 system hypotheses for 40 references"):
        seed_paired_bootstrap([(REFS, REFS[:3])], REFS)
