"""The tree CRF loss against brute force: every labelled binary tree of a short sentence enumerated (the oracle
uses brute_cky's bracketings, never structattn.bna.tree_crf)."""
from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from brute_cky import bracketings  # noqa: E402

from structattn.bna.tree_crf import crf_loss, inside  # noqa: E402


def labelled_trees(scores, length: int):
    """Every (labelled spans != 0, total score) over binary trees with a non-empty root label."""
    c = len(scores[0][0])
    for tree in bracketings(0, length):
        choices = [range(1, c) if (i, j) == (0, length) else range(c) for i, j in tree]
        for labels in itertools.product(*choices):
            total = sum(float(scores[i][j][lab]) for (i, j), lab in zip(tree, labels))
            yield frozenset((i, j, lab) for (i, j), lab in zip(tree, labels) if lab), total


def brute_loss(scores, gold: set, length: int) -> float:
    """-log of the probability of every labelled binary tree whose constituents are exactly ``gold``."""
    trees = list(labelled_trees(scores, length))
    log_z = math.log(sum(math.exp(t) for _, t in trees))
    log_gold = math.log(sum(math.exp(t) for spans, t in trees if spans == gold))
    return log_z - log_gold


def random_scores(b: int, n: int, c: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(b, n + 1, n + 1, c, generator=g, dtype=torch.float64)
    scores[..., 0] = 0.0  # the empty label scores 0, as the parser's scorer makes it
    return scores


@pytest.mark.parametrize("length, gold", [
    (1, {(0, 1, 2)}),
    (3, {(0, 3, 1), (1, 3, 2)}),                      # binary: one tree stands for it
    (4, {(0, 4, 1), (0, 1, 2)}),                      # n-ary: (1, 4) has two binarisations, (0, 1) a word's label
    (5, {(0, 5, 2), (1, 4, 1), (2, 3, 1), (4, 5, 2)}),
])
def test_the_loss_is_minus_log_the_probability_of_the_gold_tree_summed_over_its_binarisations(length, gold):
    scores = random_scores(1, length, 3, seed=length)
    got = crf_loss(scores, [sorted(gold)], [length]).item()
    assert got == pytest.approx(brute_loss(scores[0].tolist(), gold, length), abs=1e-9)


def test_a_batch_of_lengths_is_each_sentence_alone_averaged():
    """Padding past a sentence's length never reaches its loss."""
    scores = random_scores(3, 5, 4, seed=7)
    golds = [[(0, 5, 1), (0, 2, 3)], [(0, 2, 2)], [(0, 4, 3), (1, 4, 1), (2, 4, 2)]]
    lengths = [5, 2, 4]
    want = sum(brute_loss(scores[k].tolist(), set(g), n) for k, (g, n) in enumerate(zip(golds, lengths))) / 3
    assert crf_loss(scores, golds, lengths).item() == pytest.approx(want, abs=1e-9)


def test_inside_sums_every_binary_tree():
    weights = torch.randn(1, 6, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    for length in range(1, 6):
        want = math.log(sum(math.exp(sum(weights[0, i, j].item() for i, j in tree))
                            for tree in bracketings(0, length)))
        assert inside(weights, [length]).item() == pytest.approx(want, abs=1e-9)


def test_the_gradient_is_the_one_of_the_brute_force_loss():
    """Backward through the inside passes matches finite differences of the loss (float64)."""
    scores = random_scores(2, 4, 3, seed=11)[..., 1:].clone().requires_grad_(True)
    golds, lengths = [[(0, 4, 1), (1, 3, 2)], [(0, 3, 2)]], [4, 3]

    def loss(s):
        return crf_loss(torch.cat([torch.zeros_like(s[..., :1]), s], dim=-1), golds, lengths)

    assert torch.autograd.gradcheck(loss, (scores,), eps=1e-6, atol=1e-6)


def test_a_confident_right_model_has_a_loss_near_zero_and_a_wrong_one_a_large_loss():
    n, gold = 3, [(0, 3, 1), (0, 2, 2)]
    scores = torch.full((1, n + 1, n + 1, 3), -30.0, dtype=torch.float64)
    scores[..., 0] = 0.0  # every other span: surely no constituent
    for i, j, lab in gold:
        scores[0, i, j, lab] = 30.0
    assert crf_loss(scores, [gold], [n]).item() < 1e-6
    assert crf_loss(scores, [[(0, 3, 1), (1, 3, 2)]], [n]).item() > 20.0
