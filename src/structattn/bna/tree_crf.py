"""A tree CRF over the chart: the loss SuPar's CRF constituency parser trains with, on our span label scores.

A labelled binary tree over L words scores the sum of its spans' label scores (``scores[i, j, label]``; label 0,
"no constituent", scores 0, as `SpanLabelScorer` makes it), with the whole-sentence span's label not 0, as
`cky_decode` forces. The CRF's probability of a tree is exp(score) / Z, Z summing exp over every labelled binary
tree; the inside algorithm computes log Z in O(L^3) with span weights logsumexp over the labels.

A gold tree is n-ary: several binary trees (its binarisations, the spans they add labelled 0) stand for it. The
loss is the negative log of their summed probability, log Z - log Z_gold, where Z_gold is the inside algorithm
restricted to those trees (gold spans at their gold label, spans crossing no gold span at label 0, spans crossing
one excluded). Decoding stays `cky_decode`'s best tree.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch import Tensor

from .chart import Span, gold_label_table

#: the log-weight of an excluded span: finite, so that logsumexp's gradient stays finite where all terms are excluded
EXCLUDED = -1e9


def inside(weights: Tensor, lengths: Sequence[int]) -> Tensor:
    """log of the sum over binary trees of exp(sum of their spans' weights): weights [b, N, N] (span (i, j) at
    ``[i, j]``, 0 <= i < j <= L_b < N; other entries are never read), lengths [b] -> log Z [b]."""
    n = weights.shape[1] - 1
    if n < 1 or not lengths:
        return weights.new_zeros(len(lengths))
    rows: list[Tensor | None] = [None]  # rows[d][:, i]: inside score of span (i, i + d), for i in 0 .. n - d
    starts = torch.arange(n, device=weights.device)
    rows.append(weights[:, starts, starts + 1])
    for d in range(2, n + 1):
        s = starts[: n - d + 1]
        splits = torch.stack([rows[m][:, s] + rows[d - m][:, s + m] for m in range(1, d)], dim=1)  # [b, d-1, n-d+1]
        rows.append(weights[:, s, s + d] + torch.logsumexp(splits, dim=1))
    return torch.stack([rows[length][k, 0] for k, length in enumerate(lengths)])


def crossing_table(gold: Sequence[Sequence[Span]], size: int) -> np.ndarray:
    """bool [b, N, N]: span (i, j) crosses a gold span (a, b): a < i < b < j or i < a < j < b."""
    out = np.zeros((len(gold), size, size), dtype=bool)
    i = np.arange(size)[:, None]
    j = np.arange(size)[None, :]
    for k, spans in enumerate(gold):
        for a, b, _ in spans:
            out[k] |= ((a < i) & (i < b) & (b < j)) | ((i < a) & (a < j) & (j < b))
    return out


def crf_loss(scores: Tensor, gold_spans: Sequence[Sequence[Span]], lengths: Sequence[int]) -> Tensor:
    """Mean over sentences of log Z - log Z_gold (module docstring).

    scores [b, N, N, C] (scores[..., 0] == 0), gold_spans [b] lists of (i, j, label >= 1) including the root,
    lengths [b] -> scalar loss (>= 0 up to rounding)."""
    b, n, _, _ = scores.shape
    if b == 0:
        return scores.sum() * 0.0
    lens = list(lengths)
    gold = torch.from_numpy(gold_label_table(gold_spans, lens, n)).to(scores.device)
    crossing = torch.from_numpy(crossing_table(gold_spans, n)).to(scores.device)
    root = torch.zeros(b, n, n, dtype=torch.bool, device=scores.device)
    root[torch.arange(b), 0, torch.tensor(lens, device=scores.device)] = True
    fence = torch.arange(n, device=scores.device)
    ends = torch.tensor(lens, device=scores.device)[:, None, None]
    outside = ~((fence[:, None] < fence[None, :]) & (fence[None, :] <= ends))  # not a span of the sentence
    # zeros outside the sentence: padding never reaches the result, and zeros keep every intermediate finite
    every = torch.logsumexp(scores, dim=-1)
    labelled = torch.logsumexp(scores[..., 1:], dim=-1)  # the root: a constituent
    log_z = inside(torch.where(root, labelled, every).masked_fill(outside, 0.0), lens)
    at_gold = scores.gather(-1, gold.unsqueeze(-1)).squeeze(-1)  # label 0 (score 0) where no gold span
    log_z_gold = inside(at_gold.masked_fill(crossing, EXCLUDED).masked_fill(outside, 0.0), lens)
    return (log_z - log_z_gold).mean()
