"""Every kernel against the plain reference (two softmaxes, explicit blend): forward, backward, padding,
fully padded rows, bf16 autocast, per-head gates, large-variance logits, dropout."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from structattn.attention import kernels as K

FAST = ["exact", "shared_exp", "fused", "official"]


def _inputs(b=3, h=4, n=11, m=None, d=8, gate_heads=1, seed=0, scale_qk=1.0, layout="bhnd"):
    """q, k, v [b, h, n|m, d] (as transposed views of [b, n, h, d] when layout='bnhd', like HF),
    local [b, 1, n, m], base [b, 1, n, m] (example 1 padded, example 2 fully padded), gate [b, G, n]."""
    m = n if m is None else m
    g = torch.Generator().manual_seed(seed)

    def rnd(rows, s=1.0):
        if layout == "bnhd":
            return (torch.randn(b, rows, h, d, generator=g) * s).transpose(1, 2)
        return torch.randn(b, h, rows, d, generator=g) * s

    q, k, v = rnd(n, scale_qk), rnd(m, scale_qk), rnd(m)
    local = torch.rand(b, 1, n, m, generator=g) < 0.3
    base = torch.ones(b, 1, n, m, dtype=torch.bool)
    base[1, :, :, m - 3:] = False
    if b > 2:
        base[2] = False
    gate = torch.rand(b, gate_heads, n, generator=g)
    return q, k, v, local, base, gate


def _real_rows(base):
    """[b, 1, n, 1] True where the query row has at least one key (others are padding garbage)."""
    return base.any(-1, keepdim=True)


def _grads(fn, q, k, v, local, gate, base, seed=1):
    q, k, v, gate = (t.detach().clone().requires_grad_() for t in (q, k, v, gate))
    out = fn(q, k, v, local, gate, base)
    w = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed))
    (out * w).sum().backward()
    return out.detach(), q.grad, k.grad, v.grad, gate.grad


def _ref(q, k, v, local, gate, base, **kw):
    return K.reference_mixed_attention(q, k, v, local, gate, base, **kw)[0]


@pytest.mark.parametrize("kernel", FAST)
@pytest.mark.parametrize("gate_heads", [1, 4])
@pytest.mark.parametrize("layout", ["bhnd", "bnhd"])
def test_kernel_matches_reference_forward_and_backward(kernel, gate_heads, layout):
    q, k, v, local, base, gate = _inputs(gate_heads=gate_heads, layout=layout)
    fn = K.KERNELS[kernel]
    got = _grads(fn, q, k, v, local, gate, base)
    want = _grads(_ref, q, k, v, local, gate, base)
    real = _real_rows(base)
    assert torch.allclose(got[0] * real, want[0] * real, atol=1e-5, rtol=1e-4)
    for a, b_ in zip(got[1:], want[1:]):
        assert torch.isfinite(a).all()
        assert torch.allclose(a, b_, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("kernel", FAST + ["reference"])
def test_fully_padded_rows_give_zero_and_no_nan(kernel):
    q, k, v, local, base, gate = _inputs()
    fn = K.KERNELS[kernel]
    out, dq, dk, dv, dg = _grads(fn, q, k, v, local, gate, base)
    for t in (out, dq, dk, dv, dg):
        assert torch.isfinite(t).all()
    assert torch.all(out[2] == 0)       # example 2 has no key at all, like SDPA
    assert torch.all(dq[2] == 0) and torch.all(dg[2] == 0)


@pytest.mark.parametrize("kernel", FAST + ["reference"])
def test_no_base_mask_and_cross_lengths(kernel):
    q, k, v, local, _, gate = _inputs(n=7, m=13)
    got = _grads(K.KERNELS[kernel], q, k, v, local, gate, None)
    want = _grads(_ref, q, k, v, local, gate, None)
    for a, b_ in zip(got, want):
        assert torch.allclose(a, b_, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("kernel", FAST)
def test_all_true_local_mask_is_global_attention(kernel):
    q, k, v, _, base, gate = _inputs()
    local = torch.ones_like(base)
    out = K.KERNELS[kernel](q, k, v, local, gate, base)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=base)
    real = _real_rows(base)
    assert torch.allclose(out * real, want * real, atol=1e-6)
    if kernel == "exact":  # the same kernel on the same mask: bit for bit
        assert torch.equal(out, want)


@pytest.mark.parametrize("kernel", FAST)
def test_gate_zero_is_global_and_gate_one_is_local(kernel):
    q, k, v, local, base, gate = _inputs()
    fn = K.KERNELS[kernel]
    out0 = fn(q, k, v, local, torch.zeros_like(gate), base)
    want0 = F.scaled_dot_product_attention(q, k, v, attn_mask=base)
    if kernel == "exact":
        assert torch.equal(out0, want0)
    real = _real_rows(base)
    assert torch.allclose(out0 * real, want0 * real, atol=1e-6)
    out1 = fn(q, k, v, local, torch.ones_like(gate), base)
    want1 = F.scaled_dot_product_attention(q, k, v, attn_mask=K.local_pattern(local, base))
    assert torch.allclose(out1 * real, want1 * real, atol=1e-6)


def test_empty_local_row_falls_back_to_base_row():
    q, k, v, _, base, gate = _inputs()
    local = torch.zeros_like(base)
    pattern = K.local_pattern(local, base)
    assert torch.equal(pattern, base)
    for kernel in FAST:
        out = K.KERNELS[kernel](q, k, v, local, gate, base)
        want = F.scaled_dot_product_attention(q, k, v, attn_mask=base)
        assert torch.allclose(out * _real_rows(base), want * _real_rows(base), atol=1e-6)


@pytest.mark.parametrize("kernel", FAST)
def test_bf16_autocast_no_nan(kernel):
    q, k, v, local, base, gate = _inputs()
    qb, kb, vb = (t.to(torch.bfloat16).requires_grad_() for t in (q, k, v))
    gb = gate.to(torch.bfloat16).requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = K.KERNELS[kernel](qb, kb, vb, local, gb, base)
    assert out.dtype == torch.bfloat16
    out.float().sum().backward()
    for t in (out, qb.grad, kb.grad, vb.grad, gb.grad):
        assert torch.isfinite(t.float()).all()
    want = _ref(q, k, v, local, gate, base)
    real = _real_rows(base)
    assert torch.allclose(out.float() * real, want * real, atol=0.05, rtol=0.05)


@pytest.mark.parametrize("kernel", ["shared_exp", "fused"])
def test_large_variance_logits_underflow_guard(kernel):
    # Scores spread over hundreds: for many rows the local maximum lies > 87 below the global one, where
    # exp(s - global max) of every local key underflows in float32.
    q, k, v, local, base, gate = _inputs(n=24, d=16, scale_qk=12.0, seed=3)
    s = (q @ k.transpose(-1, -2)) * 16 ** -0.5
    loc = K.local_pattern(local, base)
    gap = s.masked_fill(~base, -float("inf")).amax(-1) - s.masked_fill(~loc, -float("inf")).amax(-1)
    assert (gap[base.any(-1).expand_as(gap)] > 87).any()
    got = _grads(K.KERNELS[kernel], q, k, v, local, gate, base)
    want = _grads(_ref, q, k, v, local, gate, base)
    real = _real_rows(base)
    assert torch.allclose(got[0] * real, want[0] * real, atol=1e-4, rtol=1e-4)
    for a, b_ in zip(got[1:], want[1:]):
        assert torch.isfinite(a).all()
        assert torch.allclose(a, b_, atol=1e-3, rtol=1e-3)


def test_shared_exp_branch_free_matches():
    q, k, v, local, base, gate = _inputs(scale_qk=12.0, seed=4)
    a = K.shared_exp_mixed_attention(q, k, v, local, gate, base)
    b = K.shared_exp_mixed_attention(q, k, v, local, gate, base, branch_free=True)
    assert torch.allclose(a, b, atol=1e-6)


def test_fused_dropout_matches_reference_with_same_keep_mask():
    if not K.fused_available():
        pytest.skip("native kernel not buildable here")
    q, k, v, local, base, gate = _inputs()
    p, seed = 0.25, 1234
    keep = K.dropout_keep_mask(*q.shape[:3], k.shape[2], p, seed)
    assert 0.6 < keep.float().mean() < 0.9
    got = _grads(lambda *a: K.fused_mixed_attention(*a, dropout_p=p, seed=seed), q, k, v, local, gate, base)
    want = _grads(lambda *a: _ref(*a, dropout_p=p, keep=keep), q, k, v, local, gate, base)
    real = _real_rows(base)
    assert torch.allclose(got[0] * real, want[0] * real, atol=1e-5)
    for a, b_ in zip(got[1:], want[1:]):
        assert torch.allclose(a, b_, atol=1e-4)


def test_exact_kernel_with_dropout_runs_and_is_finite():
    q, k, v, local, base, gate = _inputs()
    out = K.two_pass_mixed_attention(q, k, v, local, gate, base, dropout_p=0.3)
    assert torch.isfinite(out).all()


def test_gradcheck_fused_double_precision_free():
    # The fused kernel is float32 only; check it against finite differences of the float64 reference.
    if not K.fused_available():
        pytest.skip("native kernel not buildable here")
    q, k, v, local, base, gate = _inputs(b=2, h=2, n=5, d=4)
    got = _grads(K.fused_mixed_attention, q, k, v, local, gate, base)
    want = _grads(_ref, *(t.double() for t in (q, k, v)), local, gate.double(), base)
    for a, b_ in zip(got, want):
        assert torch.allclose(a.double(), b_, atol=1e-5)


def test_unknown_kernel_lists_valid_ones():
    from structattn.errors import UserError

    with pytest.raises(UserError, match="valid kernels"):
        K.resolve_kernel_name("nope")


@settings(max_examples=15, deadline=None)
@given(b=st.integers(1, 3), h=st.integers(1, 3), n=st.integers(1, 9), m=st.integers(1, 9), d=st.integers(1, 6),
       seed=st.integers(0, 1000), head_gate=st.booleans())
def test_fused_and_shared_exp_agree_with_reference_on_random_shapes(b, h, n, m, d, seed, head_gate):
    g = torch.Generator().manual_seed(seed)
    q, k, v = torch.randn(b, h, n, d, generator=g), torch.randn(b, h, m, d, generator=g), torch.randn(b, h, m, d, generator=g)
    local = torch.rand(b, 1, n, m, generator=g) < 0.4
    base = torch.rand(b, 1, n, m, generator=g) < 0.8
    gate = torch.rand(b, h if head_gate else 1, n, generator=g)
    want = _ref(q, k, v, local, gate, base)
    for kernel in FAST:
        got = K.KERNELS[kernel](q, k, v, local, gate, base)
        assert torch.isfinite(got).all()
        assert torch.allclose(got, want, atol=1e-5), kernel


@pytest.mark.slow
def test_compiled_shared_exp_matches_reference():
    q, k, v, local, base, gate = _inputs(b=2, h=2, n=8, d=4)
    got = _grads(K.compiled_shared_exp_mixed_attention, q, k, v, local, gate, base)
    want = _grads(_ref, q, k, v, local, gate, base)
    real = _real_rows(base)
    assert torch.allclose(got[0] * real, want[0] * real, atol=1e-5)
    for a, b_ in zip(got[1:], want[1:]):
        assert torch.allclose(a, b_, atol=1e-4)


def test_fused_long_sequences_use_several_row_blocks():
    # more than 256 query rows: the native kernel processes them in blocks and accumulates dK, dV
    if not K.fused_available():
        pytest.skip("native kernel not buildable here")
    q, k, v, local, base, gate = _inputs(b=2, h=2, n=300, m=290, d=8, layout="bnhd")
    got = _grads(K.fused_mixed_attention, q, k, v, local, gate, base)
    want = _grads(_ref, q, k, v, local, gate, base)
    for a, b_ in zip(got, want):
        assert torch.allclose(a, b_, atol=1e-4, rtol=1e-4)
