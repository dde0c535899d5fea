"""The additive-bias kernel (Gaussian locality baselines) against its plain twin and against a loop oracle."""
from __future__ import annotations

import math

import pytest
import torch

from structattn.attention.biased import biased_attention, reference_biased_attention


def _inputs(b=2, h=3, n=5, m=6, d=4, dtype=torch.float32, seed=0, per_head_bias=True):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(b, h, x, d, generator=g, dtype=dtype) for x in (n, m, m))
    bias = torch.randn(b, h if per_head_bias else 1, n, m, generator=g, dtype=dtype)
    base = torch.ones(b, 1, n, m, dtype=torch.bool)
    base[1, :, :, m - 2:] = False  # example 1: last two keys are padding
    return q, k, v, bias, base


def _loop_oracle(q, k, v, bias, base):
    """softmax(q k / sqrt d + bias) v written out row by row in float64 (independent of the code under test)."""
    b, h, n, d = q.shape
    out = torch.zeros(b, h, n, d, dtype=torch.float64)
    for bi in range(b):
        for hi in range(h):
            for i in range(n):
                weights = []
                for j in range(k.shape[2]):
                    if base[bi, 0, i, j]:
                        s = float(q[bi, hi, i] @ k[bi, hi, j]) / math.sqrt(d)
                        weights.append((j, math.exp(s + float(bias[bi, hi % bias.shape[1], i, j]))))
                total = sum(w for _, w in weights)
                for j, w in weights:
                    out[bi, hi, i] += (w / total) * v[bi, hi, j].double()
    return out


@pytest.mark.parametrize("per_head", [True, False])
def test_reference_matches_loop_oracle(per_head):
    q, k, v, bias, base = _inputs(per_head_bias=per_head, dtype=torch.float64)
    out, probs = reference_biased_attention(q, k, v, bias, base)
    torch.testing.assert_close(out, _loop_oracle(q, k, v, bias, base))
    assert torch.all(probs[1, :, :, -2:] == 0)
    torch.testing.assert_close(probs.sum(-1), torch.ones_like(probs.sum(-1)))


@pytest.mark.parametrize("per_head", [True, False])
def test_fast_matches_reference_forward_and_backward(per_head):
    q, k, v, bias, base = _inputs(per_head_bias=per_head)
    leaves = [t.clone().requires_grad_() for t in (q, k, v, bias)]
    fast = biased_attention(*leaves, base)
    ref_leaves = [t.clone().requires_grad_() for t in (q, k, v, bias)]
    ref = reference_biased_attention(*ref_leaves, base)[0]
    torch.testing.assert_close(fast, ref, atol=1e-5, rtol=1e-5)
    dout = torch.randn_like(fast)
    fast.backward(dout)
    ref.backward(dout)
    for a, b_ in zip(leaves, ref_leaves):
        torch.testing.assert_close(a.grad, b_.grad, atol=1e-5, rtol=1e-5)


def test_gradcheck_float64():
    q, k, v, bias, base = _inputs(n=3, m=4, d=2, h=2, dtype=torch.float64)
    leaves = tuple(t.clone().requires_grad_() for t in (q, k, v, bias))
    assert torch.autograd.gradcheck(lambda *x: biased_attention(*x, base), leaves)


def test_zero_bias_is_stock_sdpa():
    q, k, v, _, base = _inputs()
    out = biased_attention(q, k, v, torch.zeros(1, 1, 5, 6), base)
    stock = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=base)
    torch.testing.assert_close(out, stock)


def test_fully_padded_row_gives_zero_not_nan():
    q, k, v, bias, base = _inputs()
    base[0, :, 2] = False  # query row 2 of example 0 sees no key
    out = biased_attention(q, k, v, bias, base)
    ref = reference_biased_attention(q, k, v, bias, base)[0]
    assert torch.isfinite(out).all()
    assert torch.all(out[0, :, 2] == 0)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


def test_without_base_mask_and_large_negative_bias():
    q, k, v, bias, _ = _inputs()
    bias = bias * 1e4  # very peaked Gaussian: finite, must not overflow into NaN
    out = biased_attention(q, k, v, bias)
    ref = reference_biased_attention(q, k, v, bias)[0]
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)
