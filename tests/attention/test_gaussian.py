"""Gaussian locality biases against the formulas written out per element (brute force)."""
from __future__ import annotations

import math

import pytest
import torch

from structattn.attention.gaussian import MIN_VARIANCE, GaussianLocality


def _oracle(module: GaussianLocality, query: torch.Tensor, lengths: torch.Tensor, m: int) -> torch.Tensor:
    """G_ij = -(j - P_i)^2 / (2 (D_i / 2)^2), each term computed from the parameters with Python floats."""
    b, h, n, d = query.shape
    W = module.proj.weight.detach().double()
    out = torch.zeros(b, h, n, m, dtype=torch.float64)
    sig = lambda x: 1.0 / (1.0 + math.exp(-x))  # noqa: E731
    for bi in range(b):
        for hi in range(h):
            for i in range(n):
                hidden = torch.tanh(W @ query[bi, hi, i].double())  # [d]
                size = float(lengths[bi, 0, i])
                centre = size * sig(float(hidden @ module.centre.detach().double())) if module.centre is not None else i
                width = size * sig(float(hidden @ module.width.detach().double())) if module.width is not None else module.window
                var = max((width / 2) ** 2, MIN_VARIANCE)
                for j in range(m):
                    out[bi, hi, i, j] = -((j - centre) ** 2) / (2 * var)
    return out


@pytest.mark.parametrize("kind", ["luong", "sperber", "yang"])
def test_bias_matches_formula(kind):
    torch.manual_seed(0)
    module = GaussianLocality(kind, head_dim=4, window=3.0, init_std=0.5).double()
    query = torch.randn(2, 3, 5, 4, dtype=torch.float64)
    lengths = torch.tensor([5.0, 3.0], dtype=torch.float64).view(2, 1, 1).expand(2, 1, 5)
    bias = module(query, 6, lengths)
    assert bias.shape == (2, 3, 5, 6)
    torch.testing.assert_close(bias, _oracle(module, query, lengths, 6))


def test_parameter_sets_per_kind():
    sizes = {k: sum(p.numel() for p in GaussianLocality(k, head_dim=8).parameters()) for k in ("luong", "sperber", "yang")}
    assert sizes == {"luong": 64 + 8, "sperber": 64 + 8, "yang": 64 + 16}


def test_sperber_is_centred_on_the_query():
    module = GaussianLocality("sperber", head_dim=4)
    bias = module(torch.randn(1, 2, 6, 4), 6)
    # the maximum of each row (0) is at the query's own position
    assert torch.equal(bias.argmax(-1), torch.arange(6).expand(1, 2, 6))
    assert torch.all(bias.amax(-1) == 0)


def test_collapsed_width_stays_finite_and_gradients_flow():
    module = GaussianLocality("yang", head_dim=4)
    with torch.no_grad():
        module.width.fill_(-1e4)  # sigmoid -> 0: D -> 0
    query = torch.randn(1, 1, 3, 4, requires_grad=True)
    bias = module(query, 3)
    assert torch.isfinite(bias).all()
    bias.sum().backward()
    assert torch.isfinite(query.grad).all()
