"""Span-based chart parsing head: label scores for every span, CKY decoding and the margin loss.

The parser of Stern et al. (2017) and Kitaev & Klein (2018) that BNA uses (BNA section 4.1, Eq. 4-9).

Notation: b sentences, L words of the longest one, N = L + 1 fenceposts (a chart may be padded to a larger N),
C labels, d hidden size. A span (i, j), 0 <= i < j <= L_b, covers words i + 1 .. j (bna/fenceposts.py).
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

import threading
from functools import lru_cache
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from torch import nn

from structattn.bna.fenceposts import fencepost_halves

Tensor = torch.Tensor
Span = tuple[int, int, int]


class SpanLabelScorer(nn.Module):
    """MLP label scores for every span from its fencepost vector (Kitaev & Klein 2018; BNA Eq. 6).

    Linear(d, hidden) -> LayerNorm -> ReLU -> dropout -> Linear(hidden, C - 1); the empty label's score is a
    constant 0 prepended as label 0.

    The first layer is linear, so it is applied to the fenceposts rather than to the L^2 span vectors:
    with W = [W_a, W_c] and P_k = W_a a_k - W_c c_k (k = 0 .. L), W V_ij = P_j - P_i exactly
    (V_ij = [a_j - a_i ; c_i - c_j] in fencepost terms, bna/fenceposts.py). Only spans with i < j are
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


@lru_cache(maxsize=32)
def _upper_pairs(n: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """Every fencepost pair i < j of n fenceposts, row by row: (i [S], j [S]) long, S = n (n - 1) / 2."""
    i, j = torch.triu_indices(n, n, offset=1)
    return i.to(device), j.to(device)


def _check_lengths(lengths, n: int) -> list[int]:
    lens = [int(x) for x in (lengths.tolist() if isinstance(lengths, Tensor) else lengths)]
    for b, length in enumerate(lens):
        if not 0 <= length <= n - 1:
            raise ValueError(f"sentence {b} has {length} words but the chart has room for {n - 1}")
    return lens


def _label_max(by_row: Tensor, ws: "_Workspace") -> Tensor:
    """Best label score of every span of the workspace, packed (see _Workspace): by_row [b * N * N, C] -> [E].

    The spans' label rows are gathered in memory order (the chart is read once, as a stream), then reduced
    by repeated halving: torch's max/amax over a short last dimension runs a scalar loop on CPU, while the
    element-wise maximum of two column halves is vectorised (the halves overlap by a column when the count
    is odd; max does not mind). A last small gather puts the maxima in packed order. No step allocates.
    """
    torch.index_select(by_row, 0, ws.rows, out=ws.selected)
    x = ws.selected
    for buf in ws.halves:
        c, h = x.shape[-1], buf.shape[-1]
        torch.maximum(x[:, :h], x[:, c - h: c], out=buf)
        x = buf
    return torch.index_select(x[:, 0], 0, ws.to_packed, out=ws.packed)


def _halvings(c: int) -> list[int]:
    """Label counts after each halving step of _label_max: 30 -> [15, 8, 4, 2, 1]; 1 -> []."""
    widths = []
    while c > 1:
        c = (c + 1) // 2
        widths.append(c)
    return widths


class _Workspace:
    """Buffers, index tensors and per-width views of the batched CKY for one chart shape.

    Building the views costs about as much as the dynamic program itself at n = 40, so they are made once
    per (b, n, padded N, device, dtype) and reused (cached per thread, so concurrent decoders never share).

    Layout (n = max L_b + 1 fenceposts, W = n - 1, sentence s innermost so every slice below is a block of
    whole rows, and reductions run over the outer dimension, where torch's CPU kernels are vectorised):

    * ``packed`` [E]: s(i, i + w) (best label score) ordered by width w = 1 .. W, then start i, then s;
      width w occupies ``offs[w - 1] : offs[w]``, (n - w) * b entries;
    * ``chart[0]`` = P [W + 1, n * b]: P[w, i * b + s] = best(i, i + w) (by width and start);
    * ``chart[1]`` = Q [W + 1, n * b]: Q[W - w, j * b + s] = best(j - w, j) (by reversed width and end).

    For width w, split u = 1 .. w - 1 pairs best(i, i + u) = P[u, i] with best(i + u, i + w) = Q[W - w + u, i + w]:
    both are the slices P[1:w, :m] and Q[W-w+1:W, w:w+m] (m = n - w starts), added into ``cand`` [w - 1, m * b]
    in one op. The new values go to P and Q at once through a two-row strided view of ``chart``.
    """

    def __init__(self, b: int, n: int, n_all: int, c: int, device: torch.device, dtype: torch.dtype):
        w_top = n - 1
        nb = n * b
        sent = torch.arange(b).view(1, b)
        rows, self.offs = [], [0]
        for w in range(1, n):
            i = torch.arange(n - w).view(-1, 1)
            rows.append(((sent * n_all + i) * n_all + i + w).reshape(-1))  # row of (s, i, i + w) in [b*N*N, C]
            self.offs.append(self.offs[-1] + rows[-1].numel())
        packed_rows = torch.cat(rows)
        sorted_rows, order = packed_rows.sort()  # memory order: sentence, start, end
        to_packed = torch.empty_like(order)
        to_packed[order] = torch.arange(order.numel())
        self.rows, self.to_packed = sorted_rows.to(device), to_packed.to(device)
        # every large temporary lives here: fresh multi-megabyte allocations page-fault on every call (glibc
        # hands them back to the system), which costs more than the dynamic program
        self.selected = torch.empty(self.offs[-1], c, device=device, dtype=dtype)
        self.halves = [torch.empty(self.offs[-1], h, device=device, dtype=dtype) for h in _halvings(c)]
        self.packed = torch.empty(self.offs[-1], device=device, dtype=dtype)
        self.chart = torch.zeros(2, w_top + 1, nb, device=device, dtype=dtype)
        self.codes = torch.zeros(w_top + 1, nb, device=device, dtype=dtype)  # split codes, see steps
        self.tops = torch.empty(nb, device=device, dtype=dtype)
        cand_flat = torch.empty(max([(w - 1) * (n - w) * b for w in range(2, n)], default=1), device=device,
                                dtype=dtype)
        p_rows, q_rows = self.chart[0], self.chart[1]
        self.init_p = p_rows[1, : w_top * b]
        self.init_q = q_rows[w_top - 1, b:]
        # The split code of a span is big - u for its first (smallest) best split u: after cand - max,
        # sign() is 0 exactly at the maxima and -1 elsewhere, so big - u + penalty * sign() is largest at the
        # first maximum; its max over u is a vectorised reduction, unlike torch's max-with-indices.
        self.big = float(w_top + 1)
        self.penalty = 2.0 * self.big
        self.steps = []
        for w in range(2, n):
            mb = (n - w) * b
            cand = cand_flat[: (w - 1) * mb].view(w - 1, mb)
            left = p_rows[1:w, :mb]
            right = q_rows[w_top - w + 1: w_top, w * b: w * b + mb]
            at_p = w * nb
            at_q = (w_top + 1) * nb + (w_top - w) * nb + w * b
            both = self.chart.as_strided((2, mb), (at_q - at_p, 1), at_p)  # P[w, :m] and Q[W - w, w:]
            top = self.tops[:mb]
            weight = (self.big - torch.arange(1, w, device=device, dtype=dtype)).view(-1, 1)
            self.steps.append((w, left, right, cand, top, top.expand(2, mb), both, weight, self.codes[w, :mb]))


_workspaces = threading.local()


def _workspace(b: int, n: int, n_all: int, c: int, device: torch.device, dtype: torch.dtype) -> _Workspace:
    cache = getattr(_workspaces, "cache", None)
    if cache is None:
        cache = _workspaces.cache = {}
    key = (b, n, n_all, c, device, dtype)
    ws = cache.pop(key, None)
    if ws is None:
        ws = _Workspace(b, n, n_all, c, device, dtype)
    cache[key] = ws  # most recently used last
    while len(cache) > 8:
        del cache[next(iter(cache))]
    return ws


@dataclass
class _BinaryTrees:
    """The best binary tree of every sentence of a batch, empty-labelled spans included.

    ``totals`` [b] tree scores (0.0 for an empty sentence); ``sent``, ``start``, ``end``, ``label`` [K] int64
    arrays, one entry per span (2 L_b - 1 per sentence), ordered by sentence, then in pre-order (start
    ascending, end descending, which is pre-order for nested spans).
    """

    totals: list[float]
    sent: np.ndarray
    start: np.ndarray
    end: np.ndarray
    label: np.ndarray

    def spans(self, keep_empty: bool = False) -> list[list[Span]]:
        """Per sentence, the spans (i, j, label) as Python tuples; empty-labelled ones only if keep_empty."""
        keep = slice(None) if keep_empty else self.label != 0
        sent = self.sent[keep]
        flat = list(zip(self.start[keep].tolist(), self.end[keep].tolist(), self.label[keep].tolist()))
        bounds = np.cumsum(np.bincount(sent, minlength=len(self.totals))).tolist()
        return [flat[lo:hi] for lo, hi in zip([0] + bounds[:-1], bounds)]


@torch.no_grad()
def _decode_binary(scores: Tensor, lengths: Sequence[int], force_root: bool) -> _BinaryTrees:
    """The best binary trees under ``scores`` [b, N, N, C] (see the module docstring and _Workspace)."""
    b, n_all, _, c = scores.shape
    lens = _check_lengths(lengths, n_all)
    empty = np.zeros(0, dtype=np.int64)
    if b == 0 or max(lens) == 0:
        return _BinaryTrees([0.0] * b, empty, empty, empty, empty)
    if force_root and c < 2:
        raise ValueError("force_root needs at least one non-empty label")
    scores = scores.detach()
    if scores.dtype != torch.float64:
        scores = scores.float()
    device = scores.device
    n = max(lens) + 1  # fenceposts in use; the rest of a padded chart is never read
    w_top = n - 1
    ws = _workspace(b, n, n_all, c, device, scores.dtype)
    by_row = scores.reshape(b * n_all * n_all, c)
    len_arr = np.asarray(lens, dtype=np.int64)
    roots = np.flatnonzero(len_arr)

    # 1. best label score of every span, packed by width, start, sentence
    packed = _label_max(by_row, ws)
    if force_root:
        root_rows = torch.from_numpy(roots * n_all * n_all + len_arr[roots]).to(device)
        root_at = torch.from_numpy(np.asarray(ws.offs)[len_arr[roots] - 1] + roots).to(device)
        packed[root_at] = by_row.index_select(0, root_rows)[:, 1:].amax(-1)

    # 2. one vectorised step per width (layout and split codes: _Workspace)
    ws.init_p.copy_(packed[: w_top * b])
    ws.init_q.copy_(packed[: w_top * b])
    offs = ws.offs
    for w, left, right, cand, top, top2, both, weight, code in ws.steps:
        torch.add(left, right, out=cand)
        torch.amax(cand, 0, out=top)
        torch.add(top2, packed[offs[w - 1]: offs[w]].expand(2, -1), out=both)
        cand.sub_(top)
        cand.sign_()
        torch.add(weight, cand, alpha=ws.penalty, out=cand)
        torch.amax(cand, 0, out=code)
    totals = ws.chart[0][torch.from_numpy(len_arr).to(device), torch.arange(b, device=device)].tolist()
    if not all(np.isfinite(totals)):
        raise ValueError("a chart has no finite-scoring tree; the scores must be finite")

    # 3. backtracking, one level of the trees at a time for all sentences; nodes as columns (sentence, i, j)
    nb = n * b
    codes = ws.codes.cpu().numpy().reshape(-1)  # [(W + 1) * n * b]; NaN where padding scored -inf: never read
    level = np.stack([roots, np.zeros_like(roots), len_arr[roots]])
    levels = [level]
    while True:
        inner = level[:, level[2] - level[1] > 1]
        count = inner.shape[1]
        if not count:
            break
        s_, i_, j_ = inner
        split = i_ + (ws.big - codes[(j_ - i_) * nb + i_ * b + s_]).astype(np.int64)
        level = np.concatenate([inner, inner], 1)
        level[2, :count] = split  # left children (i, k), then right children (k, j)
        level[1, count:] = split
        levels.append(level)
    sent, start, end = np.concatenate(levels, 1)
    order = np.lexsort((-end, start, sent))
    sent, start, end = sent[order], start[order], end[order]

    # 4. the label of each tree span (first maximum = smallest id; the root's among the non-empty ones)
    node_rows = (sent * n_all + start) * n_all + end
    if device.type == "cpu":  # numpy's argmax over a short last axis is faster than torch's
        chosen = by_row.numpy()[node_rows]
    else:
        chosen = by_row.index_select(0, torch.from_numpy(node_rows).to(device))
    if force_root:
        chosen[np.flatnonzero((start == 0) & (end == len_arr[sent])), 0] = -np.inf
    label = chosen.argmax(-1)
    if isinstance(label, Tensor):
        label = label.cpu().numpy()
    return _BinaryTrees([t if length else 0.0 for t, length in zip(totals, lens)], sent, start, end, label)


def cky_decode(scores: Tensor, lengths: Sequence[int], force_root: bool = True) -> list[tuple[float, list[Span]]]:
    """Best tree of every sentence of a batch, on the scores' device.

    scores [b, N, N, C] (label 0 = empty; finite), lengths [b] words per sentence (L_b <= N - 1) ->
    per sentence (best score, labelled spans (i, j, label != 0) in pre-order).

    One vectorised pass per span width over all sentences and starts; no gradient. Tie-breaking and the
    root rule: module docstring.
    """
    trees = _decode_binary(scores, lengths, force_root)
    return list(zip(trees.totals, trees.spans()))


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
    if force_root and n_labels < 2:
        raise ValueError("force_root needs at least one non-empty label")
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

def gold_label_table(gold: Sequence[Sequence[Span]], lengths: Sequence[int], size: int) -> np.ndarray:
    """Gold label of every span: gold [b] lists of (i, j, label >= 1), lengths [b], size = N ->
    int64 [b, N, N] with the span's label, 0 where it is not a gold constituent.

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
    return table


def margin_loss(scores: Tensor, gold_spans: Sequence[Sequence[Span]],
                lengths: Sequence[int]) -> tuple[Tensor, list[list[Span]]]:
    """Hinge loss of BNA Eq. 9 with Hamming-augmented decoding (Stern et al. 2017).

    scores [b, N, N, C] (requires grad; scores[..., 0] must be 0, as SpanLabelScorer makes it), gold_spans [b]
    lists of (i, j, label >= 1) including the root, lengths [b] ->
    (loss: scalar, mean over sentences of max(0, s(T^) + Delta(T^, T*) - s(T*)); the predicted labelled
    spans of each sentence, sorted).

    T^ is the best tree under scores + 1[label != gold label of the span] (the gold label of a
    non-constituent is 0, so the empty label is augmented too), decoded without gradient with the root
    forced non-empty; Delta counts the spans of T^'s binary tree whose label differs from gold. s(.) sums
    ``scores`` at the non-empty spans, gathered so that the gradient flows into them.
    """
    b, n, _, c = scores.shape
    lens = _check_lengths(lengths, n)
    if b == 0:
        return scores.sum() * 0.0, []
    gold = gold_label_table(gold_spans, lens, n)
    device = scores.device
    with torch.no_grad():
        aug = scores.detach().float() + 1.0
        aug.scatter_add_(-1, torch.from_numpy(gold).to(device).unsqueeze(-1), aug.new_full((b, n, n, 1), -1.0))
        trees = _decode_binary(aug, lens, force_root=True)

    wrong = gold[trees.sent, trees.start, trees.end] != trees.label
    hamming = np.bincount(trees.sent[wrong], minlength=b)
    keep = trees.label != 0
    pred = (trees.sent[keep], trees.start[keep], trees.end[keep], trees.label[keep])
    # gold in the decoder's order (pre-order): identical trees then sum identically, so their loss is exactly 0
    gold_sorted = [(s, i, j, lab) for s, spans in enumerate(gold_spans) for i, j, lab in sorted(
        set(spans), key=lambda sp: (sp[0], -sp[1]))]
    gold_index = tuple(np.asarray(x, dtype=np.int64).reshape(-1) for x in zip(*gold_sorted)) if gold_sorted \
        else (np.zeros(0, dtype=np.int64),) * 4

    def per_sentence(index: tuple[np.ndarray, ...]) -> Tensor:
        idx = [torch.from_numpy(x).to(device) for x in index]
        return scores.new_zeros(b).index_add(0, idx[0], scores[idx[0], idx[1], idx[2], idx[3]])

    delta = torch.from_numpy(hamming).to(device=device, dtype=scores.dtype)
    loss = (per_sentence(pred) + delta - per_sentence(gold_index)).clamp(min=0).mean()
    return loss, [sorted(spans) for spans in trees.spans()]
