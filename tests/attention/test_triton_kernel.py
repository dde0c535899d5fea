"""The fused Triton kernel (``triton``) on CPU tensors under Triton's interpreter, against the plain reference:
forward and gradients with padding, fully padded rows, empty local rows, per-head masks and gates, cross
lengths not a multiple of the tile, head sizes 32 and 64, no base mask, bfloat16 / float16, the underflow
guard, float64; all-True local mask = global attention and gate 0 = SDPA; dropout (the fused kernel's mask,
one mask on the mixed probabilities, its rate); torch.compile; inside a model; errors a user can cause;
``auto`` on CUDA (the resolution logic and the first-use self-check).

Skipped, with the reason, when the optional ``triton`` package is not installed (``pip install -e ".[gpu]"``).
tests/conftest.py sets TRITON_INTERPRET=1 before triton is imported. Shapes are tiny and tiles 16 x 16: the
interpreter runs every program in Python. On a GPU machine the same tests run the compiled kernel on CUDA
tensors: ``TRITON_INTERPRET=0 pytest tests/attention/test_triton_kernel.py`` (``DEVICE`` below; the tests that
are about the interpreter or the CPU are skipped there).
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from attn_helpers import kernel_grads, kernel_inputs, random_batch, require_fused, tiny_model

from structattn.attention import kernels as K
from structattn.attention import triton_kernel as TK
from structattn.errors import UserError

pytest.importorskip("triton", reason="the optional triton package is not installed (pip install -e '.[gpu]')")
# Where the kernel runs: CPU tensors under the interpreter, else (TRITON_INTERPRET=0 on a GPU machine) CUDA tensors.
DEVICE = "cpu" if TK.interpreted() else "cuda" if torch.cuda.is_available() else None
if DEVICE is None:
    pytest.skip("triton was imported without TRITON_INTERPRET=1 (tests/conftest.py sets it unless it is set "
                "otherwise) and there is no GPU: the kernel cannot run here", allow_module_level=True)
on_cpu_only = pytest.mark.skipif(DEVICE != "cpu", reason="about the CPU or the interpreter; this run is on CUDA")

TILE = dict(block_m=16, block_n=16)


def _triton(*args, **kw):
    return K.triton_mixed_attention(*args, **TILE, **kw)


def _ref(q, k, v, local, gate, base, **kw):
    return K.reference_mixed_attention(q, k, v, local, gate, base, **kw)[0]


def _inputs(b=3, h=2, **kw):
    """:func:`attn_helpers.kernel_inputs` with 2 heads and an empty local row (example 0, query 2)."""
    q, k, v, local, base, gate = kernel_inputs(b=b, h=h, **kw)
    local[0, :, min(2, local.shape[2] - 1)] = False
    return tuple(t.to(DEVICE) for t in (q, k, v, local, base, gate))


def _assert_close(got, want, atol=1e-5, rtol=1e-4):
    for name, a, w in zip(("out", "dq", "dk", "dv", "dgate"), got, want):
        assert a.dtype == w.dtype, name
        assert torch.isfinite(a).all(), name
        assert torch.allclose(a, w, atol=atol, rtol=rtol), f"{name}: max diff {float((a - w).abs().max()):.3g}"


@pytest.mark.parametrize("gate_heads,mask_heads,layout", [(1, 1, "bhnd"), (2, 1, "bnhd"), (2, 2, "bhnd")])
def test_matches_reference_with_padding_and_per_head_masks_and_gates(gate_heads, mask_heads, layout):
    q, k, v, local, base, gate = _inputs(gate_heads=gate_heads, mask_heads=mask_heads, layout=layout)
    if mask_heads > 1:   # a per-head base mask too: head 1 of example 0 loses its last keys
        base = base.expand(-1, 2, -1, -1).clone()
        base[0, 1, :, -4:] = False
    got = kernel_grads(_triton, q, k, v, local, gate, base)
    _assert_close(got, kernel_grads(_ref, q, k, v, local, gate, base))
    out, dq, _, _, dg = got
    assert torch.all(out[2] == 0) and torch.all(dq[2] == 0) and torch.all(dg[2] == 0)  # fully padded: 0, as SDPA


@pytest.mark.parametrize("d,n,m", [(32, 37, 21), (64, 18, 33)])
def test_lengths_not_a_multiple_of_the_tile_and_head_sizes(d, n, m):
    q, k, v, local, base, gate = _inputs(b=2, n=n, m=m, d=d, gate_heads=2, seed=1)
    _assert_close(kernel_grads(_triton, q, k, v, local, gate, base),
                  kernel_grads(_ref, q, k, v, local, gate, base), atol=1e-4)


def test_no_base_mask_and_empty_local_rows_use_the_base_row():
    q, k, v, local, base, gate = _inputs(b=2, n=9, m=13, seed=2)
    local[1, :, 3:6] = False                 # whole rows without a local key
    local[1, :, 7] = False
    local[1, :, 7, -2:] = True               # local keys only where example 1 is padded: local AND base is empty
    assert not (local & base)[1, 0, 7].any()
    for mask in (None, base):
        _assert_close(kernel_grads(_triton, q, k, v, local, gate, mask), kernel_grads(_ref, q, k, v, local, gate, mask))


def test_all_true_local_mask_is_global_attention_and_gate_zero_is_sdpa():
    q, k, v, local, base, gate = _inputs(b=2, n=12)

    def sdpa(q_, k_, v_, local_, gate_, base_):
        return F.scaled_dot_product_attention(q_, k_, v_, attn_mask=base_) + 0 * gate_.sum()

    want = kernel_grads(sdpa, q, k, v, local, gate, base)
    all_true = kernel_grads(_triton, q, k, v, torch.ones_like(local), gate, base)
    gate_zero = kernel_grads(_triton, q, k, v, local, torch.zeros_like(gate), base)
    for got in (all_true, gate_zero):
        for name, a, w in zip(("out", "dq", "dk", "dv"), got[:4], want[:4]):
            assert torch.allclose(a, w, atol=1e-5), f"{name}: max diff {float((a - w).abs().max()):.3g}"
    assert all_true[4].abs().max() < 1e-6    # the local part is the global one: no gate gradient


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_inputs_stay_in_their_dtype_and_agree(dtype):
    q, k, v, local, base, gate = _inputs(b=2, n=20, d=32, gate_heads=2)
    got = kernel_grads(_triton, *(t.to(dtype) for t in (q, k, v)), local, gate.to(dtype), base)
    assert all(t.dtype == dtype for t in got)
    want = kernel_grads(_ref, q, k, v, local, gate, base)
    tol = 3e-2 if dtype == torch.bfloat16 else 5e-3
    _assert_close([t.float() for t in got], want, atol=tol, rtol=tol)


def test_large_variance_logits_take_the_underflow_guard():
    # scores spread over hundreds: some rows' local maximum lies > 87 below the global one (float32 underflow)
    q, k, v, local, base, gate = _inputs(b=2, n=24, d=16, scale_qk=12.0, seed=3)
    s = (q @ k.transpose(-1, -2)) * 16 ** -0.5
    gap = (s.masked_fill(~base, -float("inf")).amax(-1)
           - s.masked_fill(~K.local_pattern(local, base), -float("inf")).amax(-1))
    assert (gap > 87).any()
    _assert_close(kernel_grads(_triton, q, k, v, local, gate, base), kernel_grads(_ref, q, k, v, local, gate, base),
                  atol=1e-3, rtol=1e-3)


@on_cpu_only
def test_float64_runs_in_float64():
    q, k, v, local, base, gate = (t.double() if t.is_floating_point() else t for t in _inputs(b=2, scale_qk=3.0))
    _assert_close(kernel_grads(_triton, q, k, v, local, gate, base), kernel_grads(_ref, q, k, v, local, gate, base),
                  atol=1e-11, rtol=0)


# ---------------------------------------------------------------------------------------------- dropout


def test_dropout_mask_is_the_fused_kernels_and_gradients_match_the_reference_under_it():
    q, k, v, local, base, gate = _inputs(b=2, n=18, m=17)
    p, seed = 0.25, 1234
    keep = TK.keep_mask(2, 2, 18, 17, p, seed)
    assert 0.6 < keep.float().mean() < 0.9
    got = kernel_grads(lambda *a: _triton(*a, dropout_p=p, seed=seed), q, k, v, local, gate, base)
    keep = keep.to(DEVICE)
    _assert_close(got, kernel_grads(lambda *a: _ref(*a, dropout_p=p, keep=keep), q, k, v, local, gate, base))


@on_cpu_only
def test_keep_mask_equals_the_fused_kernels():
    require_fused()
    seed = 2 ** 40 + 17   # both halves of the seed count
    assert torch.equal(TK.keep_mask(2, 3, 5, 70, 0.3, seed), K.dropout_keep_mask(2, 3, 5, 70, 0.3, seed))


def test_dropout_draws_one_mask_on_the_mixed_probabilities_at_rate_p():
    # one-hot values: the output is the dropped probability matrix, each entry 0 or P / (1 - p) (two masks, one
    # per distribution, would also give (1-g) P_glb / (1 - p) or g P_loc / (1 - p))
    b, h, n, m, p = 2, 2, 10, 16, 0.4
    q, k, _, local, base, gate = _inputs(b=b, h=h, n=n, m=m, d=m, seed=5)
    local |= torch.eye(n, m, dtype=torch.bool, device=DEVICE)
    gate = 0.2 + 0.6 * gate
    v = torch.eye(m, device=DEVICE).expand(b, h, m, m).clone()
    torch.manual_seed(11)
    out = _triton(q, k, v, local, gate, base, dropout_p=p)
    probs = K.reference_mixed_attention(q, k, v, local, gate, base)[1]
    kept = torch.isclose(out, probs / (1 - p), rtol=1e-5, atol=1e-7)
    dropped = out == 0
    assert bool((kept | dropped).all()), f"{int((~(kept | dropped)).sum())} entries are neither 0 nor P / (1 - p)"
    positive = probs > 1e-3
    assert 0.25 < float((dropped & positive).sum() / positive.sum()) < 0.55


# ---------------------------------------------------------------------------------------------- compile, model


def test_torch_compile_traces_the_custom_op():
    q, k, v, local, base, gate = _inputs(b=2, n=9)
    compiled = torch.compile(_triton, backend="aot_eager", fullgraph=True)
    _assert_close(kernel_grads(compiled, q, k, v, local, gate, base), kernel_grads(_triton, q, k, v, local, gate, base),
                  atol=0, rtol=0)


def test_inside_a_model_training_step_matches_the_reference_kernel():
    from structattn.models.encoder import apply_mechanism

    ids, att, structure = (t.to(DEVICE) for t in random_batch(b=2, t=10))
    grads = {}
    for kernel in ("reference", "triton"):
        model = tiny_model().to(DEVICE)
        apply_mechanism(model, "sla", kernel=kernel)
        model.train()
        model.config.attention_probs_dropout_prob = 0.0
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
        out = model(input_ids=ids, attention_mask=att, structure_mask=structure).last_hidden_state
        (out * att[..., None]).sum().backward()
        grads[kernel] = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
    assert grads["triton"].keys() == grads["reference"].keys()
    for name, g in grads["triton"].items():
        assert torch.allclose(g, grads["reference"][name], atol=1e-4, rtol=1e-3), name


# ---------------------------------------------------------------------------------------------- errors


def test_user_errors_say_what_is_wrong():
    q, k, v, local, base, gate = _inputs(b=2)
    with pytest.raises(ValueError, match="power of two"):
        K.triton_mixed_attention(q, k, v, local, gate, base, block_m=24)
    with pytest.raises(ValueError, match="dropout_p"):
        _triton(q, k, v, local, gate, base, dropout_p=1.0)
    with pytest.raises(ValueError, match="local mask must be bool"):
        _triton(q, k, v, local.float(), gate, base)
    with pytest.raises(UserError, match="float32, bfloat16, float16 or float64"):
        _triton(q.int(), k.int(), v.int(), local, gate, base)


def test_float64_off_the_interpreter_is_a_user_error():
    q, k, v, local, base, gate = (t.double() if t.is_floating_point() else t for t in kernel_inputs(b=2))
    if DEVICE == "cuda":
        q, k, v, local, base, gate = (t.to(DEVICE) for t in (q, k, v, local, base, gate))
    else:   # a tensor on a device that is not the CPU: a meta tensor stops before any kernel runs
        q = q.to("meta")
    with pytest.raises(UserError, match="float64 only on CPU under Triton's interpreter"):
        K.triton_mixed_attention(q, k, v, local, gate, base)


def test_cpu_without_the_interpreter_is_a_user_error(monkeypatch):
    monkeypatch.setattr(TK, "interpreted", lambda: False)   # as in a process started without TRITON_INTERPRET=1
    q, k, v, local, base, gate = kernel_inputs(b=2)         # CPU tensors wherever the others run
    with pytest.raises(UserError, match="cannot run here: on CPU tensors Triton kernels run only under Triton"):
        K.get_kernel("triton")(q, k, v, local, gate, base)


# ---------------------------------------------------------------------------------------------- auto on CUDA


def test_underflow_gap_is_the_libraries_one():
    assert TK.UNDERFLOW_GAP == K.UNDERFLOW_GAP


def test_self_check_passes_here_and_catches_a_wrong_kernel(monkeypatch):
    assert K.triton_self_check(DEVICE, **TILE) is None
    real = TK.mixed_attention
    monkeypatch.setattr(TK, "mixed_attention", lambda *a, **kw: real(*a, **kw) * 1.01)
    assert K.triton_self_check(DEVICE, **TILE).startswith("out differs from the reference by 0.01")
    monkeypatch.setattr(TK, "mixed_attention", lambda *a, **kw: (_ for _ in ()).throw(RuntimeError("no PTX")))
    assert K.triton_self_check(DEVICE, **TILE) == "RuntimeError: no PTX"


@pytest.fixture
def fresh_checks(monkeypatch):
    """An empty per-device check cache, and a CUDA device the kernel could run on (as far as the checks before
    the self-check can tell), with the interpreter off."""
    monkeypatch.setattr(K, "_triton_checked", {})
    monkeypatch.setattr(TK, "unavailable_reason", lambda device: None)
    monkeypatch.setattr(TK, "interpreted", lambda: False)
    monkeypatch.delenv("STRUCTATTN_NO_TRITON", raising=False)
    return monkeypatch


def test_auto_on_cuda_picks_triton_when_its_check_passes(fresh_checks):
    calls = []
    fresh_checks.setattr(K, "triton_self_check", lambda device: calls.append(str(device)))
    assert K.resolve_kernel_name("auto", "cuda:0") == "triton"
    assert K.resolve_kernel_name("auto", "cuda:0") == "triton"
    assert calls == ["cuda:0"]                      # checked once per device
    assert K.resolve_kernel_name("auto", "cpu") in ("fused", "exact")   # never the interpreter on CPU


def test_auto_on_cuda_falls_back_to_exact_with_a_warning_when_the_check_fails(fresh_checks):
    fresh_checks.setattr(K, "triton_self_check", lambda device: "dq differs from the reference by up to 0.5")
    with pytest.warns(RuntimeWarning, match="dq differs"):
        assert K.resolve_kernel_name("auto", "cuda") == "exact"


@pytest.mark.parametrize("why", ["env", "interpreter", "unavailable"])
def test_auto_on_cuda_runs_exact_without_checking_when_triton_cannot_run(fresh_checks, why):
    fresh_checks.setattr(K, "triton_self_check", lambda device: pytest.fail("no check should run"))
    if why == "env":
        fresh_checks.setenv("STRUCTATTN_NO_TRITON", "1")
    elif why == "interpreter":
        fresh_checks.setattr(TK, "interpreted", lambda: True)
    else:
        fresh_checks.setattr(TK, "unavailable_reason", lambda device: "CUDA is not available")
    assert K.resolve_kernel_name("auto", "cuda") == "exact"
    assert not K.triton_available("cuda")


def test_without_a_gpu_cuda_is_reported_unavailable():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert TK.unavailable_reason("cuda") == "CUDA is not available"


# ---------------------------------------------------------------------------------------------- GPU benchmark


@on_cpu_only
def test_gpu_benchmark_smoke_mode_runs_on_cpu():
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    res = subprocess.run([sys.executable, str(repo / "benchmarks" / "attention_gpu.py"), "--smoke"], cwd=repo,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Device: CPU (smoke run, Triton's interpreter)" in res.stdout
    rows = {line.split(" | ")[2]: line for line in res.stdout.splitlines() if line.startswith("| tiny | 16 (2) |")}
    assert set(rows) == {"stock sdpa", "sla exact (2x SDPA)", "sla flex", "sla triton"}
    assert rows["sla triton"].count(" ms (**") == 3      # both train steps and inference ran, with ratios
    assert "sla flex, train0: n/a (kernel 'flex' runs FlexAttention, which has no backward on CPU" in res.stdout


@on_cpu_only
def test_gpu_benchmark_writes_each_cell_and_measures_only_the_workloads_asked_for(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    out = tmp_path / "cells.md"
    res = subprocess.run([sys.executable, str(repo / "benchmarks" / "attention_gpu.py"), "--smoke", "--workloads",
                          "infer", "--variants", "sla triton", "--out", str(out)], cwd=repo, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    row = next(line for line in out.read_text().splitlines() if line.startswith("| tiny | 16 (2) | sla triton |"))
    cells = row.split(" | ")   # model, seq, variant, train, train0, inference, memory...
    assert cells[3] == cells[4] == "n/a" and " ms (**" in cells[5]
    assert "sla triton, train: n/a (not measured (--workloads))" in out.read_text()
    assert "(stopped part-way" not in out.read_text()


def test_gpu_script_refuses_an_unknown_part_in_one_line(tmp_path):
    import subprocess
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "attention_gpu.sh"
    res = subprocess.run(["bash", str(script), "warm", str(tmp_path / "out")], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 2
    assert res.stderr.strip() == "part: eager, compiled, graphs or step, not 'warm'"
    assert not (tmp_path / "out").exists()
