"""Span-based chart parsing head: label scores for every span, CKY decoding and the margin loss.

The parser of Stern et al. (2017) and Kitaev & Klein (2018) that BNA uses (BNA section 4.1, Eq. 4-9).

Notation: b sentences, L words of the longest one, N = L + 1 fenceposts (a chart may be padded to a larger N),
C labels, d hidden size. A span (i, j), 0 <= i < j <= L_b, covers words i + 1 .. j (layers/fenceposts.py).
Label 0 is the empty label ("not a constituent"); its score is fixed at 0, so a span is a constituent only
when some real label scores above 0. Unary chains are single collapsed labels ("S::VP"), so a tree holds at
most one label per span.

Decoding. Every span takes its best label, s(i, j) = max_l scores[i, j, l], and the best binary tree is

    best(i, j) = s(i, j) + (max_{i<k<j} best(i, k) + best(k, j)   if j - i > 1, else 0)

(a span's label and its split are chosen independently, which is why the label argmax comes first). The
decoder searches binary trees; dropping the spans whose label is empty turns the winner into an n-ary tree.
With ``force_root`` the root span (0, L_b) takes its best non-empty label, so every sentence gets a labelled
root. Each sentence of a batch has its own root (0, L_b).

Ties are broken the same way by both decoders: the smallest label id, then the smallest split point k. That
holds exactly when the sums are exact (integer scores, say); with arbitrary floats the batched decoder adds in
the chart's dtype (float32 usually) and the reference in float64, so scores within rounding of each other may
break differently.

The spans a decoder returns come in pre-order: parents before children, left siblings before right ones.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import numpy as np
import torch
from torch import nn

from structattn.layers.fenceposts import fencepost_halves

Tensor = torch.Tensor
Span = tuple[int, int, int]


class SpanLabelScorer(nn.Module):
    """MLP label scores for every span from its fencepost vector (Kitaev & Klein 2018; BNA Eq. 6).

    Linear(d, hidden) -> LayerNorm -> ReLU -> dropout -> Linear(hidden, C - 1); the empty label's score is a
    constant 0 prepended as label 0.

    The first layer is linear, so it is applied to the fenceposts rather than to the L^2 span vectors:
    with W = [W_a, W_c] and P_k = W_a a_k - W_c c_k (k = 0 .. L), W V_ij = P_j - P_i exactly
    (V_ij = [a_j - a_i ; c_i - c_j] in fencepost terms, layers/fenceposts.py). Only spans with i < j are
    scored: the chart's first layer costs O(L d hidden) instead of O(L^2 d hidden), and the rest half of a
    full square.
    """

    def __init__(self, d_model: int, hidden: int, num_labels: int, dropout: float = 0.0):
        super().__init__()
        if num_labels < 2:
            raise ValueError(f"a chart needs the empty label and at least one real label, got {num_labels} labels")
        self.num_labels = num_labels
        self.hidden = nn.Linear(d_model, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden, num_labels - 1)

    def forward(self, h: Tensor) -> Tensor:
        """h [b, T, d] (T = L + 2: START, words, STOP) -> scores [b, L + 1, L + 1, C], scores[..., 0] == 0.

        Entry [:, i, j] scores span (i, j) for i < j; entries with i >= j are 0, and those with j > L_b are
        computed from padding: the decoder never reads either.
        """
        a, c = fencepost_halves(h)  # [b, N, d/2] each, N = L + 1
        half = a.shape[-1]
        weight = self.hidden.weight  # [hidden, d]
        p = a @ weight[:, :half].t() - c @ weight[:, half:].t()  # [b, N, hidden]
        n = p.shape[1]
        i, j = _upper_pairs(n, p.device)
        x = p[:, j] - p[:, i] + self.hidden.bias  # [b, S, hidden], S = N (N - 1) / 2: the first layer on V_ij
        x = self.out(self.dropout(torch.relu(self.norm(x))))  # [b, S, C - 1]
        scores = x.new_zeros(x.shape[0], n, n, self.num_labels)
        scores[:, i, j, 1:] = x  # label 0 (empty) stays a constant 0: no parameters, no gradient
        return scores


@lru_cache(maxsize=64)
def _upper_pairs(n: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """(i, j) long [S] for every 0 <= i < j < n, S = n (n - 1) / 2."""
    ij = torch.triu_indices(n, n, offset=1)
    return ij[0].to(device), ij[1].to(device)


# ---------------------------------------------------------------------------------------------------------
# Batched CKY
# ---------------------------------------------------------------------------------------------------------

@lru_cache(maxsize=64)
def _end_index(n: int, device: torch.device) -> Tensor:
    """[n, n] long: entry [i, w] = min(i + w, n - 1), the end fencepost of the span of width w from i (clipped
    where the span would run off the chart; those entries are never read)."""
    i = torch.arange(n).unsqueeze(1)
    w = torch.arange(n).unsqueeze(0)
    return (i + w).clamp(max=n - 1).to(device)


def _check_lengths(lengths, n: int) -> list[int]:
    lens = [int(x) for x in (lengths.tolist() if isinstance(lengths, Tensor) else lengths)]
    for b, length in enumerate(lens):
        if not 0 <= length <= n - 1:
            raise ValueError(f"sentence {b} has {length} words but the chart has room for {n - 1}")
    return lens


@torch.no_grad()
def _decode_binary(scores: Tensor, lengths: Sequence[int], force_root: bool) -> list[tuple[float, list[Span]]]:
    """The best binary tree of every sentence, empty-labelled spans included (see the module docstring).

    scores [b, N, N, C] -> per sentence (score, spans (i, j, label) in pre-order, 2 L_b - 1 of them).

    Layout: the chart is kept by start and width, A[:, i, w] = best(i, i + w), and by end and reversed
    width, B[:, j, W - w] = best(j - w, j) with W = L (the widest span). For width w the split candidates
    best(i, i + u) + best(i + u, i + w), u = 1 .. w - 1, are then two strided slices of A and B with the
    same orientation, added in one op for every sentence and start at once.
    """
    b, n_all, _, c = scores.shape
    lens = _check_lengths(lengths, n_all)
    if b == 0:
        return []
    if force_root and c < 2:
        raise ValueError("force_root needs at least one non-empty label")
    width_max = max(lens)
    if width_max == 0:
        return [(0.0, []) for _ in lens]
    n = width_max + 1  # fenceposts actually used; the rest of a padded chart is never read
    scores = scores.detach()[:, :n, :n]
    if not scores.is_floating_point() or scores.dtype in (torch.float16, torch.bfloat16):
        scores = scores.float()
    device = scores.device

    span_best, span_label = scores.max(-1)  # [b, n, n]; first maximum = smallest label id
    if force_root:
        rows = [s for s, length in enumerate(lens) if length > 0]
        bi = torch.tensor(rows, device=device)
        ends = torch.tensor([lens[s] for s in rows], device=device)
        root_best, root_label = scores[bi, 0, ends, 1:].max(-1)
        span_best[bi, 0, ends] = root_best
        span_label[bi, 0, ends] = root_label + 1

    w_top = n - 1
    index = _end_index(n, device).expand(b, n, n)
    a = torch.gather(span_best, 2, index)     # a[:, i, w] = s(i, i + w): DP values are added in place
    labels = torch.gather(span_label, 2, index)
    rev = torch.empty_like(a)                  # rev[:, j, w_top - w] = best(j - w, j)
    splits = torch.zeros(b, n, n, dtype=torch.long, device=device)  # splits[:, i, w] = k - i - 1
    rev[:, 1:, w_top - 1] = a[:, : n - 1, 1]
    for w in range(2, n):
        m = n - w  # spans of width w start at 0 .. m - 1
        cand = a[:, :m, 1:w] + rev[:, w:, w_top - w + 1: w_top]  # [b, m, w - 1]
        top, arg = cand.max(-1)                                   # first maximum = smallest split
        col = a[:, :m, w]
        col += top
        rev[:, w:, w_top - w] = col
        splits[:, :m, w] = arg

    totals = a[torch.arange(b, device=device), 0, torch.tensor(lens, device=device)].tolist()
    split_rows = splits.cpu().numpy()
    label_rows = labels.cpu().numpy()
    out = []
    for s, length in enumerate(lens):
        if length == 0:
            out.append((0.0, []))
            continue
        sp, lab = split_rows[s], label_rows[s]
        spans: list[Span] = []
        stack = [(0, length)]
        while stack:
            i, j = stack.pop()
            w = j - i
            spans.append((i, j, int(lab[i, w])))
            if w > 1:
                k = i + 1 + int(sp[i, w])
                stack.append((k, j))
                stack.append((i, k))
        out.append((float(totals[s]), spans))
    return out


def cky_decode(scores: Tensor, lengths: Sequence[int], force_root: bool = True) -> list[tuple[float, list[Span]]]:
    """Best tree of every sentence of a batch, on the scores' device.

    scores [b, N, N, C] (label 0 = empty), lengths [b] words per sentence (L_b <= N - 1) ->
    per sentence (best score, labelled spans (i, j, label != 0) in pre-order).

    One vectorised pass per span width over all sentences and starts; no gradient. Tie-breaking and the
    root rule: module docstring.
    """
    return [(score, [sp for sp in spans if sp[2] != 0]) for score, spans in _decode_binary(scores, lengths, force_root)]


# ---------------------------------------------------------------------------------------------------------
# Plain Python CKY: the reference twin and the speed baseline
# ---------------------------------------------------------------------------------------------------------

def reference_cky(scores, length: int, force_root: bool = True) -> tuple[float, list[Span]]:
    """Textbook CKY over one sentence with Python loops.

    scores [N, N, C] (array-like, N > length), length = L -> (best score, labelled spans (i, j, label != 0)
    in pre-order). Same recurrence and tie-breaking as ``cky_decode``, in float64.
    """
    score, spans = _reference_binary(scores, length, force_root)
    return score, [sp for sp in spans if sp[2] != 0]


def _reference_binary(scores, length: int, force_root: bool) -> tuple[float, list[Span]]:
    table = np.asarray(scores, dtype=np.float64)
    if length == 0:
        return 0.0, []
    chart = table[: length + 1, : length + 1].tolist()
    n_labels = table.shape[-1]
    best = [[0.0] * (length + 1) for _ in range(length + 1)]
    label = [[0] * (length + 1) for _ in range(length + 1)]
    split = [[0] * (length + 1) for _ in range(length + 1)]
    for width in range(1, length + 1):
        for i in range(0, length - width + 1):
            j = i + width
            row = chart[i][j]
            first = 1 if force_root and width == length else 0
            lab = first
            for cand in range(first + 1, n_labels):
                if row[cand] > row[lab]:
                    lab = cand
            total = row[lab]
            if width > 1:
                k_best, v_best = i + 1, best[i][i + 1] + best[i + 1][j]
                for k in range(i + 2, j):
                    v = best[i][k] + best[k][j]
                    if v > v_best:
                        k_best, v_best = k, v
                total += v_best
                split[i][j] = k_best
            best[i][j] = total
            label[i][j] = lab
    spans: list[Span] = []
    stack = [(0, length)]
    while stack:
        i, j = stack.pop()
        spans.append((i, j, label[i][j]))
        if j - i > 1:
            k = split[i][j]
            stack.append((k, j))
            stack.append((i, k))
    return best[0][length], spans


# ---------------------------------------------------------------------------------------------------------
# Training: gold table and the Hamming-augmented margin loss
# ---------------------------------------------------------------------------------------------------------

def gold_label_table(gold: Sequence[Sequence[Span]], lengths: Sequence[int], size: int,
                     device: torch.device | str | None = None) -> Tensor:
    """Gold label of every span: gold [b] lists of (i, j, label >= 1), lengths [b], size = N ->
    LongTensor [b, N, N] with the span's label, 0 where it is not a gold constituent.

    Spans outside 0 <= i < j <= L_b, labels < 1 and two labels on one span (unary chains must be collapsed
    into one label) raise ValueError.
    """
    lens = _check_lengths(lengths, size)
    if len(gold) != len(lens):
        raise ValueError(f"{len(gold)} gold trees for {len(lens)} sentences")
    table = np.zeros((len(lens), size, size), dtype=np.int64)
    for s, (spans, length) in enumerate(zip(gold, lens)):
        for i, j, lab in spans:
            if not 0 <= i < j <= length:
                raise ValueError(f"gold tree {s}: span ({i}, {j}) is outside the sentence of {length} words")
            if lab < 1:
                raise ValueError(f"gold tree {s}: span ({i}, {j}) has label {lab}; gold labels are >= 1")
            if table[s, i, j] not in (0, lab):  # the same span listed twice with one label is harmless
                raise ValueError(f"gold tree {s}: span ({i}, {j}) has two labels; collapse unary chains first")
            table[s, i, j] = lab
    return torch.from_numpy(table).to(device) if device is not None else torch.from_numpy(table)


def margin_loss(scores: Tensor, gold_spans: Sequence[Sequence[Span]],
                lengths: Sequence[int]) -> tuple[Tensor, list[list[Span]]]:
    """Hinge loss of BNA Eq. 9 with Hamming-augmented decoding (Stern et al. 2017).

    scores [b, N, N, C] (requires grad; scores[..., 0] must be 0, as SpanLabelScorer makes it), gold_spans [b]
    lists of (i, j, label >= 1) including the root, lengths [b] ->
    (loss: scalar, mean over sentences of max(0, s(T^) + Delta(T^, T*) - s(T*)); the predicted spans per sentence).

    T^ is the best tree under scores + 1[label != gold label of the span] (the gold label of a
    non-constituent is 0, so the empty label is augmented too), decoded without gradient; Delta counts the
    spans of T^'s binary tree whose label differs from gold. s(.) sums ``scores`` at the non-empty spans,
    gathered so that the gradient flows into them.
    """
    b, n, _, c = scores.shape
    lens = _check_lengths(lengths, n)
    if b == 0:
        return scores.sum() * 0.0, []
    gold_table = gold_label_table(gold_spans, lens, n, device=scores.device)
    with torch.no_grad():
        aug = scores.detach().float() + 1.0
        aug.scatter_add_(-1, gold_table.unsqueeze(-1), aug.new_full((b, n, n, 1), -1.0))
        trees = _decode_binary(aug, lens, force_root=True)

    hamming, pred_index, gold_index, predicted = [], [], [], []
    for s, (_, spans) in enumerate(trees):
        gold_of = {(i, j): lab for i, j, lab in gold_spans[s]}
        hamming.append(sum(1 for i, j, lab in spans if gold_of.get((i, j), 0) != lab))
        kept = sorted(sp for sp in spans if sp[2] != 0)
        predicted.append(kept)
        # the same sorted order on both sides makes s(T^) - s(T*) exactly 0 when the trees agree
        pred_index.extend((s, *sp) for sp in kept)
        gold_index.extend((s, *sp) for sp in sorted(gold_spans[s]))

    def per_sentence(index: list[tuple[int, int, int, int]]) -> Tensor:
        total = scores.new_zeros(b)
        if index:
            idx = torch.tensor(index, dtype=torch.long, device=scores.device).t()
            total = total.index_add(0, idx[0], scores[idx[0], idx[1], idx[2], idx[3]])
        return total

    delta = torch.tensor(hamming, dtype=scores.dtype, device=scores.device)
    loss = (per_sentence(pred_index) + delta - per_sentence(gold_index)).clamp(min=0).mean()
    return loss, predicted
