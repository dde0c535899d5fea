"""Every kernel against the plain reference (two softmaxes, explicit blend): forward, backward, padding,
fully padded rows, bf16 autocast, per-head gates, large-variance logits, dropout semantics, float64 gradcheck;
the public registry; the native build's lock handling."""
from __future__ import annotations

import fcntl
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from attn_helpers import kernel_grads, kernel_inputs, require_fused
from hypothesis import given, settings
from hypothesis import strategies as st

from structattn.attention import kernels as K

FAST = ["exact", "shared_exp", "fused"]
WITH_BACKWARD = ["reference", "exact", "shared_exp", "fused"]
REPO = Path(__file__).resolve().parents[2]


def _benchmark_module():
    """benchmarks/attention.py, which holds the benchmark-only kernels (official, shared_exp_compiled)."""
    spec = importlib.util.spec_from_file_location("bench_attention", REPO / "benchmarks" / "attention.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BENCH = _benchmark_module()


_inputs = kernel_inputs


def _real_rows(base):
    """[b, 1, n, 1] True where the query row has at least one key (others are padding garbage)."""
    return base.any(-1, keepdim=True)


_grads = kernel_grads


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


def _any_kernel(name):
    """A library kernel, or a benchmark-only one (official, shared_exp_compiled)."""
    return K.KERNELS.get(name) or BENCH.BENCHMARK_KERNELS[name]


@pytest.mark.parametrize("kernel", ["official"])
def test_benchmark_official_kernel_matches_reference(kernel):
    q, k, v, local, base, gate = _inputs()
    got = _grads(_any_kernel(kernel), q, k, v, local, gate, base)
    want = _grads(_ref, q, k, v, local, gate, base)
    real = _real_rows(base)
    assert torch.allclose(got[0] * real, want[0] * real, atol=1e-5, rtol=1e-4)
    for a, b_ in zip(got[1:], want[1:]):
        assert torch.allclose(a, b_, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("kernel", FAST + ["reference", "official"])
def test_fully_padded_rows_give_zero_and_no_nan(kernel):
    q, k, v, local, base, gate = _inputs()
    fn = _any_kernel(kernel)
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


@pytest.mark.parametrize("kernel", FAST)
def test_empty_local_row_falls_back_to_base_row(kernel):
    q, k, v, _, base, gate = _inputs()
    local = torch.zeros_like(base)
    pattern = K.local_pattern(local, base)
    assert torch.equal(pattern, base)
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
    require_fused()
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


def _identity_values(b, h, m):
    """v [b, h, m, m] = identity per (batch, head): out = (dropped P) v is the dropped P itself."""
    return torch.eye(m).expand(b, h, m, m).clone()


@pytest.mark.parametrize("kernel", WITH_BACKWARD)
def test_dropout_draws_one_mask_on_the_mixed_probabilities(kernel):
    # With one-hot values the output is the dropped probability matrix. One mask on P = (1-g) P_glb + g P_loc
    # gives entries 0 or P / (1 - p); two independent masks (one per distribution) would also give
    # (1-g) P_glb / (1 - p) or g P_loc / (1 - p) wherever exactly one of them drops.
    b, h, n, m, p = 3, 2, 10, 9, 0.4
    q, k, _, local, base, gate = _inputs(b=b, h=h, n=n, m=m, d=m, seed=5)
    local |= torch.eye(n, m, dtype=torch.bool)  # local keys on every row, so P_loc and P_glb overlap
    gate = 0.2 + 0.6 * gate  # strictly inside (0, 1): both distributions contribute
    v = _identity_values(b, h, m)
    torch.manual_seed(11)
    out = K.KERNELS[kernel](q, k, v, local, gate, base, dropout_p=p)
    probs = K.reference_mixed_attention(q, k, v, local, gate, base)[1]
    kept = torch.isclose(out, probs / (1 - p), rtol=1e-5, atol=1e-7)
    dropped = out == 0
    assert bool((kept | dropped).all()), f"{int((~(kept | dropped)).sum())} entries are neither 0 nor P / (1 - p)"
    positive = probs > 1e-3
    share_dropped = (dropped & positive).sum() / positive.sum()
    assert 0.25 < float(share_dropped) < 0.55  # dropout happened, at about the rate p


@pytest.mark.parametrize("kernel", ["exact"])
def test_exact_without_dropout_keeps_the_two_stock_passes(kernel):
    # dropout 0: still two SDPA passes mixed on the outputs, so g = 0 is the stock output bit for bit
    q, k, v, local, base, gate = _inputs()
    out = K.KERNELS[kernel](q, k, v, local, torch.zeros_like(gate), base, dropout_p=0.0)
    assert torch.equal(out, F.scaled_dot_product_attention(q, k, v, attn_mask=base))


def _seeded(fn, seed):
    """fn with torch's generator reset to ``seed`` on every call (gradcheck calls it many times, and a
    dropout mask must not change between those calls); the caller's generator state is kept."""
    def call(*args):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return fn(*args)
    return call


@pytest.mark.parametrize("kernel", WITH_BACKWARD)
@pytest.mark.parametrize("gate_heads", [1, 2])
@pytest.mark.parametrize("dropout_p", [0.0, 0.3])
def test_gradcheck_float64(kernel, gate_heads, dropout_p):
    # torch.autograd.gradcheck: analytic gradients (q, k, v, gate) against finite differences, in float64.
    # For fused this runs the native kernel's float64 instantiation (the same code as float32).
    q, k, v, local, base, gate = _inputs(b=3, h=2, n=4, m=5, d=3, gate_heads=gate_heads, seed=2)
    args = tuple(t.double().requires_grad_() for t in (q, k, v, gate))
    fn = _seeded(lambda q_, k_, v_, g_: K.KERNELS[kernel](q_, k_, v_, local, g_, base, dropout_p=dropout_p), 3)
    assert fn(*args).dtype == torch.float64
    assert torch.autograd.gradcheck(fn, args, eps=1e-6, atol=1e-7, rtol=1e-5)


def test_fused_float64_runs_in_float64():
    # the float32 kernel would be off by ~1e-7; the float64 one agrees with the float64 reference to ~1e-14
    require_fused()
    q, k, v, local, base, gate = (t.double() if t.is_floating_point() else t for t in _inputs(scale_qk=3.0))
    out = K.fused_mixed_attention(q, k, v, local, gate, base)
    want = _ref(q, k, v, local, gate, base)
    assert out.dtype == torch.float64
    assert torch.allclose(out, want, atol=1e-12, rtol=0)


def test_unknown_kernel_lists_valid_ones():
    from structattn.errors import UserError

    with pytest.raises(UserError, match="valid kernels"):
        K.resolve_kernel_name("nope")


@pytest.mark.parametrize("kernel", FAST)
@settings(max_examples=15, deadline=None)
@given(b=st.integers(1, 3), h=st.integers(1, 3), n=st.integers(1, 9), m=st.integers(1, 9), d=st.integers(1, 6),
       seed=st.integers(0, 1000), head_gate=st.booleans())
def test_fast_kernels_agree_with_reference_on_random_shapes(kernel, b, h, n, m, d, seed, head_gate):
    g = torch.Generator().manual_seed(seed)
    q, k, v = torch.randn(b, h, n, d, generator=g), torch.randn(b, h, m, d, generator=g), torch.randn(b, h, m, d, generator=g)
    local = torch.rand(b, 1, n, m, generator=g) < 0.4
    base = torch.rand(b, 1, n, m, generator=g) < 0.8
    gate = torch.rand(b, h if head_gate else 1, n, generator=g)
    want = _ref(q, k, v, local, gate, base)
    got = K.KERNELS[kernel](q, k, v, local, gate, base)
    assert torch.isfinite(got).all()
    assert torch.allclose(got, want, atol=1e-5)


@pytest.mark.slow
def test_benchmark_compiled_shared_exp_matches_reference():
    q, k, v, local, base, gate = _inputs(b=2, h=2, n=8, d=4)
    got = _grads(BENCH.compiled_shared_exp_mixed_attention, q, k, v, local, gate, base)
    want = _grads(_ref, q, k, v, local, gate, base)
    real = _real_rows(base)
    assert torch.allclose(got[0] * real, want[0] * real, atol=1e-5)
    for a, b_ in zip(got[1:], want[1:]):
        assert torch.allclose(a, b_, atol=1e-4)


def test_fused_long_sequences_use_several_row_blocks():
    # more than 256 query rows: the native kernel processes them in blocks and accumulates dK, dV
    require_fused()
    q, k, v, local, base, gate = _inputs(b=2, h=2, n=300, m=290, d=8, layout="bnhd")
    got = _grads(K.fused_mixed_attention, q, k, v, local, gate, base)
    want = _grads(_ref, q, k, v, local, gate, base)
    for a, b_ in zip(got, want):
        assert torch.allclose(a, b_, atol=1e-4, rtol=1e-4)


# ---------------------------------------------------------------------------------------------- registry


def test_public_registry_holds_the_kernels_a_model_should_run():
    from structattn.attention import mechanisms
    from structattn.errors import UserError

    assert set(K.KERNELS) == {"reference", "exact", "shared_exp", "fused", "flex", "triton"}
    assert K.KERNEL_NAMES == ("auto", *K.KERNELS)
    for name in BENCH.BENCHMARK_KERNELS:  # benchmark-only: never valid in a configuration
        with pytest.raises(UserError, match="valid kernels"):
            mechanisms.MechanismConfig(kernel=name)


def test_benchmark_kernel_runs_inside_a_model():
    import copy

    from attn_helpers import random_batch, tiny_model

    from structattn.train.provenance import kernels_used

    ids, att, mask = random_batch()
    stock = tiny_model()
    models = {}
    for kernel in ("official", "reference"):
        torch.manual_seed(1)  # the same gate weights in both
        models[kernel] = copy.deepcopy(stock)
        BENCH.apply_variant(models[kernel], "sla", kernel)
    got, want = (models[n](input_ids=ids, attention_mask=att, structure_mask=mask).last_hidden_state
                 for n in ("official", "reference"))
    real = att.bool()[..., None]
    assert torch.allclose(got * real, want * real, atol=1e-5)
    assert kernels_used(models["official"]) == ["official"]


def test_naming_an_unavailable_fused_kernel_is_a_user_error():
    kernel = "fused"
    code = ("import torch\n"
            "from structattn.attention import kernels\n"
            "from structattn.errors import UserError\n"
            "q = torch.randn(1, 1, 3, 2)\n"
            "assert kernels.resolve_kernel_name('auto') == 'exact'\n"
            "try:\n"
            f"    kernels.get_kernel({kernel!r})(q, q, q, torch.ones(1, 1, 3, 3, dtype=torch.bool), torch.rand(1, 1, 3))\n"
            "except UserError as exc:\n"
            "    print('USERERROR', exc)\n")
    res = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, STRUCTATTN_NO_NATIVE="1"),
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "USERERROR kernel 'fused' is not available here (disabled by STRUCTATTN_NO_NATIVE=1)" in res.stdout


# ---------------------------------------------------------------------------------------------- native build lock

# In a subprocess: load the native kernel, say whether it loaded (or why not) and what 'auto' resolves to.
_LOAD = ("import warnings\n"
         "warnings.simplefilter('always')\n"
         "from structattn.attention import kernels, native\n"
         "print('LOADED' if native.load() is not None else 'FAILED: ' + str(native.failure()))\n"
         "print('AUTO=' + kernels.resolve_kernel_name('auto'))\n")


def _load_in_subprocess(extensions_dir: Path, timeout: float, **env):
    """Run _LOAD with its own TORCH_EXTENSIONS_DIR (the native kernel enabled); raise on time-out."""
    full = dict(os.environ, TORCH_EXTENSIONS_DIR=str(extensions_dir), **env)
    full.pop("STRUCTATTN_NO_NATIVE", None)
    full.pop("STRUCTATTN_KERNEL_DIR", None)  # this test's extensions_dir is the cache the build goes to
    return subprocess.run([sys.executable, "-c", _LOAD], env=full, capture_output=True, text=True, timeout=timeout)


def _build_dir(extensions_dir: Path) -> Path:
    from structattn.attention import native

    path = extensions_dir / native._build_name()  # where torch builds a named extension under TORCH_EXTENSIONS_DIR
    path.mkdir(parents=True)
    return path


def test_native_load_falls_back_when_the_build_lock_stays_taken(tmp_path):
    # another process holds our build lock (it is building): after the time-out, fall back naming the file
    lock = Path(str(_build_dir(tmp_path)) + ".structattn-lock")
    with open(lock, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        res = _load_in_subprocess(tmp_path, timeout=300, STRUCTATTN_NATIVE_LOCK_TIMEOUT="1")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("FAILED: ") and str(lock) in res.stdout
    assert "AUTO=exact" in res.stdout
    assert "RuntimeWarning" in res.stderr and str(lock) in res.stderr


@pytest.mark.slow
def test_native_build_removes_a_stale_torch_lock_and_is_announced_once(tmp_path):
    # A build killed halfway leaves torch's FileBaton `lock` in the build folder; torch would wait on it forever.
    if os.environ.get("STRUCTATTN_NO_NATIVE") == "1":
        pytest.skip("native kernel disabled by STRUCTATTN_NO_NATIVE=1")
    if shutil.which(os.environ.get("CXX", "c++")) is None:
        pytest.skip("no C++ compiler to build the native kernel")
    stale = _build_dir(tmp_path) / "lock"
    stale.touch()
    try:
        res = _load_in_subprocess(tmp_path, timeout=540)  # compiles the kernel once in tmp_path (about a minute)
    except subprocess.TimeoutExpired:
        pytest.fail(f"loading the native kernel still waits on the stale {stale}")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("LOADED"), res.stdout + res.stderr
    assert not stale.exists()
    assert "removed the stale build lock" in res.stderr
    assert "building the fused CPU attention kernel in " + str(stale.parent) in res.stderr  # announced before it
    again = _load_in_subprocess(tmp_path, timeout=300)  # the same installation: loaded, not built again
    assert again.stdout.startswith("LOADED") and "building the fused" not in again.stderr, again.stderr
