"""Chart head: batched CKY against brute force and the Python reference, the margin loss, the span scorer."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from cky_oracle import best_tree  # noqa: E402

from structattn.heads.chart import SpanLabelScorer, cky_decode, gold_label_table, margin_loss, reference_cky  # noqa: E402
from structattn.layers.fenceposts import all_span_vectors  # noqa: E402


def random_chart(b, n, c, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, n, n, c, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("seed", range(6))
def test_batched_cky_equals_brute_force_and_reference(seed):
    lengths = [1, 2, 3, 4, 5, 6, 7, 3]
    scores = random_chart(len(lengths), 9, 5, seed)  # a chart padded beyond the longest sentence
    decoded = cky_decode(scores, lengths)
    for k, length in enumerate(lengths):
        total, spans = best_tree(scores[k].tolist(), length)
        ref_total, ref_spans = reference_cky(scores[k].numpy(), length)
        assert decoded[k][0] == pytest.approx(total, abs=1e-9)
        assert ref_total == pytest.approx(total, abs=1e-9)
        assert set(decoded[k][1]) == spans == set(ref_spans)
        assert len(decoded[k][1]) == len(set(decoded[k][1]))


def test_root_gets_a_real_label_even_when_every_label_scores_below_empty():
    scores = torch.full((1, 4, 4, 3), -5.0)
    scores[..., 0] = 0.0
    scores[0, 0, 3, 2] = -1.0  # the least bad real label of the root
    total, spans = cky_decode(scores, [3])[0]
    assert spans == [(0, 3, 2)] and total == pytest.approx(-1.0)
    assert cky_decode(scores, [3], force_root=False)[0] == (0.0, [])


def test_empty_sentence_and_too_long_sentence():
    scores = torch.zeros(2, 3, 3, 2)
    assert cky_decode(scores, [0, 2])[0] == (0.0, [])
    with pytest.raises(ValueError, match="room"):
        cky_decode(scores, [3, 1])


def test_gold_label_table_marks_constituents_and_refuses_bad_spans():
    table = gold_label_table([[(0, 3, 1), (1, 3, 2)], [(0, 1, 4)]], [3, 1], 4)
    assert table.shape == (2, 4, 4)
    assert table[0, 0, 3] == 1 and table[0, 1, 3] == 2 and table[1, 0, 1] == 4 and int(table.sum()) == 7
    with pytest.raises(ValueError, match="outside"):
        gold_label_table([[(0, 4, 1)]], [3], 5)
    with pytest.raises(ValueError, match="two labels"):
        gold_label_table([[(0, 3, 1), (0, 3, 2)]], [3], 4)


def _chart_favouring(gold, length, c, margin):
    """Gold labels score ``margin``; every other real label -2 (below empty by more than its Hamming cost 1)."""
    scores = torch.full((1, length + 1, length + 1, c), -2.0)
    scores[..., 0] = 0.0
    for i, j, lab in gold:
        scores[0, i, j, lab] = margin
    return scores


def test_margin_loss_is_zero_when_gold_wins_by_more_than_the_hamming_cost():
    gold = [(0, 4, 1), (0, 2, 2), (2, 4, 3)]
    scores = _chart_favouring(gold, 4, 4, margin=5.0).requires_grad_(True)
    loss, predicted = margin_loss(scores, [gold], [4])
    assert loss.item() == 0.0
    assert predicted == [sorted(gold)]


def test_margin_loss_counts_the_hamming_cost_of_a_tie():
    """Real labels tied with the empty label on the non-gold spans: the augmented decoder labels the 4 unit
    spans (+1 each), so the loss is exactly 4 even though the unaugmented decode is the gold tree."""
    gold = [(0, 4, 1), (0, 2, 2), (2, 4, 3)]
    scores = torch.zeros(1, 5, 5, 4)
    for i, j, lab in gold:
        scores[0, i, j, lab] = 5.0
    loss, _ = margin_loss(scores.requires_grad_(True), [gold], [4])
    assert loss.item() == pytest.approx(4.0)
    assert sorted(cky_decode(scores.detach(), [4])[0][1]) == sorted(gold)


def test_margin_loss_equals_brute_force_augmented_objective_and_has_gradients():
    g = torch.Generator().manual_seed(3)
    length, c = 5, 4
    gold = [(0, 5, 1), (0, 2, 2), (2, 5, 3), (3, 5, 2)]
    scores = torch.randn(1, length + 1, length + 1, c, generator=g, dtype=torch.float64)
    scores[..., 0] = 0.0
    scores.requires_grad_(True)
    loss, _ = margin_loss(scores, [gold], [length])
    # oracle: max over trees of s(T) + Hamming(T), minus s(gold), by brute force on augmented scores
    gold_of = {(i, j): lab for i, j, lab in gold}
    aug = scores.detach().clone()
    for i in range(length + 1):
        for j in range(i + 1, length + 1):
            for lab in range(c):
                aug[0, i, j, lab] += float(gold_of.get((i, j), 0) != lab)
    best_aug, _ = best_tree(aug[0].tolist(), length)
    gold_score = sum(float(scores.detach()[0, i, j, lab]) for i, j, lab in gold)
    assert loss.item() == pytest.approx(max(0.0, best_aug - gold_score), abs=1e-9)
    assert loss.item() > 0
    loss.backward()
    assert scores.grad.abs().sum() > 0
    for i, j, lab in gold:  # raising a gold span's score lowers the loss, or leaves it
        assert scores.grad[0, i, j, lab] <= 0


def test_span_scorer_is_the_mlp_on_fencepost_span_vectors_with_a_zero_empty_label():
    torch.manual_seed(0)
    scorer = SpanLabelScorer(16, 12, 5).double().eval()
    h = torch.randn(3, 9, 16, dtype=torch.float64)
    scores = scorer(h)
    assert scores.shape == (3, 8, 8, 5)
    full = scorer.out(torch.relu(scorer.norm(scorer.hidden(all_span_vectors(h)))))  # the plain formulation
    i, j = torch.triu_indices(8, 8, offset=1)
    torch.testing.assert_close(scores[:, i, j, 1:], full[:, i, j])
    assert torch.all(scores[..., 0] == 0)


def test_span_scorer_gradcheck():
    torch.manual_seed(1)
    scorer = SpanLabelScorer(6, 5, 3).double()
    h = torch.randn(2, 5, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: scorer(x), (h,))
