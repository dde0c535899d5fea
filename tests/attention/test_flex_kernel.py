"""The FlexAttention route (kernel ``flex``, meant for CUDA) on the CPU, where torch 2.13 runs FlexAttention's
forward: against the plain reference with padding, fully padded rows, empty local rows, per-head gates and
masks, sparse multi-block masks, bf16 and float16; gate 0 is SDPA bit for bit; the block mask skips blocks;
dropout keeps the one-mask semantics; a CPU call that needs gradients is refused with a clear message; inside a
model."""
from __future__ import annotations

import pytest
import torch
from attn_helpers import random_batch, tiny_model

from structattn.attention import kernels as K
from structattn.errors import UserError


def _inputs(b=3, h=4, n=11, m=None, d=8, gate_heads=1, seed=0, density=0.3, mask_heads=1):
    m = n if m is None else m
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(b, h, r, d, generator=g) for r in (n, m, m))
    local = torch.rand(b, mask_heads, n, m, generator=g) < density
    base = torch.ones(b, 1, n, m, dtype=torch.bool)
    base[1, :, :, m - 3:] = False
    if b > 2:
        base[2] = False                      # a fully padded example
    local[0, :, 2] = False                   # an empty local row: the base row
    gate = torch.rand(b, gate_heads, n, generator=g)
    return q, k, v, local, base, gate


@pytest.mark.parametrize("gate_heads,mask_heads", [(1, 1), (4, 1), (4, 4)])
def test_flex_matches_reference(gate_heads, mask_heads):
    q, k, v, local, base, gate = _inputs(gate_heads=gate_heads, mask_heads=mask_heads)
    want = K.reference_mixed_attention(q, k, v, local, gate, base)[0]
    got = K.flex_mixed_attention(q, k, v, local, gate, base)
    assert torch.isfinite(got).all()
    assert torch.allclose(got, want, atol=1e-5)
    assert (got[2] == 0).all()               # fully padded rows give 0, as SDPA does


def test_flex_on_long_sparse_masks_over_many_blocks():
    n = 300
    idx = torch.arange(n)
    local = ((idx[:, None] - idx[None, :]).abs() <= 2)[None, None].expand(2, 1, n, n).clone()
    local[:, :, :, 0] = True                 # a visible [CLS] column
    base = torch.ones(2, 1, n, n, dtype=torch.bool)
    base[1, :, :, 170:] = False
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 2, n, 8, generator=g) for _ in range(3))
    gate = torch.rand(2, 2, n, generator=g)
    block_mask = K.flex_block_mask(K.local_pattern(local, base), block_size=32)
    assert block_mask.sparsity() > 50        # most key blocks are skipped
    want = K.reference_mixed_attention(q, k, v, local, gate, base)[0]
    assert torch.allclose(K.flex_mixed_attention(q, k, v, local, gate, base), want, atol=1e-5)


def test_gate_zero_is_sdpa_bit_for_bit_and_all_true_local_is_global():
    q, k, v, local, base, gate = _inputs(b=2)
    sdpa = K.sdpa_attend(q, k, v, base, scale=q.shape[-1] ** -0.5, dropout_p=0.0)
    assert torch.equal(K.flex_mixed_attention(q, k, v, local, torch.zeros_like(gate), base), sdpa)
    everything = torch.ones_like(local)
    assert torch.allclose(K.flex_mixed_attention(q, k, v, everything, gate, base), sdpa, atol=1e-5)


@pytest.mark.parametrize("dtype,atol", [(torch.bfloat16, 5e-2), (torch.float16, 5e-3)])
def test_half_inputs_stay_in_their_dtype_and_agree(dtype, atol):
    q, k, v, local, base, gate = _inputs(b=2)
    got = K.flex_mixed_attention(q.to(dtype), k.to(dtype), v.to(dtype), local, gate, base)
    want = K.reference_mixed_attention(q, k, v, local, gate, base)[0]
    assert got.dtype == dtype
    assert torch.allclose(got.float(), want, atol=atol)


def test_dropout_draws_one_mask_on_the_mixed_probabilities():
    q, k, v, local, base, gate = _inputs(b=2)
    torch.manual_seed(5)
    got = K.flex_mixed_attention(q, k, v, local, gate, base, dropout_p=0.3)
    torch.manual_seed(5)
    want = K.reference_mixed_attention(q, k, v, local, gate, base, dropout_p=0.3)[0]
    assert torch.equal(got, want)


def test_cpu_training_is_refused_with_what_to_do():
    q, k, v, local, base, gate = _inputs(b=2)
    with pytest.raises(UserError, match="no backward on CPU.*fused"):
        K.flex_mixed_attention(q.requires_grad_(), k, v, local, gate, base)
    with torch.no_grad():
        K.flex_mixed_attention(q, k, v, local, gate, base)   # inference is fine


def test_flex_inside_a_model_matches_the_reference_kernel():
    from structattn.models.encoder import apply_mechanism

    ids, att, structure = random_batch()
    outs = {}
    for kernel in ("reference", "flex"):
        model = tiny_model()
        apply_mechanism(model, "sla", kernel=kernel)
        with torch.no_grad():
            outs[kernel] = model(input_ids=ids, attention_mask=att, structure_mask=structure).last_hidden_state
    real = att.bool()[..., None]
    assert torch.allclose(outs["flex"] * real, outs["reference"] * real, atol=1e-5)
