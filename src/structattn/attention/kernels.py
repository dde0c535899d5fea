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

Kernels (registry :data:`KERNELS`):
    reference            plain: two softmaxes, explicit blend of probabilities, one P v (eager, autograd)
    official             the SLA authors' form: two softmaxes, two P v, outputs mixed (eager; benchmarks)
    exact                two passes of the stock kernel (SDPA by default), outputs mixed as
                         O_glb + g * (O_loc - O_glb): at g = 0 and for an all-True local mask it reproduces
                         the stock kernel bit for bit
    shared_exp           one exponential shared by both softmaxes, one P v (eager, autograd), with the
                         underflow guard described at :func:`shared_exp_mixed_attention`
    shared_exp_compiled  the same, compiled with ``torch.compile(dynamic=False)``
    fused                native CPU kernel (:mod:`structattn.attention.native`): shared exponential in one
                         pass per row, flash-style recompute in backward (saves only per-row statistics)
"""
from __future__ import annotations

from typing import Callable, Optional

import torch
import torch.nn.functional as F

from ..errors import UserError
from . import native

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

    Computed in float32 whatever the input dtype. ``keep`` ([b, h, n, m] bool) fixes the dropout mask
    (elements scaled by 1 / (1 - dropout_p)); otherwise ``F.dropout`` draws one when training.

    Returns:
        out [b, h, n, d] in q's dtype, and the mixed probabilities P [b, h, n, m] (float32, before dropout).
    """
    dtype = q.dtype
    qf, kf, vf = q.float(), k.float(), v.float()
    s = torch.matmul(qf, kf.transpose(-1, -2)) * _scale(q, scale)
    p_glb = _masked_softmax(s, base)
    p_loc = _masked_softmax(s, local_pattern(local, base))
    g = _gate4(gate, torch.float32)
    probs = (1.0 - g) * p_glb + g * p_loc
    dropped = probs
    if keep is not None:
        dropped = probs * keep / (1.0 - dropout_p)
    elif dropout_p > 0.0 and training:
        dropped = F.dropout(probs, p=dropout_p, training=True)
    return torch.matmul(dropped, vf).to(dtype), probs


def _reference_kernel(q, k, v, local, gate, base=None, *, scale=None, dropout_p=0.0):
    return reference_mixed_attention(q, k, v, local, gate, base, scale=scale, dropout_p=dropout_p)[0]


def official_mixed_attention(q: Tensor, k: Tensor, v: Tensor, local: Tensor, gate: Tensor,
                             base: Optional[Tensor] = None, *, scale: Optional[float] = None,
                             dropout_p: float = 0.0, training: bool = True) -> Tensor:
    """The SLA authors' formulation, for comparison: two masked softmaxes, two P v, outputs mixed.

    Eager, in the input dtype (masks as additive finite minima, like HF's eager path). Returns
    out [b, h, n, d].
    """
    s = torch.matmul(q, k.transpose(-1, -2)) * _scale(q, scale)
    neg = torch.finfo(s.dtype).min
    zero = torch.zeros((), dtype=s.dtype, device=s.device)
    s_glb = s if base is None else s + torch.where(base, zero, neg)
    s_loc = s + torch.where(local_pattern(local, base), zero, neg)
    p_glb = F.dropout(torch.softmax(s_glb, dim=-1), p=dropout_p, training=training and dropout_p > 0)
    p_loc = F.dropout(torch.softmax(s_loc, dim=-1), p=dropout_p, training=training and dropout_p > 0)
    g = _gate4(gate, s.dtype)
    out = (1.0 - g) * torch.matmul(p_glb, v) + g * torch.matmul(p_loc, v)
    return out if base is None else out * base.any(dim=-1, keepdim=True)  # rows without keys give 0


# ---------------------------------------------------------------------------------------------- exact


def sdpa_attend(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor], *, scale: float,
                dropout_p: float) -> Tensor:
    """One stock SDPA call: q [b, h, n, d], mask [b, 1|h, n, m] bool or None -> [b, h, n, d]."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=scale)


def two_pass_mixed_attention(q: Tensor, k: Tensor, v: Tensor, local: Tensor, gate: Tensor,
                             base: Optional[Tensor] = None, *, scale: Optional[float] = None,
                             dropout_p: float = 0.0,
                             attend: Optional[Callable[..., Tensor]] = None) -> Tensor:
    """Two passes of the stock kernel, mixed on the outputs: out = O_glb + g (O_loc - O_glb).

    ``attend(q, k, v, mask, scale=, dropout_p=)`` is the stock kernel (default: SDPA with a bool mask);
    the global pass gets ``base`` unchanged, the local pass :func:`local_pattern`. Because O_glb is the
    stock kernel's own output, g = 0 reproduces it bit for bit, and so does an all-True local mask (the
    local pass then sees the very same mask). With dropout the two passes draw independent masks.
    Returns out [b, h, n, d].
    """
    attend = attend or sdpa_attend
    sc = _scale(q, scale)
    o_glb = attend(q, k, v, base, scale=sc, dropout_p=dropout_p)
    o_loc = attend(q, k, v, local_pattern(local, base), scale=sc, dropout_p=dropout_p)
    return o_glb + _gate4(gate, o_glb.dtype) * (o_loc - o_glb)


# ---------------------------------------------------------------------------------------------- shared exponential


def shared_exp_mixed_attention(q: Tensor, k: Tensor, v: Tensor, local: Tensor, gate: Tensor,
                               base: Optional[Tensor] = None, *, scale: Optional[float] = None,
                               dropout_p: float = 0.0, training: bool = True,
                               branch_free: bool = False) -> Tensor:
    """One shared exponential: E = exp(s - rowmax), P = E ((1 - g) / sum E + g L / sum(E L)), out = P v.

    Underflow guard: where the local row maximum lies more than :data:`UNDERFLOW_GAP` below the global
    one, E L would underflow, so those rows take their local part from exp(s - local max) instead.
    ``branch_free`` computes that fallback for every row and selects with ``torch.where`` (no
    data-dependent Python branch, for ``torch.compile``); otherwise it is computed only when a row needs
    it. Computed in float32. Returns out [b, h, n, d] in q's dtype.
    """
    dtype = q.dtype
    qf, kf, vf = q.float(), k.float(), v.float()
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
    g = _gate4(gate, torch.float32)
    probs = e * ((1.0 - g) / z_glb) + e_loc * (g / z_loc)
    if dropout_p > 0.0 and training:
        probs = F.dropout(probs, p=dropout_p, training=True)
    return torch.matmul(probs, vf).to(dtype)


_compiled_shared_exp = None


def compiled_shared_exp_mixed_attention(q: Tensor, k: Tensor, v: Tensor, local: Tensor, gate: Tensor,
                                        base: Optional[Tensor] = None, *, scale: Optional[float] = None,
                                        dropout_p: float = 0.0) -> Tensor:
    """:func:`shared_exp_mixed_attention` (branch-free) compiled with ``torch.compile(dynamic=False)``.

    Compiles once per shape and mask layout. Returns out [b, h, n, d].
    """
    global _compiled_shared_exp
    if _compiled_shared_exp is None:
        _compiled_shared_exp = torch.compile(shared_exp_mixed_attention, dynamic=False)
    return _compiled_shared_exp(q, k, v, local, gate, base, scale=_scale(q, scale), dropout_p=dropout_p,
                                branch_free=True)


# ---------------------------------------------------------------------------------------------- fused (native)


@torch.library.custom_op("structattn::mixed_attention_forward", mutates_args=(), device_types="cpu")
def _native_forward(q: Tensor, k: Tensor, v: Tensor, base: Optional[Tensor], local: Tensor, gate: Tensor,
                    scale: float, dropout_p: float, seed: int) -> tuple[Tensor, Tensor]:
    ext = native.load()
    if ext is None:
        raise RuntimeError(f"the fused attention kernel is not available: {native.failure()}")
    out, stats = ext.mixed_forward(q, k, v, base, local, gate, scale, dropout_p, seed)
    return out, stats


@_native_forward.register_fake
def _native_forward_fake(q, k, v, base, local, gate, scale, dropout_p, seed):
    b, h, n, d = q.shape
    out = q.new_empty((b, n, h, d)).permute(0, 2, 1, 3)
    return out, q.new_empty((b, h, n, 4))


@torch.library.custom_op("structattn::mixed_attention_backward", mutates_args=(), device_types="cpu")
def _native_backward(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, base: Optional[Tensor], local: Tensor,
                     gate: Tensor, stats: Tensor, scale: float, dropout_p: float,
                     seed: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    ext = native.load()
    dq, dk, dv, dg = ext.mixed_backward(dout, q, k, v, base, local, gate, stats, scale, dropout_p, seed)
    return dq, dk, dv, dg


@_native_backward.register_fake
def _native_backward_fake(dout, q, k, v, base, local, gate, stats, scale, dropout_p, seed):
    b, h, n, d = q.shape
    m = k.shape[2]
    return (q.new_empty((b, n, h, d)).permute(0, 2, 1, 3), q.new_empty((b, m, h, d)).permute(0, 2, 1, 3),
            q.new_empty((b, m, h, d)).permute(0, 2, 1, 3), q.new_empty((b, h, n)))


def _native_setup_context(ctx, inputs, output):
    q, k, v, base, local, gate, scale, dropout_p, seed = inputs
    ctx.save_for_backward(q, k, v, base, local, gate, output[1])
    ctx.scale, ctx.dropout_p, ctx.seed = scale, dropout_p, seed


def _native_autograd(ctx, dout, dstats):
    q, k, v, base, local, gate, stats = ctx.saved_tensors
    if dout.stride(-1) != 1:
        dout = dout.contiguous()
    dq, dk, dv, dg = _native_backward(dout, q, k, v, base, local, gate, stats, ctx.scale, ctx.dropout_p, ctx.seed)
    if gate.shape[1] == 1:
        dg = dg.sum(dim=1, keepdim=True)
    return dq, dk, dv, None, None, dg, None, None, None


torch.library.register_autograd("structattn::mixed_attention_forward", _native_autograd,
                                setup_context=_native_setup_context)


def _unit_last(t: Tensor) -> Tensor:
    return t if t.stride(-1) == 1 else t.contiguous()


def fused_available() -> bool:
    """Whether the native kernel builds on this machine (builds it on the first call)."""
    return native.load() is not None


def fused_mixed_attention(q: Tensor, k: Tensor, v: Tensor, local: Tensor, gate: Tensor,
                          base: Optional[Tensor] = None, *, scale: Optional[float] = None,
                          dropout_p: float = 0.0, seed: Optional[int] = None) -> Tensor:
    """The native fused kernel (CPU, float32 inside; other dtypes are upcast and the output cast back).

    Dropout (when ``dropout_p > 0``) uses a hash of ``seed`` and the element index; ``seed`` defaults to a
    draw from torch's generator, so ``torch.manual_seed`` makes it reproducible. Returns out [b, h, n, d]
    (a view of a [b, n, h, d] buffer, so ``out.transpose(1, 2)`` is contiguous).
    """
    if q.device.type != "cpu":
        raise UserError("kernel 'fused' runs on CPU only; use kernel='exact' (or 'auto') on other devices")
    dtype = q.dtype
    qf, kf, vf = (_unit_last(t.float()) for t in (q, k, v))
    h = q.shape[1]
    b, n, m = q.shape[0], q.shape[2], k.shape[2]
    for name, mask in (("local", local), ("base", base)):
        if mask is not None and (mask.dim() != 4 or mask.shape[0] not in (1, b) or mask.shape[1] not in (1, h)
                                 or mask.shape[2] not in (1, n) or mask.shape[3] != m or mask.dtype != torch.bool):
            raise ValueError(f"{name} mask must be bool [b|1, h|1, n|1, m], got {tuple(mask.shape)} {mask.dtype}")
    local = _unit_last(local)
    base = None if base is None else _unit_last(base)
    if dropout_p > 0.0 and seed is None:
        seed = int(torch.randint(0, 2 ** 62, ()).item())
    out, _ = _native_forward(qf, kf, vf, base, local, gate.float().contiguous(), _scale(q, scale),
                             float(dropout_p), int(seed or 0))
    return out if dtype == torch.float32 else out.to(dtype)


def dropout_keep_mask(b: int, h: int, n: int, m: int, dropout_p: float, seed: int) -> Tensor:
    """The keep mask [b, h, n, m] bool that the fused kernel uses for (dropout_p, seed); for tests."""
    ext = native.load()
    if ext is None:
        raise RuntimeError(f"the fused attention kernel is not available: {native.failure()}")
    return ext.dropout_keep(b, h, n, m, float(dropout_p), int(seed))


# ---------------------------------------------------------------------------------------------- registry


KERNELS: dict[str, Callable[..., Tensor]] = {
    "reference": _reference_kernel,
    "official": official_mixed_attention,
    "exact": two_pass_mixed_attention,
    "shared_exp": shared_exp_mixed_attention,
    "shared_exp_compiled": compiled_shared_exp_mixed_attention,
    "fused": fused_mixed_attention,
}


def resolve_kernel_name(name: str, device: torch.device | str = "cpu") -> str:
    """``auto`` -> ``fused`` on CPU when the native kernel builds, else ``exact``; other names unchanged."""
    if name == "auto":
        if torch.device(device).type == "cpu" and fused_available():
            return "fused"
        return "exact"
    if name not in KERNELS:
        raise UserError(f"unknown kernel {name!r}; valid kernels: auto, {', '.join(KERNELS)}")
    return name


def get_kernel(name: str, device: torch.device | str = "cpu") -> Callable[..., Tensor]:
    """The kernel function for ``name`` (``auto`` resolved for ``device``)."""
    return KERNELS[resolve_kernel_name(name, device)]


def mixed_attention(q: Tensor, k: Tensor, v: Tensor, local: Tensor, gate: Tensor, base: Optional[Tensor] = None,
                    *, kernel: str = "auto", scale: Optional[float] = None, dropout_p: float = 0.0) -> Tensor:
    """Gated local/global attention with the named kernel. Shapes: see the module docstring."""
    return get_kernel(kernel, q.device)(q, k, v, local, gate, base, scale=scale, dropout_p=dropout_p)


def finite_min(dtype: torch.dtype) -> float:
    """The most negative finite value of ``dtype`` (what HF's eager masks use for 'may not attend')."""
    return torch.finfo(dtype).min


__all__ = ["KERNELS", "UNDERFLOW_GAP", "compiled_shared_exp_mixed_attention", "dropout_keep_mask", "finite_min",
           "fused_available", "fused_mixed_attention", "get_kernel", "local_pattern", "mixed_attention",
           "official_mixed_attention",
           "reference_mixed_attention", "resolve_kernel_name", "sdpa_attend", "shared_exp_mixed_attention",
           "two_pass_mixed_attention"]
