"""Paired bootstrap of corpus bracket F1 over sentences (train/significance.paired_bootstrap_f1)."""
import pytest

from structattn.train.significance import paired_bootstrap_f1


def test_identical_systems_differ_by_zero_with_p_one():
    counts = [(3, 4, 5), (2, 2, 2), (0, 3, 1)]
    delta, p = paired_bootstrap_f1(counts, counts, samples=200)
    assert delta == 0.0 and p == 1.0


def test_observed_difference_is_the_corpus_f1_difference():
    # A: matched 6 of gold 8, test 8 -> R = P = 75 -> F1 75; B: matched 4, gold 8, test 8 -> F1 50.
    a = [(3, 4, 4), (3, 4, 4)]
    b = [(2, 4, 4), (2, 4, 4)]
    delta, _ = paired_bootstrap_f1(a, b, samples=100)
    assert delta == pytest.approx(25.0)


def test_a_system_better_on_every_sentence_is_significant_and_the_sign_is_kept():
    a = [(4, 5, 5)] * 60
    b = [(2, 5, 5)] * 60
    delta, p = paired_bootstrap_f1(a, b, samples=2000)
    assert delta == pytest.approx(40.0) and p < 0.001
    delta_rev, p_rev = paired_bootstrap_f1(b, a, samples=2000)
    assert delta_rev == pytest.approx(-40.0) and p_rev < 0.001


def test_a_mixed_difference_is_not_significant():
    # half the sentences favour A, half favour B by the same amount: no evidence either way
    a = [(4, 5, 5), (2, 5, 5)] * 30
    b = [(2, 5, 5), (4, 5, 5)] * 30
    delta, p = paired_bootstrap_f1(a, b, samples=2000)
    assert delta == pytest.approx(0.0) and p > 0.5


def test_unequal_lists_are_refused():
    with pytest.raises(ValueError, match="equal"):
        paired_bootstrap_f1([(1, 1, 1)], [(1, 1, 1), (0, 1, 1)])


def test_paired_bootstrap_mean_difference_and_p():
    from structattn.train.significance import paired_bootstrap_mean

    same = [1.0, 0.0, 0.5, 1.0]
    assert paired_bootstrap_mean(same, same, samples=100) == (0.0, 1.0)  # every resample ties: p capped at 1
    better = [1.0] * 50 + [0.0] * 50
    worse = [0.0] * 50 + [0.0] * 50
    delta, p = paired_bootstrap_mean(better, worse, samples=2000)
    assert delta == 0.5 and p == 0.0  # A never loses on any item: no resample favours B
    noisy_a = [1.0, 0.0] * 20
    noisy_b = [0.0, 1.0] * 20  # same mean, opposite items
    delta, p = paired_bootstrap_mean(noisy_a, noisy_b, samples=2000)
    assert delta == 0.0 and p == 1.0


def test_seed_pairs_average_the_difference_and_one_pair_is_the_plain_test():
    from structattn.train.significance import seed_paired_bootstrap_f1

    a1, b1 = [(4, 5, 5), (2, 5, 5)] * 20, [(3, 5, 5), (3, 5, 5)] * 20
    a2, b2 = [(5, 5, 5)] * 40, [(3, 5, 5)] * 40
    assert seed_paired_bootstrap_f1([(a1, b1)], samples=500) == paired_bootstrap_f1(a1, b1, samples=500)
    # seed 1: F1 60 vs 60 (Δ 0); seed 2: F1 100 vs 60 (Δ 40): the mean is 20, and every resample keeps seed 2's 40
    delta, p = seed_paired_bootstrap_f1([(a1, b1), (a2, b2)], samples=2000)
    assert delta == pytest.approx(20.0) and p < 0.001


def test_seed_pairs_of_different_lengths_are_refused():
    from structattn.train.significance import seed_paired_bootstrap_f1

    with pytest.raises(ValueError, match="equal"):
        seed_paired_bootstrap_f1([([(1, 1, 1)], [(1, 1, 1)]), ([(1, 1, 1)] * 2, [(1, 1, 1)] * 2)])
