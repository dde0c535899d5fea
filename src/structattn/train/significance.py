"""Summary statistics over seeds and Welch's t-test against the baseline."""
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
