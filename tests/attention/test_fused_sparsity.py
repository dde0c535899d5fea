"""The fused kernel's sparse paths against the plain reference (which never skips anything): key ranges cut to
the keys a row block may attend, non-contiguous base masks, local patterns run block by block (sentence
blocks, windows, special-token columns, blocks that straddle the 16-key grid), per-head masks, several row
blocks, the underflow guard inside a local block; and the build keyed by ATen's CPU capability."""
from __future__ import annotations

import pytest
import torch
from attn_helpers import kernel_grads, require_fused

from structattn.attention import kernels as K
from structattn.attention import native


def _ref(q, k, v, local, gate, base):
    return K.reference_mixed_attention(q, k, v, local, gate, base)[0]


_grads = kernel_grads


def _assert_matches(local, base, *, h=2, d=8, gate_heads=1, seed=0, scale_qk=1.0, atol=1e-4):
    require_fused()
    b, _, n, m = local.shape
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, n, h, d, generator=g).transpose(1, 2) * scale_qk
    k = torch.randn(b, m, h, d, generator=g).transpose(1, 2) * scale_qk
    v = torch.randn(b, m, h, d, generator=g).transpose(1, 2)
    gate = torch.rand(b, gate_heads, n, generator=g)
    got = _grads(K.fused_mixed_attention, q, k, v, local, gate, base)
    want = _grads(_ref, q, k, v, local, gate, base)
    real = base.any(-1, keepdim=True) if base is not None else torch.ones(1, dtype=torch.bool)
    assert torch.isfinite(got[0]).all()
    assert torch.allclose(got[0] * real, want[0] * real, atol=atol, rtol=1e-4)
    for name, a, w in zip(("dq", "dk", "dv", "dgate"), got[1:], want[1:]):
        assert torch.allclose(a, w, atol=atol, rtol=1e-4), f"{name}: max diff {(a - w).abs().max():.3g}"


def _passage_masks(lengths: list[int], sentence_lengths: list[list[int]], n: int, window: int | None = None,
                   special_visible: bool = True):
    """local [b, 1, n, n]: per example, [CLS] sentence words... [SEP] padded to n; local = inside the same
    sentence (|i - j| <= window when given), [CLS]/[SEP] columns visible to every real token when
    special_visible (SLA's rule); base [b, 1, n, n] = the real keys (padding)."""
    b = len(lengths)
    local = torch.zeros(b, 1, n, n, dtype=torch.bool)
    base = torch.zeros(b, 1, n, n, dtype=torch.bool)
    for e, (length, sents) in enumerate(zip(lengths, sentence_lengths)):
        assert sum(sents) + 2 == length <= n
        base[e, 0, :, :length] = True
        start = 1
        for s in sents:
            idx = torch.arange(start, start + s)
            block = torch.ones(s, s, dtype=torch.bool)
            if window is not None:
                block = (idx[:, None] - idx[None, :]).abs() <= window
            local[e, 0, start:start + s, start:start + s] = block
            start += s
        if special_visible:
            local[e, 0, :length, 0] = True
            local[e, 0, :length, length - 1] = True
        local[e, 0, 0, 0] = local[e, 0, length - 1, length - 1] = True
        local[e, 0, range(length, n), range(length, n)] = True  # padding rows see themselves
    return local, base


def test_multi_sentence_passages_over_several_row_blocks():
    # 600 positions: three row blocks of the kernel; sentence blocks that straddle the 16-key grid
    local, base = _passage_masks([600, 431, 77], [[37, 200, 13, 1, 347], [429], [20, 55]], 600)
    _assert_matches(local, base, h=2, gate_heads=2)


def test_windows_inside_sentences_without_visible_special_tokens():
    local, base = _passage_masks([300, 150], [[100, 98, 100], [17, 131]], 300, window=3, special_visible=False)
    _assert_matches(local, base)


def test_non_contiguous_base_masks_and_local_keys_outside_the_base():
    g = torch.Generator().manual_seed(3)
    n = 70
    base = torch.rand(2, 1, n, n, generator=g) < 0.7       # holes everywhere: no row is a contiguous range
    base[0, 0, 5] = False                                   # a fully masked row
    local = torch.rand(2, 1, n, n, generator=g) < 0.2       # some local keys the base refuses
    local[1, 0, 10] = False                                 # an empty local row: the base row
    _assert_matches(local, base)


def test_per_head_masks_and_no_base_mask():
    g = torch.Generator().manual_seed(4)
    n, m, h = 40, 53, 3
    idx_q, idx_k = torch.arange(n)[:, None], torch.arange(m)[None, :]
    local = torch.stack([(idx_q - idx_k).abs() <= w for w in (0, 2, 9)])[None].expand(2, h, n, m).contiguous()
    _assert_matches(local, None, h=h, gate_heads=h)
    base = torch.rand(2, h, n, m, generator=g) < 0.9
    _assert_matches(local, base, h=h, gate_heads=1)


def test_underflow_guard_inside_a_local_block():
    # large logits: some rows' local maximum lies far below the global one (the guarded recomputation)
    local, base = _passage_masks([200], [[60, 138]], 200, window=1, special_visible=False)
    _assert_matches(local, base, scale_qk=6.0, atol=2e-3)


def test_keys_beyond_every_row_are_skipped_but_outputs_and_gradients_stay_exact():
    # example 1 has 20 real keys of 300: its products run over the first 32 keys only; dk, dv of the rest are 0
    local, base = _passage_masks([300, 20], [[298], [18]], 300)
    _assert_matches(local, base)


def test_gradcheck_float64_on_sparse_masks():
    require_fused()
    local, base = _passage_masks([40, 23], [[19, 19], [21]], 40, window=2)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 2, 40, 4, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    gate = torch.rand(2, 1, 40, generator=g, dtype=torch.float64, requires_grad=True)
    real = base.any(-1, keepdim=True).to(torch.float64)

    def fn(q, k, v, gate):
        return K.fused_mixed_attention(q, k, v, local, gate, base) * real

    assert torch.autograd.gradcheck(fn, (q, k, v, gate), eps=1e-6, atol=1e-5)


# ---------------------------------------------------------------------------------------------- the build


def test_build_is_keyed_by_atens_capability_not_by_the_machine(monkeypatch):
    import platform

    names = {}
    for cap in ("AVX512", "AVX2", "DEFAULT"):
        monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda cap=cap: cap)
        names[cap] = native._build_name()
        if platform.machine() in ("x86_64", "AMD64"):
            assert native.capability() == cap
    assert len(set(names.values())) == 3
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "SOMETHING_NEW")
    assert native.capability() == "DEFAULT"   # an unknown capability builds the portable code


def test_compile_flags_name_the_capability_never_march_native(monkeypatch):
    seen = {}

    def fake_load_inline(**kwargs):
        seen.update(kwargs)

    from torch.utils import cpp_extension

    monkeypatch.setattr(cpp_extension, "load_inline", fake_load_inline)
    monkeypatch.setattr(native, "capability", lambda: "AVX2")
    native._compile("x", "/nonexistent", False)
    flags = seen["extra_cflags"]
    assert "-DCPU_CAPABILITY=AVX2" in flags and "-DCPU_CAPABILITY_AVX2" in flags and "-mavx2" in flags
    assert not any("native" in f for f in flags)
    assert not any("avx512" in f for f in flags)


@pytest.mark.skipif(torch.backends.cpu.get_cpu_capability() not in ("AVX512", "AVX2"), reason="x86 with AVX2")
def test_the_loaded_module_was_built_for_this_capability():
    require_fused()
    assert native.load().probe() == native.capability()
