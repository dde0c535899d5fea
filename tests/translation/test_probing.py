"""The MLP probe: learns a separable task, stays near the majority class on noise."""
from __future__ import annotations

import numpy as np

from structattn.translation.probing import train_probe


def _data(n, seed, informative=True):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, size=n)
    x = rng.normal(size=(n, 8)).astype(np.float32)
    if informative:
        x[:, 0] += 4 * y
    return x, [str(v) for v in y]


def test_a_separable_task_is_learned():
    (xt, yt), (xd, yd), (xs, ys) = _data(600, 0), _data(200, 1), _data(200, 2)
    result = train_probe(xt, yt, xd, yd, xs, ys, ["0", "1", "2"], seed=0)
    assert result["test_accuracy"] > 90 and result["best_epoch"] >= 1


def test_noise_stays_near_chance():
    (xt, yt), (xd, yd), (xs, ys) = (_data(n, s, informative=False) for n, s in ((600, 0), (200, 1), (200, 2)))
    result = train_probe(xt, yt, xd, yd, xs, ys, ["0", "1", "2"], seed=0)
    assert result["test_accuracy"] < 50
