"""Biaffine span and label scores from a span's two boundaries: the scorer of SuPar's CRF constituency parser
(Zhang, Zhou and Li 2020, after Dozat and Manning's biaffine dependency scorer), as ``ParserConfig.scorer =
"biaffine"``; the default "mlp" scorer is `structattn.bna.chart.SpanLabelScorer`.

Notation: b sentences, T = L + 2 positions, N = L + 1 fenceposts, C labels (index 0 = the empty label), d hidden.

Fencepost k's vector is ``f_k = [a_k ; c_k]`` (`structattn.bna.fenceposts.fencepost_halves`). Four MLPs (Linear ->
LeakyReLU(0.1) -> dropout) read it as a left boundary and as a right boundary, once for the span score (size
``span_hidden``) and once for the labels (size ``label_hidden``):

    s_span(i, j)     = [l_i ; 1]^T W r_j                 W [span_hidden + 1, span_hidden]
    s_label(i, j, c) = [l'_i ; 1]^T U_c [r'_j ; 1]        U [C - 1, label_hidden + 1, label_hidden + 1]
    score(i, j, c)   = s_span(i, j) + s_label(i, j, c)   for c >= 1;   score(i, j, 0) = 0

so the chart's decoders and losses read it exactly as the MLP scorer's output: the empty label stays a constant 0
and ``s_span`` is how much any labelled constituent over (i, j) is worth. Both biaffine weights start at zero (as
in the biaffine parsers), so every span starts at score 0.
"""
from __future__ import annotations

import torch
from torch import nn

from .fenceposts import fencepost_halves

Tensor = torch.Tensor


class BoundaryMLP(nn.Sequential):
    """Linear(d, hidden) -> LeakyReLU(0.1) -> dropout: one view of the fenceposts, ``[b, N, d] -> [b, N, hidden]``."""

    def __init__(self, d_model: int, hidden: int, dropout: float):
        super().__init__(nn.Linear(d_model, hidden), nn.LeakyReLU(0.1), nn.Dropout(dropout))


def _with_ones(x: Tensor) -> Tensor:
    """x [..., k] -> [..., k + 1] with a last entry 1 (the biaffine's bias term)."""
    return torch.cat([x, x.new_ones(*x.shape[:-1], 1)], dim=-1)


class BiaffineSpanScorer(nn.Module):
    """Span scores [b, N, N, C] from the fenceposts by two biaffines (see the module docstring).

    Args:
        d_model: the layer stack's hidden size (even); span_hidden, label_hidden: the boundary MLPs' sizes;
        num_labels: C, the empty label included; dropout: after each boundary MLP.
    """

    def __init__(self, d_model: int, span_hidden: int, label_hidden: int, num_labels: int, dropout: float = 0.0):
        super().__init__()
        if num_labels < 2:
            raise ValueError(f"a chart needs the empty label and at least one real label, got {num_labels} labels")
        self.num_labels = num_labels
        self.span_left = BoundaryMLP(d_model, span_hidden, dropout)
        self.span_right = BoundaryMLP(d_model, span_hidden, dropout)
        self.label_left = BoundaryMLP(d_model, label_hidden, dropout)
        self.label_right = BoundaryMLP(d_model, label_hidden, dropout)
        self.span_weight = nn.Parameter(torch.zeros(span_hidden + 1, span_hidden))
        self.label_weight = nn.Parameter(torch.zeros(num_labels - 1, label_hidden + 1, label_hidden + 1))

    def forward(self, h: Tensor) -> Tensor:
        """h [b, T, d] (T = L + 2: START, words, STOP) -> scores [b, L + 1, L + 1, C], scores[..., 0] == 0.

        Entry [:, i, j] scores span (i, j) for i < j; entries with i >= j are 0, and those with j > L_b are computed
        from padding: the decoder never reads either.
        """
        fence = torch.cat(fencepost_halves(h), dim=-1)  # [b, N, d]
        span = torch.einsum("bix,xy,bjy->bij", _with_ones(self.span_left(fence)), self.span_weight,
                            self.span_right(fence))  # [b, N, N]
        label = torch.einsum("bix,cxy,bjy->bijc", _with_ones(self.label_left(fence)), self.label_weight,
                             _with_ones(self.label_right(fence)))  # [b, N, N, C - 1]
        n = fence.shape[1]
        upper = torch.ones(n, n, dtype=torch.bool, device=h.device).triu(1)  # i < j
        real = (span.unsqueeze(-1) + label) * upper[:, :, None]
        return torch.cat([real.new_zeros(*real.shape[:-1], 1), real], dim=-1)
