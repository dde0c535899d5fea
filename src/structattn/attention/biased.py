"""Attention with an additive bias on the scores: the kernel of the Gaussian locality baselines.

Notation: b batch, h heads (H: 1 or h), n queries, m keys, d head size.

    out_i = softmax over base(scale * q_i k^T + bias_i) @ v

Inputs:
    q       [b, h, n, d]            queries
    k, v    [b, h, m, d]            keys and values
    bias    [b, 1|h, n, m] float    added to the scaled scores (a Gaussian log-weight; 0 = stock attention)
    base    [b, 1|h, n, m] bool or None
                                    the stock model's mask (True = may attend); None = every key
Row rule (as in [`kernels`][structattn.attention.kernels]): a row whose base row is empty (a fully padded example) gives
0.

`biased_attention` is the fast path (one SDPA call with a float mask, so the stock fused CPU/GPU
kernels run it, backward included); `reference_biased_attention` is its plain twin, tested against it.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

Tensor = torch.Tensor


def _scale(q: Tensor, scale: Optional[float]) -> float:
    return q.shape[-1] ** -0.5 if scale is None else float(scale)


def reference_biased_attention(q: Tensor, k: Tensor, v: Tensor, bias: Tensor, base: Optional[Tensor] = None, *,
                               scale: Optional[float] = None) -> tuple[Tensor, Tensor]:
    """Plain formulation in float32 (float64 for float64 inputs), no dropout.

    Returns out [b, h, n, d] in q's dtype and the probabilities [b, h, n, m] (zero rows where base is empty).
    """
    ct = torch.promote_types(q.dtype, torch.float32)
    s = torch.matmul(q.to(ct), k.to(ct).transpose(-1, -2)) * _scale(q, scale) + bias.to(ct)
    if base is None:
        probs = torch.softmax(s, dim=-1)
    else:
        has_key = base.any(dim=-1, keepdim=True)
        s = s.masked_fill(~base, float("-inf"))
        s = torch.where(has_key, s, torch.zeros((), dtype=ct, device=s.device))
        probs = torch.softmax(s, dim=-1) * has_key
    return torch.matmul(probs, v.to(ct)).to(q.dtype), probs


def biased_attention(q: Tensor, k: Tensor, v: Tensor, bias: Tensor, base: Optional[Tensor] = None, *,
                     scale: Optional[float] = None, dropout_p: float = 0.0) -> Tensor:
    """One SDPA call with the float mask ``bias`` (-inf where base is False): out [b, h, n, d].

    Dropout (``dropout_p > 0``) is SDPA's, on the biased probabilities. The bias is cast to q's dtype.
    """
    bias = bias.to(q.dtype)
    empty = None
    if base is not None:
        empty = ~base.any(dim=-1, keepdim=True)  # [b, 1|h, n, 1]: fully padded rows
        # -inf outside base; an empty row keeps finite values (its output is zeroed below), so no NaN.
        bias = bias.masked_fill(~base & ~empty, float("-inf"))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=dropout_p, scale=_scale(q, scale))
    if empty is not None:
        out = out.masked_fill(empty, 0.0)
    return out
