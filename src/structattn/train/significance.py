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
