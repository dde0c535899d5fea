"""Post-LN transformer encoder layers for the chart parser (BNA, Eq. 10-11) and the plain self-attention baseline.

Notation: b batch, T positions, d = d_model, H heads of size d_head. A sentence of ``L_b`` words is the sequence
``[START, w_1 .. w_{L_b}, STOP]``: positions 0 .. L_b + 1 are real, the rest (up to T >= max L_b + 2) padding.
Every attention module here takes ``(h [b, T, d], lengths [b] long)`` and returns ``[b, T, d]``.

Masks are bool, True = may attend, shaped ``[b, 1, T_q, T_k]`` (broadcast over heads). A padded query row
attends to itself only, so no row is ever all False (softmax over nothing would be NaN).

`LAYER_KINDS` maps a layer name ("sa", "bimsa", "nsa") to a factory of `TransformerBlock`;
`build_layer` looks it up and fails with a [`UserError`][structattn.errors.UserError] naming the valid kinds.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import UserError
from ..attention.multihead import check_lengths, masked_attention, merge_heads, self_attention_mask, split_heads

Tensor = torch.Tensor


# --------------------------------------------------------------------------------------------- layers


class FeedForward(nn.Module):
    """Position-wise FFN: Linear(d, d_ff) - ReLU - dropout - Linear(d_ff, d). [b, T, d] -> [b, T, d]."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff)
        self.w2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, h: Tensor) -> Tensor:
        return self.w2(self.dropout(F.relu(self.w1(h))))


class TransformerBlock(nn.Module):
    """Post-LN encoder layer around any attention module (BNA Eq. 10-11).

        h' = LN(h + drop(attn(h, lengths))),   out = LN(h' + drop(FFN(h')))

    ``drop`` is the residual dropout; the FFN has its own inner dropout. h [b, T, d], lengths [b] -> [b, T, d].
    """

    def __init__(self, attention: nn.Module, d_model: int, d_ff: int,
                 residual_dropout: float = 0.0, ff_dropout: float = 0.0):
        super().__init__()
        self.attention = attention
        self.attn_norm = nn.LayerNorm(d_model)
        self.ffn = FeedForward(d_model, d_ff, ff_dropout)
        self.ffn_norm = nn.LayerNorm(d_model)
        self.residual_dropout = nn.Dropout(residual_dropout)

    def forward(self, h: Tensor, lengths: Tensor) -> Tensor:
        h = self.attn_norm(h + self.residual_dropout(self.attention(h, lengths)))
        return self.ffn_norm(h + self.residual_dropout(self.ffn(h)))


class SelfAttention(nn.Module):
    """Plain multi-head self-attention over the real positions (the baseline of BNA's ablations).

    h [b, T, d], lengths [b] -> [b, T, d]. Q, K, V: d -> H * d_head (no bias, as in Kitaev & Klein 2018);
    output projection H * d_head -> d.
    """

    def __init__(self, d_model: int, heads: int, d_head: int, attn_dropout: float = 0.0):
        super().__init__()
        self.heads, self.d_head, self.attn_dropout = heads, d_head, attn_dropout
        self.query = nn.Linear(d_model, heads * d_head, bias=False)
        self.key = nn.Linear(d_model, heads * d_head, bias=False)
        self.value = nn.Linear(d_model, heads * d_head, bias=False)
        self.out = nn.Linear(heads * d_head, d_model)

    def forward(self, h: Tensor, lengths: Tensor) -> Tensor:
        check_lengths(h, lengths)
        q, k, v = (split_heads(proj(h), self.heads) for proj in (self.query, self.key, self.value))
        mask = self_attention_mask(lengths, h.shape[1])
        return self.out(merge_heads(masked_attention(q, k, v, mask, self.attn_dropout if self.training else 0.0)))


# --------------------------------------------------------------------------------------------- registry


def _sa(d_model: int, heads: int, d_head: int, attn_dropout: float, ngram: int) -> nn.Module:
    return SelfAttention(d_model, heads, d_head, attn_dropout)


def _bimsa(d_model: int, heads: int, d_head: int, attn_dropout: float, ngram: int) -> nn.Module:
    from .bimsa import BiMSA  # bimsa imports the functions above: a module-level import would be circular

    return BiMSA(d_model, heads, d_head, attn_dropout)


def _nsa(d_model: int, heads: int, d_head: int, attn_dropout: float, ngram: int) -> nn.Module:
    from .nsa import NgramSpanAttention  # see _bimsa

    return NgramSpanAttention(d_model, heads, d_head, ngram, attn_dropout)


AttentionFactory = Callable[[int, int, int, float, int], nn.Module]

#: layer name -> attention factory ``(d_model, heads, d_head, attn_dropout, ngram) -> module``;
#: `build_layer` wraps the module in a `TransformerBlock`.
LAYER_KINDS: dict[str, AttentionFactory] = {"sa": _sa, "bimsa": _bimsa, "nsa": _nsa}


def build_layer(kind: str, d_model: int = 256, heads: int = 8, d_head: int = 32, d_ff: int = 512,
                residual_dropout: float = 0.2, ff_dropout: float = 0.2, attn_dropout: float = 0.2,
                ngram: int = 4) -> TransformerBlock:
    """One encoder layer of the named kind ("sa", "bimsa" or "nsa"); ``ngram`` is used by "nsa" only.

    Defaults are the paper's PTB dropouts (Appendix A.1) at this project's smaller model size.
    """
    try:
        factory = LAYER_KINDS[kind]
    except KeyError:
        raise UserError(f"unknown layer kind {kind!r}; valid kinds: {', '.join(sorted(LAYER_KINDS))}") from None
    attention = factory(d_model, heads, d_head, attn_dropout, ngram)
    return TransformerBlock(attention, d_model, d_ff, residual_dropout, ff_dropout)
