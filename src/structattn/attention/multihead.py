"""Multi-head building blocks shared by the chart parser's attention layers (self-attention, BiMSA, NSA) and
SG-Net's syntax-guided layer: masked attention (with its plain twin), head split and merge, padding masks.

Notation: b batch, T positions, H heads of size e. A sentence of ``L_b`` words is ``[START, w_1 .. w_{L_b}, STOP]``:
positions 0 .. L_b + 1 are real, the rest padding. Masks are bool, True = may attend, ``[b, 1, T_q, T_k]``; a padded
query row attends to itself only, so no row is ever all False.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

Tensor = torch.Tensor


def check_lengths(h: Tensor, lengths: Tensor, min_words: int = 0) -> None:
    """Fail unless every sentence fits: ``min_words <= lengths <= T - 2`` (one host sync per call).

    A sentence longer than T - 2 would have its STOP or words cut off by the masks without notice.
    """
    if lengths.dim() != 1 or lengths.shape[0] != h.shape[0]:
        raise ValueError(f"lengths must have shape [{h.shape[0]}], got {tuple(lengths.shape)}")
    if lengths.numel():
        lo, hi = int(lengths.min()), int(lengths.max())
        if lo < min_words or hi + 2 > h.shape[1]:
            raise ValueError(f"sentence lengths must lie in {min_words} .. T - 2 = {h.shape[1] - 2} words "
                             f"(START and STOP take two positions), got {lo} .. {hi}")


def valid_positions(lengths: Tensor, size: int) -> Tensor:
    """[b] words per sentence -> [b, size] bool, True at the real positions 0 .. L_b + 1."""
    return torch.arange(size, device=lengths.device).unsqueeze(0) < (lengths + 2).unsqueeze(1)


def self_attention_mask(lengths: Tensor, size: int, allowed: Tensor | None = None) -> Tensor:
    """Key-padding mask for self-attention, optionally restricted by a position pattern.

    lengths [b], size = T, allowed [T, T] bool (query i may see key j) or None -> [b, 1, T, T] bool.
    Real query rows see the real keys that ``allowed`` permits; padded query rows see only themselves.
    ``allowed`` must keep the diagonal, or a real row could be left empty.
    """
    real = valid_positions(lengths, size)
    mask = real.unsqueeze(2) & real.unsqueeze(1)  # [b, T, T]
    if allowed is not None:
        mask = mask & allowed
    eye = torch.eye(size, dtype=torch.bool, device=lengths.device)
    mask = mask | (eye & ~real.unsqueeze(2))
    return mask.unsqueeze(1)


def split_heads(x: Tensor, heads: int) -> Tensor:
    """[b, n, heads * e] -> [b, heads, n, e]."""
    b, n, _ = x.shape
    return x.view(b, n, heads, -1).transpose(1, 2)


def merge_heads(x: Tensor) -> Tensor:
    """[b, heads, n, e] -> [b, n, heads * e]."""
    b, heads, n, e = x.shape
    return x.transpose(1, 2).reshape(b, n, heads * e)


def masked_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor, dropout_p: float = 0.0) -> Tensor:
    """Scaled dot-product attention, softmax(q k^T / sqrt(e)) v over the True keys of ``mask`` (SDPA).

    q [b, H, n, e], k [b, H, m, e], v [b, H, m, e_v], mask [b, 1|H, n, m] bool (every row has a True)
    -> [b, H, n, e_v]. ``dropout_p`` > 0 drops attention weights (pass 0 outside training).
    """
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=q.shape[-1] ** -0.5)


def reference_masked_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor, dropout_p: float = 0.0) -> Tensor:
    """Plain twin of `masked_attention`: the masked softmax written out (autograd gives its gradients).

    Shapes as there. ``dropout_p`` > 0 drops attention weights (kept ones scaled by 1 / (1 - p)), as SDPA does.
    """
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    probs = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    if dropout_p > 0.0:
        probs = F.dropout(probs, p=dropout_p, training=True)
    return torch.matmul(probs, v)
