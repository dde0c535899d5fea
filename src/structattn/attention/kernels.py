"""Kernels for gated local/global attention: pure functions over q, k, v, masks and gates.

Notation (shapes in every docstring of this file):
    b  batch            h  attention heads        d  head size
    n  queries          m  keys                   G  gate heads: 1 (one gate per token) or h (per head)

Inputs shared by every kernel:
    q       [b, h, n, d]          queries (any strides)
    k, v    [b, h, m, d]          keys and values
    local   [b, 1|h, n, m] bool   local pattern, True = query row may attend key column
    gate    [b, G, n]             g in [0, 1]: weight of the local distribution for each query
    base    [b, 1|h, n, m] bool or None
                                  the stock model's mask (padding, ModernBERT's sliding window); None = all keys
    scale   float                 score scale (default d ** -0.5)

Every kernel returns out [b, h, n, d] with, for each query row i (s = scale * q k^T),

    out_i = (1 - g_i) * softmax over base(s_i) @ v  +  g_i * softmax over (local AND base)(s_i) @ v

Mixing the outputs of the two attentions per row is the same as mixing their probabilities (the
SLA paper's eq. 6), because P -> P v is linear. Row rules (no NaN ever):
    * a row whose ``local AND base`` is empty uses the base row for its local part (so an all-True
      local mask, or an empty one, gives global attention);
    * a row whose base row is empty (a fully padded example) gives 0, as SDPA does.

Dropout (``dropout_p > 0``; the integration passes 0 outside training, as the stock functions do): every
kernel draws ONE mask on the mixed probabilities and rescales the kept entries,

    out = (keep * P / (1 - dropout_p)) @ v,   P = (1 - g) P_glb + g P_loc,   keep ~ Bernoulli(1 - dropout_p)

so a key dropped for a query is dropped from both the global and the local distribution. ``exact`` does
this too: with dropout it computes P eagerly (as ``reference``) instead of its two stock passes, which
would draw two independent masks; without dropout it keeps the two bit-exact stock passes. ``fused``
draws its mask from a hash of (seed, element index)
([`dropout_keep_mask`][structattn.attention.kernels.dropout_keep_mask]), the others from torch's generator through
``F.dropout``. (Xu et al.'s code never drops the local weights, the SLA code drops each distribution separately; neither
form is offered here.)

Kernels a model may run (registry `KERNELS`; names valid in ``MechanismConfig.kernel``: `KERNEL_NAMES`):
    auto        on CPU ``fused`` when the native kernel builds, else ``exact``; on CUDA ``triton`` when it is
                available ([`triton_available`][structattn.attention.kernels.triton_available]: the package installed,
                compute capability >= 8.0, and a first-use check of forward and gradients against ``reference`` on that
                GPU passed), else ``exact``. ``flex`` is never chosen: its backward has not been checked against
                ``reference`` anywhere (FlexAttention has no CPU backward in torch 2.13 and no GPU was at hand), and
                where ``triton`` is not available FlexAttention's compiled GPU path (itself Triton) usually is not
                either
    reference   plain: two softmaxes, explicit blend of probabilities, one P v (eager, autograd)
    exact       two passes of the stock kernel (SDPA by default), outputs mixed as
                O_glb + g * (O_loc - O_glb): at g = 0 and for an all-True local mask it reproduces the stock
                kernel bit for bit (without dropout; see above)
    shared_exp  one exponential shared by both softmaxes, one P v (eager, autograd; any device), with the
                underflow guard described at
                [`shared_exp_mixed_attention`][structattn.attention.kernels.shared_exp_mixed_attention]
    fused       native CPU kernel (`structattn.attention.native`): shared exponential in one pass per
                row, flash-style recompute in backward (saves one log-normaliser per row, as SDPA does); float32
                inside (float64 for float64 inputs, which gradient checks use)
    flex        global part by SDPA (flash), local part by FlexAttention with a block mask built from the
                structure mask, outputs mixed as in ``exact`` (CPU: forward only)
    triton      fused Triton kernels (`structattn.attention.triton_kernel`), FlashAttention-2 style: one sweep
                over key tiles with running maxima and sums for both distributions (shared exponential, the
                same underflow guard), key tiles without an allowed key and local halves without a local key
                skipped, one log-normaliser per row saved, probabilities recomputed in the backward; the
                ``fused`` kernel's dropout hash (the same seed draws the same mask). CUDA; on CPU only under
                Triton's interpreter (``TRITON_INTERPRET=1``), which the tests use

Benchmark-only kernels (the SLA authors' two-output form, ``torch.compile``d shared_exp) live in
``benchmarks/attention.py``; it registers them with
[`register_private_kernel`][structattn.attention.kernels.register_private_kernel], which makes them runnable but never
valid in a saved configuration.
"""
from __future__ import annotations

from typing import Callable, Optional

import torch
import torch.nn.functional as F

from ..errors import UserError
from . import native, triton_kernel
from .eager import draw_seed, eager_call, heads_inner, needs_grad, seed_tensor

Tensor = torch.Tensor

# Local maximum further than this below the global maximum: the shared exponential exp(s - max_global)
# of every local key would be below exp(-60) and start losing precision (float32 underflows near -87).
UNDERFLOW_GAP = 60.0


# ---------------------------------------------------------------------------------------------- masks


def local_pattern(local: Tensor, base: Optional[Tensor]) -> Tensor:
    """The local mask actually used: ``local AND base``, with empty rows replaced by the base row.

    local [b, 1|h, n, m] bool, base [b, 1|h, n, m] bool or None -> [b, 1|h, n, m] bool. A row whose base
    row is empty stays empty.
    """
    loc = local if base is None else (local & base)
    empty = ~loc.any(dim=-1, keepdim=True)
    if base is None:
        return loc | empty
    return torch.where(empty, base, loc)


def _scale(q: Tensor, scale: Optional[float]) -> float:
    return q.shape[-1] ** -0.5 if scale is None else float(scale)


# input dtype -> the dtype the kernels compute in, where it is not float32
_COMPUTE_DTYPE = {torch.float64: torch.float64}


def _compute_dtype(q: Tensor) -> torch.dtype:
    """float32 for half, bfloat16 and float32 inputs; float64 for float64 (used by gradient checks)."""
    return _COMPUTE_DTYPE.get(q.dtype, torch.float32)


def _gate4(gate: Tensor, dtype: torch.dtype) -> Tensor:
    """gate [b, G, n] -> [b, G, n, 1] in ``dtype``."""
    return gate.to(dtype).unsqueeze(-1)


def _masked_softmax(s: Tensor, mask: Optional[Tensor]) -> Tensor:
    """softmax of s [.., n, m] over the True keys of mask; rows without any True key give 0."""
    if mask is None:
        return torch.softmax(s, dim=-1)
    filled = s.masked_fill(~mask, float("-inf"))
    has_key = mask.any(dim=-1, keepdim=True)
    filled = torch.where(has_key, filled, torch.zeros((), dtype=s.dtype, device=s.device))
    return torch.softmax(filled, dim=-1) * has_key


# ---------------------------------------------------------------------------------------------- reference


def reference_mixed_attention(q: Tensor, k: Tensor, v: Tensor, local: Tensor, gate: Tensor,
                              base: Optional[Tensor] = None, *, scale: Optional[float] = None,
                              dropout_p: float = 0.0, keep: Optional[Tensor] = None,
                              training: bool = True) -> tuple[Tensor, Tensor]:
    """Plain formulation: P = (1 - g) softmax_base(s) + g softmax_local(s); out = dropout(P) v.

    Computed in float32 (float64 for float64 inputs). ``keep`` ([b, h, n, m] bool) fixes the dropout mask
    (elements scaled by 1 / (1 - dropout_p)); otherwise ``F.dropout`` draws one when training.

    Returns:
        out [b, h, n, d] in q's dtype, and the mixed probabilities P [b, h, n, m] (float32 or float64,
        before dropout).
    """
    dtype, ct = q.dtype, _compute_dtype(q)
    qf, kf, vf = q.to(ct), k.to(ct), v.to(ct)
    s = torch.matmul(qf, kf.transpose(-1, -2)) * _scale(q, scale)
    p_glb = _masked_softmax(s, base)
    p_loc = _masked_softmax(s, local_pattern(local, base))
    g = _gate4(gate, ct)
    probs = (1.0 - g) * p_glb + g * p_loc
    dropped = probs
    if keep is not None:
        dropped = probs * keep / (1.0 - dropout_p)
    elif dropout_p > 0.0 and training:
        dropped = F.dropout(probs, p=dropout_p, training=True)
    return torch.matmul(dropped, vf).to(dtype), probs


def _reference_kernel(q, k, v, local, gate, base=None, *, scale=None, dropout_p=0.0):
    return reference_mixed_attention(q, k, v, local, gate, base, scale=scale, dropout_p=dropout_p)[0]


# ---------------------------------------------------------------------------------------------- exact


def sdpa_attend(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor], *, scale: float,
                dropout_p: float) -> Tensor:
    """One stock SDPA call: q [b, h, n, d], mask [b, 1|h, n, m] bool or None -> [b, h, n, d]."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=scale)


def two_pass_mixed_attention(q: Tensor, k: Tensor, v: Tensor, local: Tensor, gate: Tensor,
                             base: Optional[Tensor] = None, *, scale: Optional[float] = None,
                             dropout_p: float = 0.0,
                             attend: Optional[Callable[..., Tensor]] = None,
                             attend_local: Optional[Callable[..., Tensor]] = None) -> Tensor:
    """Two passes of the stock kernel, mixed on the outputs: out = O_glb + g (O_loc - O_glb).

    ``attend(q, k, v, mask, scale=, dropout_p=)`` is the stock kernel (default: SDPA with a bool mask);
    the global pass gets ``base`` unchanged, the local pass
    [`local_pattern`][structattn.attention.kernels.local_pattern] through ``attend_local`` (default: ``attend``; the
    ``flex`` kernel passes FlexAttention). Because O_glb is the stock kernel's own output, g = 0 reproduces it bit for
    bit, and so does an all-True local mask (the local pass then sees the very same mask).

    With ``dropout_p > 0`` two passes would draw two independent dropout masks, one per distribution; to
    keep the one-mask semantics of every kernel (module docstring) the mixed probabilities are then
    computed eagerly by [`reference_mixed_attention`][structattn.attention.kernels.reference_mixed_attention] with one
    ``F.dropout`` (``attend`` is not used). Returns out [b, h, n, d].
    """
    sc = _scale(q, scale)
    if dropout_p > 0.0:
        return reference_mixed_attention(q, k, v, local, gate, base, scale=sc, dropout_p=dropout_p)[0]
    attend = attend or sdpa_attend
    o_glb = attend(q, k, v, base, scale=sc, dropout_p=dropout_p)
    o_loc = (attend_local or attend)(q, k, v, local_pattern(local, base), scale=sc, dropout_p=dropout_p)
    return o_glb + _gate4(gate, o_glb.dtype) * (o_loc - o_glb)


# ---------------------------------------------------------------------------------------------- shared exponential


def shared_exp_mixed_attention(q: Tensor, k: Tensor, v: Tensor, local: Tensor, gate: Tensor,
                               base: Optional[Tensor] = None, *, scale: Optional[float] = None,
                               dropout_p: float = 0.0, training: bool = True,
                               branch_free: bool = False) -> Tensor:
    """One shared exponential: E = exp(s - rowmax), P = E ((1 - g) / sum E + g L / sum(E L)), out = P v.

    Underflow guard: where the local row maximum lies more than `UNDERFLOW_GAP` below the global
    one, E L would underflow, so those rows take their local part from exp(s - local max) instead.
    ``branch_free`` computes that fallback for every row and selects with ``torch.where`` (no
    data-dependent Python branch, for ``torch.compile``); otherwise it is computed only when a row needs
    it. Computed in float32 (float64 for float64 inputs). Returns out [b, h, n, d] in q's dtype.
    """
    dtype, ct = q.dtype, _compute_dtype(q)
    qf, kf, vf = q.to(ct), k.to(ct), v.to(ct)
    s = torch.matmul(qf, kf.transpose(-1, -2)) * _scale(q, scale)
    neg_inf = float("-inf")
    loc = local_pattern(local, base)
    s_glb = s if base is None else s.masked_fill(~base, neg_inf)
    s_loc = s.masked_fill(~loc, neg_inf)
    zero = torch.zeros((), dtype=s.dtype, device=s.device)
    # The result does not depend on the shifts, so they carry no gradient.
    m_glb = s_glb.amax(dim=-1, keepdim=True).detach()
    m_loc = s_loc.amax(dim=-1, keepdim=True).detach()
    m_glb = torch.where(torch.isfinite(m_glb), m_glb, zero)
    m_loc = torch.where(torch.isfinite(m_loc), m_loc, zero)
    e = torch.exp(s_glb - m_glb)
    z_glb = e.sum(dim=-1, keepdim=True)
    far = (m_glb - m_loc) > UNDERFLOW_GAP
    # Local exponentials relative to the local maximum, exp(s - m_loc) = e * exp(m_glb - m_loc): the local
    # sum is then >= 1 (tiny sums would make autograd's -g / z^2 overflow). Rows too far apart for the
    # shared exponential get their own exp.
    rescale = torch.exp(torch.where(far, zero, m_glb - m_loc))
    if branch_free or bool(far.any()):
        e_loc = torch.where(far, torch.exp(s_loc - m_loc), e * loc * rescale)
    else:
        e_loc = e * loc * rescale
    z_loc = e_loc.sum(dim=-1, keepdim=True)
    one = torch.ones((), dtype=s.dtype, device=s.device)
    z_glb = torch.where(z_glb > 0, z_glb, one)
    z_loc = torch.where(z_loc > 0, z_loc, one)
    g = _gate4(gate, ct)
    probs = e * ((1.0 - g) / z_glb) + e_loc * (g / z_loc)
    if dropout_p > 0.0 and training:
        probs = F.dropout(probs, p=dropout_p, training=True)
    return torch.matmul(probs, vf).to(dtype)


# ---------------------------------------------------------------------------------------------- fused (native)


# The op names carry the layout version of what the forward saves for the backward. torch.compile's
# on-disk graph cache keys on the op name, not on the fake implementation: a cached graph compiled against
# another layout would otherwise be reused and fail its shape asserts. Bump the suffix on any change. The layout
# of v4: every output a tensor of its own (none a view of another), the dropout seed an int64 scalar tensor (drawn
# inside a compiled graph, no .item()), one log-normaliser per row ([b, h, n]).
_OP_VERSION = "v4"
_FORWARD_OP = f"structattn::mixed_attention_forward_{_OP_VERSION}"
_BACKWARD_OP = f"structattn::mixed_attention_backward_{_OP_VERSION}"

def _seed_or_draw(seed, dropout_p: float):
    """``seed``, or without one a draw from torch's generator when there is dropout (0 without: never read)."""
    if seed is not None:
        return seed
    return draw_seed(as_tensor=torch.compiler.is_compiling()) if dropout_p > 0.0 else 0


def _native_extension():
    ext = native.load()
    if ext is None:
        raise RuntimeError(f"the fused attention kernel is not available: {native.failure()}")
    return ext


@torch.library.custom_op(_FORWARD_OP, mutates_args=(), device_types="cpu")
def _native_forward(q: Tensor, k: Tensor, v: Tensor, base: Optional[Tensor], local: Tensor, gate: Tensor,
                    scale: float, dropout_p: float, seed: Tensor) -> tuple[Tensor, Tensor]:
    out, stats = _native_extension().mixed_forward(q, k, v, base, local, gate, scale, dropout_p, int(seed))
    return out, stats


@_native_forward.register_fake
def _native_forward_fake(q, k, v, base, local, gate, scale, dropout_p, seed):
    b, h, n, d = q.shape
    return heads_inner(b, h, n, d, q), q.new_empty((b, h, n))


@torch.library.custom_op(_BACKWARD_OP, mutates_args=(), device_types="cpu")
def _native_backward(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, base: Optional[Tensor], local: Tensor,
                     gate: Tensor, stats: Tensor, scale: float, dropout_p: float,
                     seed: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    dq, dk, dv, dg = _native_extension().mixed_backward(dout, q, k, v, base, local, gate, stats, scale, dropout_p,
                                                        int(seed))
    return dq, dk, dv, dg


@_native_backward.register_fake
def _native_backward_fake(dout, q, k, v, base, local, gate, stats, scale, dropout_p, seed):
    b, h, n, d = q.shape
    m = k.shape[2]
    return heads_inner(b, h, n, d, q), heads_inner(b, h, m, d, q), heads_inner(b, h, m, d, q), q.new_empty((b, h, n))


def _native_setup_context(ctx, inputs, output):
    q, k, v, base, local, gate, scale, dropout_p, seed = inputs
    ctx.save_for_backward(q, k, v, base, local, gate, output[1], seed)
    ctx.scale, ctx.dropout_p = scale, dropout_p
    ctx.set_materialize_grads(False)   # the log-normaliser output is never differentiated


def _native_autograd(ctx, dout, dstats):
    q, k, v, base, local, gate, stats, seed = ctx.saved_tensors
    dq, dk, dv, dg = _native_backward(_unit_last(dout), q, k, v, base, local, gate, stats, ctx.scale, ctx.dropout_p,
                                      seed)
    return dq, dk, dv, None, None, _sum_gate_heads(dg, gate), None, None, None


torch.library.register_autograd(_FORWARD_OP, _native_autograd, setup_context=_native_setup_context)


def _sum_gate_heads(dg: Tensor, gate: Tensor) -> Tensor:
    """The kernels' gate gradient [b, h, n] summed to a per-token gate's [b, 1, n] (unchanged for [b, h, n])."""
    return dg.sum(dim=1, keepdim=True) if gate.shape[1] == 1 else dg


class _NativeFunction(torch.autograd.Function):
    """The fused kernel's eager autograd: the C++ forward and backward called directly (the custom op's
    dispatch and its Python autograd wrapper cost more than the kernel on small inputs). Only ``out`` is an
    output, so no gradient is ever made for the log-normaliser."""

    @staticmethod
    def forward(ctx, q, k, v, base, local, gate, scale, dropout_p, seed):
        out, stats = _native_extension().mixed_forward(q, k, v, base, local, gate, scale, dropout_p, seed)
        ctx.save_for_backward(q, k, v, base, local, gate, stats)
        ctx.args = (scale, dropout_p, seed)
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, base, local, gate, stats = ctx.saved_tensors
        dq, dk, dv, dg = _native_extension().mixed_backward(_unit_last(dout), q, k, v, base, local, gate, stats,
                                                            *ctx.args)
        return dq, dk, dv, None, None, _sum_gate_heads(dg, gate), None, None, None


def _unit_last(t: Tensor) -> Tensor:
    return t if t.stride(-1) == 1 else t.contiguous()


def _check_masks(q: Tensor, k: Tensor, local: Tensor, base: Optional[Tensor]) -> None:
    """Raise a ValueError unless local and base (or None) are bool [b|1, h|1, n|1, m] for q [b, h, n, d] and
    k [b, h, m, d]."""
    b, h, n = q.shape[:3]
    m = k.shape[2]
    for name, mask in (("local", local), ("base", base)):
        if mask is not None and (mask.dim() != 4 or mask.shape[0] not in (1, b) or mask.shape[1] not in (1, h)
                                 or mask.shape[2] not in (1, n) or mask.shape[3] != m or mask.dtype != torch.bool):
            raise ValueError(f"{name} mask must be bool [b|1, h|1, n|1, m], got {tuple(mask.shape)} {mask.dtype}")


@torch.compiler.assume_constant_result  # torch.compile calls it while tracing (it may build, under a lock)
def fused_available() -> bool:
    """Whether the native kernel builds on this machine (builds it on the first call)."""
    return native.load() is not None


def fused_mixed_attention(q: Tensor, k: Tensor, v: Tensor, local: Tensor, gate: Tensor,
                          base: Optional[Tensor] = None, *, scale: Optional[float] = None,
                          dropout_p: float = 0.0, seed=None) -> Tensor:
    """The native fused kernel (CPU; float32 inside, float64 for float64 inputs; other dtypes are upcast to
    float32 and the output cast back).

    Dropout (when ``dropout_p > 0``) uses a hash of ``seed`` (an int, or an int64 scalar tensor) and the element
    index; ``seed`` defaults to a draw from torch's generator (`draw_seed`),
    so ``torch.manual_seed`` makes it reproducible. Returns out [b, h, n, d] (laid out as
    [b, n, h, d] in memory, so ``out.transpose(1, 2)`` is contiguous).
    """
    check_fused_inputs(q, k, local, base, dropout_p)
    return fused_unchecked(q, k, v, local, gate, base, scale=_scale(q, scale), dropout_p=float(dropout_p), seed=seed)


def check_fused_inputs(q: Tensor, k: Tensor, local: Tensor, base: Optional[Tensor], dropout_p: float = 0.0) -> None:
    """What [`fused_mixed_attention`][structattn.attention.kernels.fused_mixed_attention] checks before it runs (raises
    what it raises)."""
    if q.device.type != "cpu":
        raise UserError("kernel 'fused' runs on CPU only; use kernel='exact' (or 'auto') on other devices")
    if not fused_available():
        raise UserError(f"kernel 'fused' is not available here ({native.failure()}); use kernel='auto' or 'exact'")
    _check_masks(q, k, local, base)


def fused_unchecked(q: Tensor, k: Tensor, v: Tensor, local: Tensor, gate: Tensor, base: Optional[Tensor], *,
                    scale: float, dropout_p: float, seed=None) -> Tensor:
    """[`fused_mixed_attention`][structattn.attention.kernels.fused_mixed_attention] without its checks, for callers
    that checked the masks and the kernel's availability once per step (the model integration): ``scale`` a float,
    ``seed`` an int or an int64 scalar tensor. Eager calls go through `_NativeFunction` (or straight to the C++ forward
    when no gradient is needed); traced ones through the custom op. Written for a layer's host time (the integration
    calls it in every layer)."""
    dtype = q.dtype
    ct = _compute_dtype(q)
    if seed is None:
        seed = _seed_or_draw(None, dropout_p)
    if k.dtype is not ct or v.dtype is not ct or dtype is not ct:
        q, k, v = q.to(ct), k.to(ct), v.to(ct)
    q, k, v, local = _unit_last(q), _unit_last(k), _unit_last(v), _unit_last(local)
    base = None if base is None else _unit_last(base)
    if gate.dtype is not ct:
        gate = gate.to(ct)
    if not gate.is_contiguous():
        gate = gate.contiguous()
    if not isinstance(seed, Tensor) and eager_call(q, k, v, base, local, gate):
        if needs_grad(q, k, v, gate):
            out = _NativeFunction.apply(q, k, v, base, local, gate, scale, dropout_p, seed)
        else:
            out = _native_extension().mixed_forward(q, k, v, base, local, gate, scale, dropout_p, seed)[0]
    else:
        out = _native_forward(q, k, v, base, local, gate, scale, dropout_p, seed_tensor(seed))[0]
    return out if dtype is ct else out.to(dtype)


def fused_gated_inference(q: Tensor, k: Tensor, v: Tensor, local: Tensor, base: Optional[Tensor], hidden: Tensor,
                          weight: Tensor, bias: Optional[Tensor], *, scale: float) -> Tensor:
    """The fused kernel with the gate g = sigmoid(W h + b) computed inside it from the layer's hidden states
    h [b, n, H] and the gate's ``weight`` [G, H] and ``bias`` [G] (or None): one call instead of the gate's three
    operators and the kernel's, for eager inference (no gradient, no dropout). q, k, v [b, h, n|m, d], hidden
    and the gate's parameters all float32 or all float64; masks checked by the caller. Returns out [b, h, n, d]
    (laid out as [b, n, h, d]), equal to [`fused_unchecked`][structattn.attention.kernels.fused_unchecked] with
    that gate up to rounding."""
    return _native_extension().mixed_forward_gated(q, k, v, base, local, hidden, weight, bias, scale)[0]


#: Kernels that can compute the gate themselves at inference (dispatch's per-step plan uses them).
GATED_INFERENCE_KERNELS: dict[str, Callable[..., Tensor]] = {"fused": fused_gated_inference}


def dropout_keep_mask(b: int, h: int, n: int, m: int, dropout_p: float, seed: int) -> Tensor:
    """The keep mask [b, h, n, m] bool that the fused kernel uses for (dropout_p, seed); for tests."""
    ext = native.load()
    if ext is None:
        raise RuntimeError(f"the fused attention kernel is not available: {native.failure()}")
    return ext.dropout_keep(b, h, n, m, float(dropout_p), int(seed))


# ---------------------------------------------------------------------------------------------- flex (GPU route)

_compiled_flex = None


def _compiled_flex_attention():
    """FlexAttention, compiled once (``dynamic=False``: a second mask function can otherwise crash a recompile)."""
    global _compiled_flex
    if _compiled_flex is None:
        from torch.nn.attention.flex_attention import flex_attention

        _compiled_flex = torch.compile(flex_attention, dynamic=False)
    return _compiled_flex


def flex_block_mask(mask: Tensor, block_size: int = 128):
    """A FlexAttention ``BlockMask`` for mask [b|1, h|1, n, m] bool (True = may attend).

    Blocks of ``block_size`` x ``block_size`` (query x key) with no True entry are skipped by the kernel; the
    others read ``mask`` element by element. Size-1 batch and head dimensions broadcast.
    """
    from torch.nn.attention.flex_attention import create_block_mask

    mb, mh, n, m = mask.shape

    def mask_mod(b, h, q_idx, kv_idx):  # called with every query's own batch and head: size-1 dims read index 0
        return mask[b if mb > 1 else 0, h if mh > 1 else 0, q_idx, kv_idx]

    return create_block_mask(mask_mod, mb if mb > 1 else None, mh if mh > 1 else None, n, m, device=mask.device,
                             BLOCK_SIZE=block_size)


def flex_attend(q: Tensor, k: Tensor, v: Tensor, mask: Tensor, *, scale: float, dropout_p: float = 0.0,
                block_size: int = 128, block_mask=None) -> Tensor:
    """Attention over the True keys of mask [b|1, h|1, n, m] through FlexAttention with a block mask:
    q [b, h, n, d], k, v [b, h, m, d] -> [b, h, n, d]; a row with no True key gives 0. FlexAttention has no
    dropout: ``dropout_p`` (the stock-kernel signature) must be 0. ``block_mask``: the BlockMask of ``mask``
    when the caller has it (built here otherwise).

    On CUDA the compiled kernel runs (key blocks without a True entry cost nothing); on CPU torch 2.13 has
    FlexAttention's forward only, which runs eagerly here (for tests and inference; no gradients)."""
    import warnings

    if dropout_p:
        raise ValueError("FlexAttention has no dropout; flex_mixed_attention computes dropout eagerly")
    if block_mask is None:
        block_mask = flex_block_mask(mask, block_size)
    if q.device.type == "cuda":
        return _compiled_flex_attention()(q, k, v, block_mask=block_mask, scale=scale)
    from torch.nn.attention.flex_attention import flex_attention

    if not torch.is_grad_enabled():  # FlexAttention refuses inputs that require grad on CPU even then
        q, k, v = q.detach(), k.detach(), v.detach()
    with warnings.catch_warnings():  # "called without torch.compile": intended on CPU
        warnings.simplefilter("ignore", UserWarning)
        return flex_attention(q, k, v, block_mask=block_mask, scale=scale)


# (local, base, their versions) -> (local pattern, its BlockMask) of the last call: the layers of one model call
# share their masks, so the BlockMask (milliseconds of host work) is built once per step, not once per layer
_flex_last: list = [None, None]


def tensor_version(t) -> Optional[int]:
    """The in-place version counter of tensor ``t`` (None for anything else, and for inference tensors, which have
    none: they can only change inside ``torch.inference_mode``); caches of per-step masks compare it."""
    if not isinstance(t, Tensor) or t.is_inference():
        return None
    return t._version


def _flex_local_masks(local: Tensor, base: Optional[Tensor]):
    """(local_pattern(local, base), its BlockMask), reused while the same mask tensors, unchanged, come back."""
    key = (local, base, tensor_version(local), tensor_version(base))
    last = _flex_last[0]
    if (last is not None and last[0] is local and last[1] is base and last[2:] == key[2:]
            and not torch.compiler.is_compiling()):
        return _flex_last[1]
    pattern = local_pattern(local, base)
    masks = (pattern, flex_block_mask(pattern))
    if not torch.compiler.is_compiling():
        _flex_last[0], _flex_last[1] = key, masks
    return masks


def flex_mixed_attention(q: Tensor, k: Tensor, v: Tensor, local: Tensor, gate: Tensor,
                         base: Optional[Tensor] = None, *, scale: Optional[float] = None,
                         dropout_p: float = 0.0) -> Tensor:
    """The GPU route (experimental: ``auto`` never picks it, see the module docstring): global part through the
    stock SDPA kernel (flash / memory-efficient on CUDA), local part through FlexAttention with a block mask built
    from [`local_pattern`][structattn.attention.kernels.local_pattern] (key blocks no query of a block may attend are
    skipped; built once for the layers of a model call, which share their masks), mixed on the outputs: out = O_glb + g
    (O_loc - O_glb); g = 0 reproduces SDPA bit for bit.

    bf16 / float16 inputs stay in their dtype (as SDPA and FlexAttention run them; both are tested against
    ``reference`` with torch 2.13's CPU FlexAttention, forward only). With ``dropout_p > 0`` the
    mixed probabilities are computed eagerly with one dropout mask, as
    [`two_pass_mixed_attention`][structattn.attention.kernels.two_pass_mixed_attention] does (FlexAttention has no
    dropout). On CPU, torch 2.13's FlexAttention has no backward: a CPU call that needs gradients is refused with a
    [`UserError`][structattn.errors.UserError] (train on CPU with ``fused``). Returns out [b, h, n, d].
    """
    if (dropout_p == 0.0 and q.device.type == "cpu" and torch.is_grad_enabled()
            and any(t.requires_grad for t in (q, k, v, gate))):
        raise UserError("kernel 'flex' runs FlexAttention, which has no backward on CPU in torch 2.13; train on CPU "
                        "with kernel='fused' (or 'auto'), and use 'flex' on CUDA or for CPU inference")
    if dropout_p > 0.0:
        return reference_mixed_attention(q, k, v, local, gate, base, scale=scale, dropout_p=dropout_p)[0]
    sc = _scale(q, scale)
    pattern, block_mask = _flex_local_masks(local, base)
    o_glb = sdpa_attend(q, k, v, base, scale=sc, dropout_p=0.0)
    o_loc = flex_attend(q, k, v, pattern, scale=sc, block_mask=block_mask)
    return o_glb + _gate4(gate, o_glb.dtype) * (o_loc - o_glb)


# ---------------------------------------------------------------------------------------------- triton (GPU)

_TRITON_DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64)


def triton_mixed_attention(q: Tensor, k: Tensor, v: Tensor, local: Tensor, gate: Tensor,
                           base: Optional[Tensor] = None, *, scale: Optional[float] = None, dropout_p: float = 0.0,
                           seed: Optional[int] = None, block_m: Optional[int] = None,
                           block_n: Optional[int] = None) -> Tensor:
    """The fused Triton kernel (`structattn.attention.triton_kernel`): on CUDA, or on CPU tensors under
    Triton's interpreter (``TRITON_INTERPRET=1`` in the environment before Python starts; slow, for tests).

    float32, bfloat16 and float16 inputs run in their dtype with float32 accumulation (float64 inputs in float64,
    for gradient checks, under the interpreter only: Triton does not compile float64 products for a GPU); k and v
    are cast to q's dtype. Dropout uses the ``fused`` kernel's hash of ``seed``
    and the element index (the same seed gives the same mask); ``seed`` defaults to a draw from torch's generator.
    ``block_m`` / ``block_n``: query / key tile sizes, powers of two >= 16 (default 64 x 64; 64 x 32 for d > 64).
    Returns out [b, h, n, d] in q's dtype (laid out as [b, n, h, d] in memory, so ``out.transpose(1, 2)`` is
    contiguous).
    """
    block_m, block_n = check_triton_inputs(q, k, local, base, dropout_p, block_m, block_n)
    return triton_unchecked(q, k, v, local, gate, base, scale=_scale(q, scale), dropout_p=float(dropout_p), seed=seed,
                            block_m=block_m, block_n=block_n)


def check_triton_inputs(q: Tensor, k: Tensor, local: Tensor, base: Optional[Tensor], dropout_p: float = 0.0,
                        block_m: Optional[int] = None, block_n: Optional[int] = None) -> tuple[int, int]:
    """What [`triton_mixed_attention`][structattn.attention.kernels.triton_mixed_attention] checks before it runs
    (raises what it raises); returns the tile sizes (defaults filled in)."""
    if q.dtype not in _TRITON_DTYPES:
        raise UserError(f"kernel 'triton' takes float32, bfloat16, float16 or float64 inputs, got {q.dtype}")
    if q.dtype == torch.float64 and q.device.type != "cpu":
        # seen on an H100 with triton 3.6: the compiler aborts ("fp64 don't support largeK MMA")
        raise UserError("kernel 'triton' runs float64 only on CPU under Triton's interpreter (Triton cannot compile "
                        "its float64 products for a GPU); use kernel='reference' for float64 checks on CUDA")
    reason = triton_kernel.unavailable_reason(q.device)
    if reason is not None:
        raise UserError(f"kernel 'triton' cannot run here: {reason}")
    _check_masks(q, k, local, base)
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must lie in [0, 1), got {dropout_p}")
    b, h, n, d = q.shape
    if b * h * n >= 2 ** 31:
        raise ValueError(f"kernel 'triton' indexes rows in 32 bits: batch x heads x queries = {b * h * n} is too many")
    default_m, default_n = triton_kernel.default_blocks(d)
    block_m, block_n = block_m or default_m, block_n or default_n
    for name, size in (("block_m", block_m), ("block_n", block_n)):
        if size < 16 or size & (size - 1):
            raise ValueError(f"{name} must be a power of two >= 16, got {size}")
    return block_m, block_n


def triton_unchecked(q: Tensor, k: Tensor, v: Tensor, local: Tensor, gate: Tensor, base: Optional[Tensor], *,
                     scale: float, dropout_p: float, seed=None, block_m: Optional[int] = None,
                     block_n: Optional[int] = None) -> Tensor:
    """[`triton_mixed_attention`][structattn.attention.kernels.triton_mixed_attention] without its checks, for callers
    that checked the inputs and the kernel's availability once per step (the model integration): ``scale`` a float,
    ``seed`` an int or an int64 scalar tensor; default tile sizes when ``block_m`` / ``block_n`` are None."""
    default_m, default_n = triton_kernel.default_blocks(q.shape[-1])
    ct = _COMPUTE_DTYPE.get(q.dtype, torch.float32)
    k, v = (t if t.dtype == q.dtype else t.to(q.dtype) for t in (k, v))
    return triton_kernel.mixed_attention(q, k, v, local, gate if gate.dtype == ct else gate.to(ct), base,
                                         scale=scale, dropout_p=dropout_p, seed=_seed_or_draw(seed, dropout_p),
                                         block_m=block_m or default_m, block_n=block_n or default_n)


# device -> None (the check passed) or why ``auto`` does not run ``triton`` there
_triton_checked: dict[str, Optional[str]] = {}


def triton_available(device: torch.device | str = "cuda") -> bool:
    """Whether ``auto`` runs ``triton`` on ``device``: a CUDA device where the kernel can run
    (`triton_kernel.unavailable_reason`), Triton's interpreter is off, ``STRUCTATTN_NO_TRITON=1`` is not set,
    and [`triton_self_check`][structattn.attention.kernels.triton_self_check] passed on its first use there (once per
    device and process). A failed check warns with its reason; ``auto`` then runs ``exact``."""
    device = torch.device(device)
    if device.type != "cuda":
        return False
    key = str(device)
    if key not in _triton_checked:
        reason = _triton_auto_reason(device)
        if reason is None:
            reason = triton_self_check(device)
            if reason is not None:
                import warnings

                warnings.warn(f"structattn: the triton kernel failed its check on {device} ({reason}); kernel 'auto' "
                              "uses 'exact' there", RuntimeWarning, stacklevel=2)
        _triton_checked[key] = reason
    return _triton_checked[key] is None


def _triton_auto_reason(device: torch.device) -> Optional[str]:
    """Why ``auto`` does not try ``triton`` on ``device`` before any check runs (None: try it)."""
    import os

    if os.environ.get("STRUCTATTN_NO_TRITON") == "1":
        return "disabled by STRUCTATTN_NO_TRITON=1"
    reason = triton_kernel.unavailable_reason(device)
    if reason is None and triton_kernel.interpreted():
        return "TRITON_INTERPRET=1: Triton's interpreter is far too slow for a model"
    return reason


@torch.compiler.disable
def triton_self_check(device: torch.device | str, rtol: float = 2e-3, block_m: Optional[int] = None,
                      block_n: Optional[int] = None) -> Optional[str]:
    """Run ``triton`` on ``device`` against ``reference`` (forward and gradients of q, k, v and a per-head gate,
    head size 64, with padding, a fully padded example, two tiles of queries and of keys, the second partial;
    float32, float32 with dropout under the same keep mask, bfloat16), compiling the kernels it runs with the
    given tile sizes (default: the kernel's). Returns None when every result's error norm is within ``rtol`` of
    the reference's norm (15 ``rtol`` for bfloat16), else what differed or the error raised. (TF32 products give
    relative errors near 1e-3; a wrong kernel errs by far more.)"""
    device = torch.device(device)
    g = torch.Generator().manual_seed(0)
    d = 64
    default_m, default_n = triton_kernel.default_blocks(d)
    block_m, block_n = block_m or default_m, block_n or default_n
    b, h, n, m = 3, 2, block_m + block_m // 4, block_n + 3
    q, k, v = (torch.randn(b, h, rows, d, generator=g) for rows in (n, m, m))
    local = torch.rand(b, 1, n, m, generator=g) < 0.3
    base = torch.ones(b, 1, n, m, dtype=torch.bool)
    base[1, :, :, m - 5:] = False
    base[2] = False
    gate, weight = torch.rand(b, h, n, generator=g), torch.randn(b, h, n, d, generator=g)
    cases = [(torch.float32, 0.0, rtol), (torch.float32, 0.2, rtol), (torch.bfloat16, 0.0, 15 * rtol)]
    try:
        with torch.inference_mode(False), torch.enable_grad(), torch.autocast(device.type, enabled=False):
            for dtype, p, tol in cases:
                keep = triton_kernel.keep_mask(b, h, n, m, p, 7) if p else None
                args = [t.to(device) for t in (q, k, v, local, gate, base, weight)]
                got = _output_and_grads(lambda *a: triton_mixed_attention(*a, dropout_p=p, seed=7, block_m=block_m,
                                                                          block_n=block_n), args, dtype)
                want = _output_and_grads(lambda *a: reference_mixed_attention(
                    *a, dropout_p=p, keep=None if keep is None else keep.to(device))[0], args, torch.float32)
                for name, x, y in zip(("out", "dq", "dk", "dv", "dgate"), got, want):
                    err = float((x.float() - y).norm() / y.norm().clamp_min(1e-6))
                    if not err <= tol:
                        return f"{name} differs from the reference by {err:.3g} of its norm ({dtype}, dropout {p})"
    except Exception as exc:  # a compiler or driver error: the check failed
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
    return None


def _output_and_grads(fn, args, dtype):
    """(out, dq, dk, dv, dgate) of fn(q, k, v, local, gate, base) in ``dtype``, weighted by args[-1]."""
    q, k, v, local, gate, base, weight = args
    q, k, v, gate = (t.detach().to(dtype).requires_grad_() for t in (q, k, v, gate))
    out = fn(q, k, v, local, gate, base)
    (out.float() * weight).sum().backward()
    return out.detach(), q.grad, k.grad, v.grad, gate.grad


# ---------------------------------------------------------------------------------------------- registry


# The kernels a model may run, by the name ``MechanismConfig.kernel`` gives.
KERNELS: dict[str, Callable[..., Tensor]] = {
    "reference": _reference_kernel,
    "exact": two_pass_mixed_attention,
    "shared_exp": shared_exp_mixed_attention,
    "fused": fused_mixed_attention,
    "flex": flex_mixed_attention,
    "triton": triton_mixed_attention,
}
KERNEL_NAMES: tuple[str, ...] = ("auto", *KERNELS)
# The same kernels without their input checks, for a caller that ran the checked one on the same inputs' shapes
# and masks earlier in the step (the model integration); their arguments are those of the checked kernels.
UNCHECKED_KERNELS: dict[str, Callable[..., Tensor]] = {
    "fused": fused_unchecked,
    "triton": triton_unchecked,
}
# Their checks alone, (q, k, local, base, dropout_p) -> raises or returns: a caller runs them once per step and then
# only the unchecked kernels.
KERNEL_CHECKS: dict[str, Callable[..., object]] = {
    "fused": check_fused_inputs,
    "triton": check_triton_inputs,
}

# Kernels that only benchmarks run (see register_private_kernel); never valid in a configuration.
_PRIVATE_KERNELS: dict[str, Callable[..., Tensor]] = {}


def register_private_kernel(name: str, fn: Callable[..., Tensor]) -> None:
    """Make ``fn`` runnable under ``name`` by [`get_kernel`][structattn.attention.kernels.get_kernel] (for benchmarks).

    ``fn`` takes the arguments of every kernel (module docstring). The name stays out of `KERNELS`
    and `KERNEL_NAMES`, so no saved configuration can name it; a benchmark sets it on an installed
    mechanism.
    """
    if name in KERNEL_NAMES:
        raise ValueError(f"{name!r} is a public kernel name")
    _PRIVATE_KERNELS[name] = fn


def resolve_kernel_name(name: str, device: torch.device | str = "cpu") -> str:
    """``auto`` -> on CPU ``fused`` when the native kernel builds, on CUDA ``triton`` when
    [`triton_available`][structattn.attention.kernels.triton_available], else ``exact`` (module docstring); other names
    unchanged."""
    if name == "auto":
        device = torch.device(device)
        if device.type == "cpu" and fused_available():
            return "fused"
        if device.type == "cuda" and triton_available(device):
            return "triton"
        return "exact"
    if name not in KERNELS and name not in _PRIVATE_KERNELS:
        raise UserError(f"unknown kernel {name!r}; valid kernels: {', '.join(KERNEL_NAMES)}")
    return name


def get_kernel(name: str, device: torch.device | str = "cpu") -> Callable[..., Tensor]:
    """The kernel function for ``name`` (``auto`` resolved for ``device``)."""
    resolved = resolve_kernel_name(name, device)
    return KERNELS.get(resolved) or _PRIVATE_KERNELS[resolved]


def mixed_attention(q: Tensor, k: Tensor, v: Tensor, local: Tensor, gate: Tensor, base: Optional[Tensor] = None,
                    *, kernel: str = "auto", scale: Optional[float] = None, dropout_p: float = 0.0) -> Tensor:
    """Gated local/global attention with the named kernel. Shapes: see the module docstring."""
    return get_kernel(kernel, q.device)(q, k, v, local, gate, base, scale=scale, dropout_p=dropout_p)


def finite_min(dtype: torch.dtype) -> float:
    """The most negative finite value of ``dtype`` (what HF's eager masks use for 'may not attend')."""
    return torch.finfo(dtype).min


__all__ = ["KERNELS", "KERNEL_NAMES", "UNDERFLOW_GAP", "dropout_keep_mask", "finite_min", "flex_attend",
           "flex_block_mask", "flex_mixed_attention", "fused_available",
           "fused_mixed_attention", "get_kernel", "local_pattern", "mixed_attention", "reference_mixed_attention",
           "register_private_kernel", "resolve_kernel_name", "sdpa_attend", "shared_exp_mixed_attention",
           "triton_available", "triton_mixed_attention", "triton_self_check", "two_pass_mixed_attention"]
