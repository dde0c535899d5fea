"""Summary statistics over seeds, Welch's t-test against the baseline and Holm's correction over a family of tests."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import stats


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof=1; 0 for a single value)."""
    arr = np.asarray(values, dtype=float)
    return float(arr.mean()), float(arr.std(ddof=1)) if len(arr) > 1 else 0.0


def welch_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of Welch's unequal-variance t-test; NaN when either side has < 2 runs
    or both have zero variance."""
    if len(a) < 2 or len(b) < 2:
        return math.nan
    if np.std(a) == 0 and np.std(b) == 0:
        return math.nan
    return float(stats.ttest_ind(a, b, equal_var=False).pvalue)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given.

    With the m p-values sorted ascending, the i-th smallest (i = 1..m) becomes (m - i + 1) * p, kept
    non-decreasing along that order and capped at 1; rejecting where the adjusted p <= alpha keeps the
    chance of any false rejection in the family at most alpha. Leave undefined (NaN) p-values out."""
    if any(math.isnan(p) for p in pvalues):
        raise ValueError("holm: NaN p-value (leave undefined comparisons out of the family)")
    m = len(pvalues)
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda j: pvalues[j])):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def paired_bootstrap_f1(a: Sequence[tuple[int, int, int]], b: Sequence[tuple[int, int, int]],
                        samples: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """Paired bootstrap over sentences for the difference of two systems' corpus bracket F1 (Koehn 2004;
    the sentence-resampling test parsers are compared with, as in Bikel's comparator).

    a, b: per sentence of the same test set, (matched, gold brackets, test brackets) of system A and B.
    Returns (observed F1(A) - F1(B) in points, two-sided p): the share of resamples whose difference has the
    other sign or is 0, doubled and capped at 1 (the percentile test with the observed sign).
    """
    return seed_paired_bootstrap_f1([(a, b)], samples=samples, seed=seed)


def seed_paired_bootstrap_f1(pairs: Sequence[tuple[Sequence[tuple[int, int, int]], Sequence[tuple[int, int, int]]]],
                             samples: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """[`paired_bootstrap_f1`][structattn.train.significance.paired_bootstrap_f1] over several training seeds at once:
    the statistic is the mean over the ``(a, b)`` pairs (one per seed, all parsing the same sentences) of F1(A) - F1(B).
    Each resample draws one set of sentence indices and applies it to every pair, since the seeds parse the same
    sentences. With one pair it is exactly [`paired_bootstrap_f1`][structattn.train.significance.paired_bootstrap_f1].
    Returns (observed mean difference in points, two-sided p).
    """
    if not pairs:
        raise ValueError("a seed-paired bootstrap needs at least one (a, b) pair of parses")
    n = len(pairs[0][0])
    if not n or any(len(a) != n or len(b) != n for a, b in pairs):
        raise ValueError("paired bootstrap needs equal, non-empty lists of sentences "
                         f"({', '.join(f'{len(a)} vs {len(b)}' for a, b in pairs)})")

    def f1(m, g, t):
        r, p = m / np.maximum(g, 1e-12), m / np.maximum(t, 1e-12)
        return np.where(r + p > 0, 200 * r * p / np.maximum(r + p, 1e-12), 0.0)

    counts = [(np.asarray(a, dtype=float), np.asarray(b, dtype=float)) for a, b in pairs]
    observed = float(np.mean([f1(*A.sum(0)) - f1(*B.sum(0)) for A, B in counts]))
    idx = np.random.default_rng(seed).integers(0, n, size=(samples, n))
    diff = np.zeros(samples)
    for A, B in counts:
        sa, sb = A[idx].sum(1), B[idx].sum(1)  # [samples, 3] corpus counts per resample
        diff += f1(sa[:, 0], sa[:, 1], sa[:, 2]) - f1(sb[:, 0], sb[:, 1], sb[:, 2])
    diff /= len(counts)
    against = np.mean(diff <= 0) if observed > 0 else np.mean(diff >= 0)
    return observed, float(min(1.0, 2 * against))


def paired_bootstrap_mean(a: Sequence[float], b: Sequence[float], samples: int = 10_000,
                          seed: int = 0) -> tuple[float, float]:
    """Paired bootstrap over items (questions) for the difference of two systems' mean per-item score
    (e.g. SQuAD EM or F1 per question, in points).

    a, b: per item of the same test set, the score of system A and of system B.
    Returns (observed mean(A) - mean(B), two-sided p) with the percentile test of
    [`paired_bootstrap_f1`][structattn.train.significance.paired_bootstrap_f1] (share of resamples whose difference has
    the other sign or is 0, doubled, capped at 1).
    """
    if len(a) != len(b) or not len(a):
        raise ValueError(f"paired bootstrap needs two equal, non-empty lists of items ({len(a)} vs {len(b)})")
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    observed = float(d.mean())
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(samples, len(d)))].mean(1)
    against = np.mean(means <= 0) if observed > 0 else np.mean(means >= 0)
    return observed, float(min(1.0, 2 * against))
