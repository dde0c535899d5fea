"""Fencepost span vectors: the span representation of chart parsers (Stern et al. 2017; Kitaev & Klein 2018).

Notation: b batch, L words of the longest sentence, T = L + 2 positions, d hidden size (even).

A sentence of ``L_b`` words is encoded as the sequence ``[START, w_1, ..., w_{L_b}, STOP]`` (positions
0 .. L_b + 1; the rest is padding). Each hidden vector is split in two halves:

* ``a`` = the first half, the part that summarises the words to the LEFT of a position (in BiMSA, the output
  of the mask that lets word i see words j <= i; like a forward LSTM state);
* ``c`` = the second half, the part that summarises the words to the RIGHT (mask j >= i; backward LSTM).

Fencepost k (0 <= k <= L_b) sits between word k and word k + 1 and is ``(a_k, c_{k+1})``. The span (i, j),
i < j, covers words i + 1 .. j and its vector is

    V_ij = [a_j - a_i ; c_{i+1} - c_{j+1}]                                (BNA Eq. 6 and 15)

so both halves are differences over exactly the positions i + 1 .. j. The halves are a learned convention
(residuals, LayerNorm and feed-forward blocks mix them); the convention only fixes which half is read how.
"""
from __future__ import annotations

import torch

Tensor = torch.Tensor


def fencepost_halves(h: Tensor) -> tuple[Tensor, Tensor]:
    """Split hidden states into the two fencepost parts.

    h [b, T, d] (T = L + 2, d even) -> (a [b, L + 1, d/2], c [b, L + 1, d/2]) with fence k = (a[:, k], c[:, k]).
    """
    d = h.shape[-1]
    if d % 2:
        raise ValueError(f"fencepost spans need an even hidden size, got {d}")
    half = d // 2
    return h[:, :-1, :half], h[:, 1:, half:]


def span_vectors(h: Tensor, starts: Tensor, ends: Tensor) -> Tensor:
    """V_ij for the given spans of every sentence.

    h [b, T, d]; starts, ends [S] long fenceposts with starts < ends (the same spans for every sentence)
    -> [b, S, d]. Spans past a sentence's end are computed from padding: mask them out.
    """
    a, c = fencepost_halves(h)
    return torch.cat([a[:, ends] - a[:, starts], c[:, starts] - c[:, ends]], dim=-1)


def all_span_vectors(h: Tensor) -> Tensor:
    """V_ij for every pair of fenceposts.

    h [b, T, d] -> [b, L + 1, L + 1, d] with entry [:, i, j] = V_ij (meaningful for i < j <= L_b only).
    """
    a, c = fencepost_halves(h)
    return torch.cat([a.unsqueeze(1) - a.unsqueeze(2), c.unsqueeze(2) - c.unsqueeze(1)], dim=-1)


def ngram_spans(lengths: Tensor, n: int, max_len: int) -> tuple[Tensor, Tensor, Tensor]:
    """Every span of 1 .. n words, ordered by length then start (BNA Eq. 16's [H_1gram, ..., H_ngram]).

    lengths [b] long (words per sentence), n >= 1, max_len = L -> (starts [S], ends [S] long,
    valid [b, S] bool) with S = sum over g = 1 .. min(n, L) of (L + 1 - g): at most n * L spans, so
    the span matrix grows linearly with n and with L, never with L * L.
    """
    if n < 1:
        raise ValueError(f"n-gram order must be >= 1, got {n}")
    device = lengths.device
    starts, ends = [], []
    for g in range(1, min(n, max_len) + 1):
        i = torch.arange(0, max_len + 1 - g, device=device)
        starts.append(i)
        ends.append(i + g)
    if not starts:  # max_len == 0: no span at all
        empty = torch.zeros(0, dtype=torch.long, device=device)
        return empty, empty, torch.zeros(lengths.shape[0], 0, dtype=torch.bool, device=device)
    s, e = torch.cat(starts), torch.cat(ends)
    valid = e.unsqueeze(0) <= lengths.unsqueeze(1)
    return s, e, valid
