"""Bidirectional masked self-attention (BiMSA; BNA Eq. 12-14).

Notation: b batch, T positions, d = d_model, H heads, e = d_head (even).

One set of queries and keys gives one score matrix ``q_i . k_j / sqrt(e)``; two hard masks are added to it
(Eq. 12-13):

* the backward mask M^B lets query i see keys j <= i (``relations.backward_masks``): a LEFT-context summary;
* the forward mask M^F lets query i see keys j >= i (``relations.forward_masks``): a RIGHT-context summary.

Both softmaxes weight the same values ``v_j`` (Eq. 14), of size e / 2 per head (footnote 3, Appendix A.1: "the
value size was halved ... for split forward and backward computations"), so the two directional outputs
together are as wide as one ordinary attention output. Each direction's concatenated heads (H * e / 2) go
through its own output matrix to d / 2, and the two halves are concatenated, so each half of the output is
still purely directional at the attention output (the residual and LayerNorm of the block mix them later).

Output order: ``[left (j <= i) ; right (j >= i)]``. This is the reverse of the paper's Eq. 14 order
``[h^F ; h^B]``: the paper's "forward" mask M^F (i <= j) looks to the RIGHT, unlike a forward LSTM, and the
span features of `structattn.bna.fenceposts` read the first half as the left summary a_k and the
second half as the right summary c_k (V_ij = [a_j - a_i ; c_{i+1} - c_{j+1}]). With this order both
differences cover exactly the words i + 1 .. j; with the paper's order they would not.

Padding keys are excluded; padded query rows attend to themselves only.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ..attention.multihead import check_lengths, masked_attention, merge_heads, self_attention_mask, split_heads
from ..structure.relations import get_relation

Tensor = torch.Tensor


def directional_masks(lengths: Tensor, size: int) -> tuple[Tensor, Tensor]:
    """lengths [b], size = T -> (left [b, 1, T, T], right [b, 1, T, T]) bool.

    left: query i sees real keys j <= i (M^B); right: real keys j >= i (M^F). Padded query rows see themselves.
    """
    left = self_attention_mask(lengths, size, _position_relation("backward", size, lengths.device))
    right = self_attention_mask(lengths, size, _position_relation("forward", size, lengths.device))
    return left, right


def _position_relation(name: str, size: int, device: torch.device) -> Tensor:
    """[T, T] bool: the structure relation ``name`` over T positions; ``forward`` and ``backward`` depend on
    positions only, so any tree (here: every position a root) gives them."""
    return torch.from_numpy(get_relation(name).fn(np.zeros((1, size), dtype=np.int64))[0]).to(device)


class BiMSA(nn.Module):
    """Bidirectional masked self-attention. h [b, T, d], lengths [b] -> [b, T, d] = [left d/2 ; right d/2].

    Parameters: query, key d -> H * e; value d -> H * e / 2 (shared by both directions, Eq. 14);
    out_left, out_right H * e / 2 -> d / 2.
    """

    def __init__(self, d_model: int, heads: int, d_head: int, attn_dropout: float = 0.0):
        super().__init__()
        if d_model % 2 or d_head % 2:
            raise ValueError(f"BiMSA halves the model and value sizes: d_model ({d_model}) and d_head ({d_head}) "
                             "must be even")
        self.heads, self.d_head, self.attn_dropout = heads, d_head, attn_dropout
        self.query = nn.Linear(d_model, heads * d_head, bias=False)
        self.key = nn.Linear(d_model, heads * d_head, bias=False)
        self.value = nn.Linear(d_model, heads * d_head // 2, bias=False)
        self.out_left = nn.Linear(heads * d_head // 2, d_model // 2)
        self.out_right = nn.Linear(heads * d_head // 2, d_model // 2)

    def forward(self, h: Tensor, lengths: Tensor) -> Tensor:
        check_lengths(h, lengths)
        q, k, v = (split_heads(proj(h), self.heads) for proj in (self.query, self.key, self.value))
        left_mask, right_mask = directional_masks(lengths, h.shape[1])
        dropout = self.attn_dropout if self.training else 0.0
        left = masked_attention(q, k, v, left_mask, dropout)  # [b, H, T, e/2]
        right = masked_attention(q, k, v, right_mask, dropout)
        return torch.cat([self.out_left(merge_heads(left)), self.out_right(merge_heads(right))], dim=-1)
