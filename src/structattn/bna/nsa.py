"""N-gram span attention (NSA; BNA Eq. 15-17, Appendix A.3).

Notation: b batch, T = L + 2 positions, d = d_model (even), H heads of size e, n the n-gram order,
S the number of spans.

From the layer input H, every span of 1 .. n words (fenceposts i < j <= i + n) gets the fencepost vector
``V_ij = [a_j - a_i ; c_{i+1} - c_{j+1}]`` (`structattn.bna.fenceposts.span_vectors`, Eq. 15), the
spans ordered by length then start (Eq. 16's ``[H_1gram, ..., H_ngram]``). Queries come from the words
(all T positions, START and STOP included), keys and values from the spans (Eq. 17); each word attends over
the spans that lie inside its sentence.

Cost: the span matrix is [b, S, d] with S = sum_{g <= n} (L + 1 - g) <= n * L, linear in n and in L. The
attention is not: each of the T = L + 2 words attends over every span of its sentence, so the scores and weights
are [b, H, T, S], about n * L^2 entries per head - quadratic in the sentence length like self-attention's
[b, H, T, T], and about n times as large (at a fixed L, time and memory grow linearly in n, see
``results/bench_nsa_cpu.md``). A form linear in L (each word attending only the spans that contain or touch
it) is not built here.
"""
from __future__ import annotations

import torch
from torch import nn

from .fenceposts import ngram_spans, span_vectors
from ..attention.multihead import check_lengths, masked_attention, merge_heads, split_heads

Tensor = torch.Tensor


class NgramSpanAttention(nn.Module):
    """Words attend to n-gram span vectors. h [b, T, d], lengths [b] (>= 1 word each) -> [b, T, d].

    Parameters: query d -> H * e (from words); key, value d -> H * e (from spans); out H * e -> d.
    Padded query rows attend to their sentence's spans like real rows (their output is never read, and a
    sentence of >= 1 word always has >= 1 span, so no softmax row is empty).
    """

    def __init__(self, d_model: int, heads: int, d_head: int, n: int = 4, attn_dropout: float = 0.0):
        super().__init__()
        if d_model % 2:
            raise ValueError(f"span vectors split the hidden state in halves: d_model ({d_model}) must be even")
        if n < 1:
            raise ValueError(f"n-gram order must be >= 1, got {n}")
        self.heads, self.d_head, self.n, self.attn_dropout = heads, d_head, n, attn_dropout
        self.query = nn.Linear(d_model, heads * d_head, bias=False)
        self.key = nn.Linear(d_model, heads * d_head, bias=False)
        self.value = nn.Linear(d_model, heads * d_head, bias=False)
        self.out = nn.Linear(heads * d_head, d_model)

    def spans(self, h: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """The n-gram span matrix: (spans [b, S, d], valid [b, S] bool)."""
        starts, ends, valid = ngram_spans(lengths, self.n, h.shape[1] - 2)
        return span_vectors(h, starts, ends), valid

    def forward(self, h: Tensor, lengths: Tensor) -> Tensor:
        check_lengths(h, lengths, min_words=1)
        spans, valid = self.spans(h, lengths)
        q = split_heads(self.query(h), self.heads)  # [b, H, T, e]
        k = split_heads(self.key(spans), self.heads)  # [b, H, S, e]
        v = split_heads(self.value(spans), self.heads)
        mask = valid[:, None, None, :]  # [b, 1, 1, S]: every query row of a sentence sees its spans
        return self.out(merge_heads(masked_attention(q, k, v, mask, self.attn_dropout if self.training else 0.0)))
