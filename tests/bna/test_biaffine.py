"""The biaffine span scorer against a plain loop over every span and label (the oracle reads the module's weights
and computes each score from the formula in scalars; it never calls the scorer's own functions)."""
from __future__ import annotations

import pytest
import torch

from structattn.bna.biaffine import BiaffineSpanScorer

torch.set_num_threads(1)


def boundary(mlp, x: list[float]) -> list[float]:
    """Linear -> LeakyReLU(0.1) of one fencepost vector, in Python floats (dropout off)."""
    linear = mlp[0]
    out = []
    for row, bias in zip(linear.weight.tolist(), linear.bias.tolist()):
        v = sum(w * xi for w, xi in zip(row, x)) + bias
        out.append(v if v >= 0 else 0.1 * v)
    return out


def oracle_scores(scorer: BiaffineSpanScorer, h: torch.Tensor) -> list:
    """scores[b][i][j][c] by the module docstring's formula, one span and label at a time."""
    b, t, d = h.shape
    half = d // 2
    rows = h.tolist()
    span_w, label_w = scorer.span_weight.tolist(), scorer.label_weight.tolist()
    n = t - 1
    out = [[[[0.0] * scorer.num_labels for _ in range(n)] for _ in range(n)] for _ in range(b)]
    for s in range(b):
        fence = [rows[s][k][:half] + rows[s][k + 1][half:] for k in range(n)]  # f_k = [a_k ; c_k]
        for i in range(n):
            for j in range(i + 1, n):
                l, r = boundary(scorer.span_left, fence[i]) + [1.0], boundary(scorer.span_right, fence[j])
                span = sum(l[x] * span_w[x][y] * r[y] for x in range(len(l)) for y in range(len(r)))
                ll = boundary(scorer.label_left, fence[i]) + [1.0]
                rr = boundary(scorer.label_right, fence[j]) + [1.0]
                for c in range(1, scorer.num_labels):
                    u = label_w[c - 1]
                    out[s][i][j][c] = span + sum(ll[x] * u[x][y] * rr[y] for x in range(len(ll))
                                                 for y in range(len(rr)))
    return out


def random_scorer(seed: int = 0, labels: int = 4) -> BiaffineSpanScorer:
    torch.manual_seed(seed)
    scorer = BiaffineSpanScorer(d_model=6, span_hidden=5, label_hidden=3, num_labels=labels).double()
    for weight in (scorer.span_weight, scorer.label_weight):  # zero at the start: give them values to check
        torch.nn.init.normal_(weight)
    return scorer.eval()


@pytest.mark.parametrize("length", [1, 2, 4])
def test_every_score_is_the_biaffine_formula(length):
    scorer = random_scorer()
    h = torch.randn(2, length + 2, 6, dtype=torch.float64)
    got = scorer(h)
    assert got.shape == (2, length + 1, length + 1, 4)
    assert torch.allclose(got, torch.tensor(oracle_scores(scorer, h), dtype=torch.float64), atol=1e-10)


def test_the_empty_label_and_the_lower_triangle_are_zero_and_get_no_gradient():
    scorer = random_scorer(1)
    h = torch.randn(3, 6, 6, dtype=torch.float64, requires_grad=True)
    scores = scorer(h)
    lower = ~torch.ones(5, 5, dtype=torch.bool).triu(1)
    assert not scores[..., 0].any() and not scores[:, lower].any()
    scores[..., 0].sum().backward(retain_graph=True)
    assert h.grad is None or not h.grad.any()
    scores[:, lower].sum().backward()
    assert h.grad is None or not h.grad.any()


def test_a_new_scorer_scores_every_span_zero_and_still_learns():
    torch.manual_seed(0)
    scorer = BiaffineSpanScorer(d_model=6, span_hidden=5, label_hidden=3, num_labels=3)
    h = torch.randn(2, 5, 6)
    scores = scorer(h)
    assert not scores.any()
    scores[:, 0, 3, 2].sum().backward()  # the biaffine weights get a gradient though the scores start at 0
    assert scorer.span_weight.grad.abs().sum() > 0 and scorer.label_weight.grad[1].abs().sum() > 0


def test_padding_past_a_sentence_leaves_its_spans_alone():
    """A shorter sentence batched with a longer one scores its own spans as it does alone."""
    scorer = random_scorer(2)
    short, long = torch.randn(1, 4, 6, dtype=torch.float64), torch.randn(1, 7, 6, dtype=torch.float64)
    padded = torch.cat([torch.cat([short, torch.randn(1, 3, 6, dtype=torch.float64)], dim=1), long])
    assert torch.allclose(scorer(padded)[0, :3, :3], scorer(short)[0], atol=1e-12)


def test_fewer_than_two_labels_is_refused():
    with pytest.raises(ValueError, match="at least one real label"):
        BiaffineSpanScorer(4, 3, 3, num_labels=1)
