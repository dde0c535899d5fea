"""Chart head: batched CKY == plain Python CKY == brute force, the root rule, the margin loss, the span scorer."""
from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from structattn.bna.chart import SpanLabelScorer, cky_decode, gold_label_table, margin_loss, reference_cky
from structattn.bna.fenceposts import all_span_vectors

_spec = importlib.util.spec_from_file_location("brute_cky", Path(__file__).with_name("brute_cky.py"))
brute_cky = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(brute_cky)


def chart(lengths, c, seed, pad=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    n = max(lengths) + 1 + pad
    return torch.randn(len(lengths), n, n, c, generator=g, dtype=dtype)


def mixed_lengths(seed, low=0, high=7, batch=6):
    rng = random.Random(seed)
    return [rng.randint(low, high) for _ in range(batch)]


@pytest.mark.parametrize("force_root", [True, False])
@pytest.mark.parametrize("seed", range(8))
def test_batched_and_reference_cky_equal_brute_force(seed, force_root):
    lengths = mixed_lengths(seed, 1, 7) + [7, 1]
    scores = chart(lengths, 5, seed, pad=seed % 3)
    decoded = cky_decode(scores, lengths, force_root=force_root)
    assert len(decoded) == len(lengths)
    for k, length in enumerate(lengths):
        best, spans, winners = brute_cky.brute_best(scores[k].tolist(), length, force_root)
        assert winners == 1  # random scores: the best tree is unique, so the comparison is sharp
        ref_score, ref_spans = reference_cky(scores[k].numpy(), length, force_root=force_root)
        score, got = decoded[k]
        assert score == pytest.approx(best, abs=1e-9) and ref_score == pytest.approx(best, abs=1e-9)
        assert set(got) == spans == set(ref_spans)
        assert got == ref_spans  # same pre-order
        assert len(got) == len(set(got))


def test_float32_chart_agrees_with_brute_force():
    lengths = [7, 3, 6, 1, 5]
    scores = chart(lengths, 4, 11, dtype=torch.float32)
    for k, (score, spans) in enumerate(cky_decode(scores, lengths)):
        best, want, winners = brute_cky.brute_best(scores[k].double().tolist(), lengths[k])
        assert winners == 1 and set(spans) == want and score == pytest.approx(best, abs=1e-4)


@pytest.mark.parametrize("seed", range(4))
def test_long_mixed_batches_match_the_reference(seed):
    lengths = mixed_lengths(seed, 0, 33, batch=7)
    scores = chart(lengths, 9, 100 + seed, pad=2, dtype=torch.float32)
    decoded = cky_decode(scores, lengths)
    for k, length in enumerate(lengths):
        ref_score, ref_spans = reference_cky(scores[k].numpy(), length)
        assert decoded[k][1] == ref_spans
        assert decoded[k][0] == pytest.approx(ref_score, rel=1e-5, abs=1e-3)


@pytest.mark.parametrize("seed", range(4))
def test_ties_break_alike_smallest_label_then_smallest_split(seed):
    """Small integer scores: sums are exact in float32 and float64 and ties are everywhere."""
    g = torch.Generator().manual_seed(seed)
    lengths = [12, 5, 9, 1, 0, 12]
    scores = torch.randint(-2, 3, (len(lengths), 13, 13, 4), generator=g).float()
    for force_root in (True, False):
        decoded = cky_decode(scores, lengths, force_root=force_root)
        for k, length in enumerate(lengths):
            assert decoded[k] == reference_cky(scores[k].numpy(), length, force_root=force_root)


def test_tie_breaking_rule_on_a_flat_chart():
    """All scores 0: every split ties and the smallest one, k = i + 1, gives a right-branching tree; labels
    tie at 0, so the empty label wins everywhere but at the forced root, which takes label 1 (smallest real id)."""
    scores = torch.zeros(1, 5, 5, 3)
    assert cky_decode(scores, [4])[0] == (0.0, [(0, 4, 1)])
    scores[0, :, :, 2] = 1.0  # label 2 on every span: the whole binary tree is labelled
    score, spans = cky_decode(scores, [4])[0]
    assert score == 7.0
    assert spans == [(0, 4, 2), (0, 1, 2), (1, 4, 2), (1, 2, 2), (2, 4, 2), (2, 3, 2), (3, 4, 2)]
    assert reference_cky(scores[0].numpy(), 4) == (score, spans)


def test_root_gets_its_best_real_label_only_when_forced():
    scores = torch.full((2, 4, 4, 3), -3.0)
    scores[..., 0] = 0.0
    scores[0, 0, 3, 2] = -1.0
    scores[1, 0, 2, 1] = -0.5  # sentence 1 has 2 words: its root is (0, 2), not (0, 3)
    assert cky_decode(scores, [3, 2]) == [(-1.0, [(0, 3, 2)]), (-0.5, [(0, 2, 1)])]
    assert cky_decode(scores, [3, 2], force_root=False) == [(0.0, []), (0.0, [])]
    assert reference_cky(scores[1].numpy(), 2) == (-0.5, [(0, 2, 1)])


def test_empty_sentences_empty_batch_and_bad_lengths():
    scores = torch.randn(3, 4, 4, 2)
    out = cky_decode(scores, [0, 3, 0])
    assert out[0] == (0.0, []) and out[2] == (0.0, []) and out[1][1][0][:2] == (0, 3)
    assert cky_decode(scores, [0, 0, 0]) == [(0.0, [])] * 3
    assert cky_decode(torch.zeros(0, 4, 4, 2), []) == []
    assert reference_cky(scores[0].numpy(), 0) == (0.0, [])
    with pytest.raises(ValueError, match="room"):
        cky_decode(scores, [4, 1, 1])
    with pytest.raises(ValueError, match="non-empty label"):
        cky_decode(torch.zeros(1, 3, 3, 1), [2])


def test_reused_buffers_never_leak_between_calls():
    """Buffers are cached per chart shape: alternate shapes and contents and check every answer."""
    for seed in range(6):
        lengths = [6, 4] if seed % 2 else [6, 6]
        scores = chart(lengths, 5, 50 + seed, dtype=torch.float32)
        for k, (score, spans) in enumerate(cky_decode(scores, torch.tensor(lengths))):
            assert spans == reference_cky(scores[k].numpy(), lengths[k])[1]


def test_non_contiguous_and_grad_requiring_charts():
    base = chart([5, 5], 4, 7, dtype=torch.float32)
    transposed = base.transpose(1, 2).contiguous().transpose(1, 2).requires_grad_(True)  # same values, strided
    assert not transposed.is_contiguous()
    assert cky_decode(transposed, [5, 3]) == cky_decode(base, [5, 3])


def test_gold_label_table():
    table = gold_label_table([[(0, 3, 1), (1, 3, 2), (1, 2, 5)], [(0, 1, 4)]], [3, 1], 5)
    assert table.dtype == np.int64 and table.shape == (2, 5, 5)
    want = np.zeros((2, 5, 5), dtype=np.int64)
    want[0, 0, 3], want[0, 1, 3], want[0, 1, 2], want[1, 0, 1] = 1, 2, 5, 4
    assert np.array_equal(table, want)
    assert gold_label_table([[(0, 2, 3), (0, 2, 3)]], [2], 3)[0, 0, 2] == 3  # a repeated span is harmless
    for bad, match in [([(1, 1, 1)], "outside"), ([(0, 3, 1)], "outside"), ([(0, 2, 0)], "label 0"),
                       ([(0, 2, 1), (0, 2, 2)], "two labels")]:
        with pytest.raises(ValueError, match=match):
            gold_label_table([bad], [2], 4)
    with pytest.raises(ValueError, match="gold trees"):
        gold_label_table([[]], [2, 2], 3)


def chart_for(gold_trees, lengths, c, gold_score, other_score):
    n = max(lengths) + 1
    scores = torch.full((len(lengths), n, n, c), float(other_score), dtype=torch.float64)
    scores[..., 0] = 0.0
    for k, tree in enumerate(gold_trees):
        for i, j, lab in tree:
            scores[k, i, j, lab] = gold_score
    return scores.requires_grad_(True)


GOLD = [[(0, 5, 1), (0, 2, 2), (2, 5, 3), (3, 5, 2)], [(0, 3, 2), (1, 3, 1)], [(0, 1, 3)]]
LENGTHS = [5, 3, 1]


def test_margin_loss_is_zero_and_prediction_is_gold_with_a_large_margin():
    scores = chart_for(GOLD, LENGTHS, 4, gold_score=4.0, other_score=-3.0)
    loss, predicted = margin_loss(scores, GOLD, LENGTHS)
    assert loss.item() == 0.0
    assert predicted == [sorted(tree) for tree in GOLD]


def test_margin_loss_is_positive_with_gradients_and_equals_the_brute_force_objective():
    g = torch.Generator().manual_seed(5)
    scores = torch.randn(3, 6, 6, 4, generator=g, dtype=torch.float64)
    scores[..., 0] = 0.0
    scores.requires_grad_(True)
    loss, predicted = margin_loss(scores, GOLD, LENGTHS)
    assert loss.item() > 0
    loss.backward()
    assert scores.grad.abs().sum() > 0
    assert torch.all(scores.grad[..., 0] == 0)
    per_sentence = []
    for k, (tree, length) in enumerate(zip(GOLD, LENGTHS)):
        gold_of = {(i, j): lab for i, j, lab in tree}
        aug = scores.detach()[k].clone()
        for i in range(length + 1):
            for j in range(i + 1, length + 1):
                for lab in range(aug.shape[-1]):
                    aug[i, j, lab] += float(gold_of.get((i, j), 0) != lab)
        best, spans, _ = brute_cky.brute_best(aug.tolist(), length)
        gold_score = sum(float(scores.detach()[k, i, j, lab]) for i, j, lab in tree)
        per_sentence.append(max(0.0, best - gold_score))
        assert set(predicted[k]) == spans
    assert loss.item() == pytest.approx(sum(per_sentence) / len(per_sentence), abs=1e-9)


def test_margin_loss_gradient_is_pred_minus_gold_counts():
    """d loss / d score = (1[(i,j,l) predicted] - 1[(i,j,l) gold]) / b for sentences with a positive loss."""
    scores = chart_for(GOLD[:1], LENGTHS[:1], 4, gold_score=0.2, other_score=0.0)
    loss, predicted = margin_loss(scores, GOLD[:1], LENGTHS[:1])
    assert loss.item() > 0
    loss.backward()
    want = torch.zeros_like(scores)
    for i, j, lab in predicted[0]:
        want[0, i, j, lab] += 1
    for i, j, lab in GOLD[0]:
        want[0, i, j, lab] -= 1
    assert torch.equal(scores.grad, want)


def test_span_scorer_is_an_mlp_on_fencepost_span_vectors_with_a_zero_empty_label():
    torch.manual_seed(0)
    scorer = SpanLabelScorer(d_model=8, hidden=6, num_labels=5, dropout=0.3).double().eval()
    h = torch.randn(2, 6, 8, dtype=torch.float64)  # L = 4 words: 5 fenceposts
    scores = scorer(h)
    assert scores.shape == (2, 5, 5, 5)
    assert torch.all(scores[..., 0] == 0)
    for i in range(5):
        for j in range(i + 1, 5):
            # V_ij written out from the fencepost convention: [a_j - a_i ; c_{i+1} - c_{j+1}] (halves of h)
            v = torch.cat([h[:, j, :4] - h[:, i, :4], h[:, i + 1, 4:] - h[:, j + 1, 4:]], dim=-1)
            torch.testing.assert_close(v, all_span_vectors(h)[:, i, j])
            mlp = scorer.out(torch.relu(scorer.norm(scorer.hidden(v))))
            torch.testing.assert_close(scores[:, i, j, 1:], mlp)


def test_span_scorer_trains_only_the_real_labels():
    torch.manual_seed(1)
    scorer = SpanLabelScorer(4, 3, 3)
    h = torch.randn(1, 5, 4, requires_grad=True)
    scores = scorer(h)
    scores[..., 0].sum().backward(retain_graph=True)
    assert h.grad is None or torch.all(h.grad == 0)
    scores[..., 1:].sum().backward()
    assert h.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="empty label"):
        SpanLabelScorer(4, 3, 1)


def test_margin_loss_hamming_counts_a_gold_constituent_left_empty():
    """Gold (0, 1) scores so badly that the augmented tree leaves it empty: Delta still counts it (+1), as the
    augmented decoder did. Prediction: {(0, 2, 1)}; loss = 3 + 1 - (3 - 5) = 6."""
    gold = [[(0, 2, 1), (0, 1, 2)]]
    scores = torch.full((1, 3, 3, 3), -5.0, dtype=torch.float64)
    scores[..., 0] = 0.0
    scores[0, 0, 2, 1] = 3.0
    loss, predicted = margin_loss(scores.requires_grad_(True), gold, [2])
    assert predicted == [[(0, 2, 1)]]
    assert loss.item() == 6.0


@pytest.mark.filterwarnings("error")
def test_padding_scored_minus_infinity_is_never_read():
    lengths = [6, 2, 4]
    scores = chart(lengths, 4, 21, pad=1, dtype=torch.float32)
    for k, length in enumerate(lengths):
        scores[k, length + 1:] = float("-inf")
        scores[k, :, length + 1:] = float("-inf")
    decoded = cky_decode(scores, lengths)
    for k, length in enumerate(lengths):
        assert decoded[k][1] == reference_cky(scores[k].numpy(), length)[1]
    with pytest.raises(ValueError, match="finite"):
        cky_decode(torch.full((1, 3, 3, 2), float("-inf")), [2])


def test_margin_loss_counts_the_hamming_cost_of_a_tie():
    """Real labels tied with the empty label on the non-gold spans: the augmented decoder labels the 4 unit
    spans (+1 each), so the loss is exactly 4 even though the plain decode is the gold tree."""
    gold = [(0, 4, 1), (0, 2, 2), (2, 4, 3)]
    scores = torch.zeros(1, 5, 5, 4)
    for i, j, lab in gold:
        scores[0, i, j, lab] = 5.0
    loss, _ = margin_loss(scores.requires_grad_(True), [gold], [4])
    assert loss.item() == pytest.approx(4.0)
    assert sorted(cky_decode(scores.detach(), [4])[0][1]) == sorted(gold)


def test_span_scorer_gradcheck():
    torch.manual_seed(1)
    scorer = SpanLabelScorer(6, 5, 3).double()
    h = torch.randn(2, 5, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: scorer(x), (h,))
