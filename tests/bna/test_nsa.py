"""N-gram span attention (BNA Eq. 15-17): loop reference, padding, span-count growth, gradcheck, edge cases."""
import pytest
import torch

from layer_refs import compare_with_grads, pad_batch, ref_nsa, ref_span_list
from structattn.bna.nsa import NgramSpanAttention

D, HEADS, E = 8, 2, 4


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.mark.parametrize("n", [1, 2, 4, 9])  # 9 > longest sentence: every span of the sentence
def test_matches_loop_reference_forward_and_backward(n):
    attn = NgramSpanAttention(D, HEADS, E, n=n).eval()
    compare_with_grads(attn, ref_nsa, torch.randn(3, 7, D), torch.tensor([3, 1, 5]))


def test_extra_padding_beyond_longest_sentence():
    attn = NgramSpanAttention(D, HEADS, E, n=2).eval()
    compare_with_grads(attn, ref_nsa, torch.randn(2, 8, D), torch.tensor([2, 3]))


def test_span_matrix_holds_exactly_the_reference_spans():
    attn = NgramSpanAttention(D, HEADS, E, n=3)
    h, lengths = torch.randn(2, 7, D), torch.tensor([5, 2])
    spans, valid = attn.spans(h, lengths)
    for s in range(2):
        got = sorted(spans[s, valid[s]].tolist())
        want = sorted(v.tolist() for _, _, v in ref_span_list(h[s], int(lengths[s]), 3))
        assert len(got) == len(want)
        torch.testing.assert_close(torch.tensor(got), torch.tensor(want))


@pytest.mark.parametrize("L", [1, 6, 20])
def test_span_count_grows_linearly_in_n(L):
    h, lengths = torch.randn(1, L + 2, D), torch.tensor([L])
    counts = [NgramSpanAttention(D, HEADS, E, n=n).spans(h, lengths)[0].shape[1] for n in range(1, 7)]
    for n, count in enumerate(counts, start=1):
        assert count <= n * L
        assert count == sum(L + 1 - g for g in range(1, min(n, L) + 1))


def test_padding_invariance():
    attn = NgramSpanAttention(D, HEADS, E, n=3).eval()
    alone = torch.randn(1, 5, D)
    batch = pad_batch([torch.randn(9, D), alone[0], torch.randn(3, D)], T=9, d=D)
    out = attn(batch, torch.tensor([7, 3, 1]))
    torch.testing.assert_close(out[1, :5], attn(alone, torch.tensor([3]))[0])


@pytest.mark.parametrize("n", [1, 3])
def test_gradcheck_float64(n):
    attn = NgramSpanAttention(4, 2, 2, n=n).double().eval()
    h = torch.randn(2, 5, 4, dtype=torch.float64, requires_grad=True)
    lengths = torch.tensor([3, 1])
    assert torch.autograd.gradcheck(lambda x: attn(x, lengths), (h,))


@pytest.mark.parametrize("lengths", [[1], [1, 1], [1, 4]])
def test_no_nan_short_sentences_and_padded_rows(lengths):
    attn = NgramSpanAttention(D, HEADS, E, n=4, attn_dropout=0.5).train()
    lengths = torch.tensor(lengths)
    h = torch.randn(len(lengths), int(lengths.max()) + 2, D, requires_grad=True)
    out = attn(h, lengths)
    out.sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(h.grad).all()


def test_rejects_empty_sentence_odd_size_and_bad_order():
    with pytest.raises(ValueError, match="1 .. T - 2"):
        NgramSpanAttention(D, HEADS, E)(torch.randn(2, 5, D), torch.tensor([0, 3]))
    with pytest.raises(ValueError, match="even"):
        NgramSpanAttention(7, HEADS, E)
    with pytest.raises(ValueError, match=">= 1"):
        NgramSpanAttention(D, HEADS, E, n=0)


def test_attention_grows_with_n_times_L_squared(monkeypatch):
    """The span matrix is linear in L, the attention is not: every one of the T = L + 2 words attends over all
    S ~ n * L spans, so the score matrix is [b, H, T, S] (the docstring's cost statement)."""
    import structattn.bna.nsa as nsa_module

    seen = []
    real = nsa_module.masked_attention

    def spy(q, k, v, mask, *args):
        seen.append((q.shape[-2], k.shape[-2]))
        return real(q, k, v, mask, *args)

    monkeypatch.setattr(nsa_module, "masked_attention", spy)
    n = 4
    attn = NgramSpanAttention(D, HEADS, E, n=n).eval()
    for L in (10, 40):
        attn(torch.randn(1, L + 2, D), torch.tensor([L]))
    spans = [sum(L + 1 - g for g in range(1, n + 1)) for L in (10, 40)]
    assert seen == [(12, spans[0]), (42, spans[1])]
    scores = [t * s for t, s in seen]
    assert scores[1] / scores[0] > 15  # 4x the length: ~16x the scores (quadratic), not 4x (linear)
    assert scores[1] > 3 * 42 * 42  # about n times self-attention's T x T at the same length
