"""BiMSA (BNA Eq. 12-14): loop reference, masks vs the relations module, directional halves, padding, gradcheck."""
import numpy as np
import pytest
import torch

from layer_refs import compare_with_grads, pad_batch, ref_bimsa
from structattn.bna.bimsa import BiMSA, directional_masks
from structattn.structure import relations

D, HEADS, E = 8, 2, 4


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def test_matches_loop_reference_forward_and_backward():
    attn = BiMSA(D, HEADS, E).eval()
    compare_with_grads(attn, ref_bimsa, torch.randn(3, 8, D), torch.tensor([4, 1, 6]))


def test_value_size_is_half_the_head_size_and_halves_project_to_half_the_model():
    attn = BiMSA(16, 4, 8)
    assert attn.query.out_features == attn.key.out_features == 32
    assert attn.value.out_features == 16  # 4 heads x 8 / 2, shared by both directions (Eq. 14)
    assert attn.out_left.in_features == attn.out_right.in_features == 16
    assert attn.out_left.out_features == attn.out_right.out_features == 8


def test_odd_sizes_rejected():
    with pytest.raises(ValueError, match="even"):
        BiMSA(7, 2, 4)
    with pytest.raises(ValueError, match="even"):
        BiMSA(8, 2, 3)


def test_masks_equal_relations_on_real_positions():
    lengths = torch.tensor([3, 1, 6, 0])
    T = 8
    left, right = directional_masks(lengths, T)
    for s, L in enumerate(lengths.tolist()):
        n = L + 2  # START, words, STOP
        dummy_heads = np.zeros((1, n), dtype=np.int64)
        assert np.array_equal(left[s, 0, :n, :n].numpy(), relations.backward_masks(dummy_heads)[0])
        assert np.array_equal(right[s, 0, :n, :n].numpy(), relations.forward_masks(dummy_heads)[0])
        assert np.array_equal(left[s, 0, :n, :n].numpy(), np.tril(np.ones((n, n), dtype=bool)))  # j <= i
        assert np.array_equal(right[s, 0, :n, :n].numpy(), np.triu(np.ones((n, n), dtype=bool)))  # j >= i
        for m in (left, right):
            assert not m[s, 0, :n, n:].any()  # padding keys excluded
            assert torch.equal(m[s, 0, n:], torch.eye(T, dtype=torch.bool)[n:])  # padded rows: themselves


def test_directional_halves_at_attention_output():
    """Changing word t moves the left half only at positions >= t and the right half only at positions <= t."""
    attn = BiMSA(D, HEADS, E).eval()
    L, T = 5, 7
    h, lengths = torch.randn(1, T, D), torch.tensor([L])
    base = attn(h, lengths)
    half = D // 2
    for t in range(L + 2):
        moved = h.clone()
        moved[0, t] += torch.randn(D) * 3
        diff = (attn(moved, lengths) - base)[0].abs()
        left_changed = diff[:, :half].amax(-1) > 1e-6
        right_changed = diff[:, half:].amax(-1) > 1e-6
        pos = torch.arange(T)
        real = pos < L + 2
        assert torch.equal(left_changed, (pos >= t) & real), t
        assert torch.equal(right_changed, (pos <= t) & real), t


def test_left_half_first_seen_at_sentence_boundaries():
    """The first half summarises the left: at START (position 0) it can only have seen START itself."""
    attn = BiMSA(D, HEADS, E).eval()
    h = torch.randn(1, 6, D)
    out = attn(h, torch.tensor([4]))
    v0 = h[0, 0] @ attn.value.weight.T  # softmax over one key = that key's value, in every head
    torch.testing.assert_close(out[0, 0, :D // 2], attn.out_left(v0))
    # and the right half at STOP (position 5) has seen STOP only
    v5 = h[0, 5] @ attn.value.weight.T
    torch.testing.assert_close(out[0, 5, D // 2:], attn.out_right(v5))


def test_padding_invariance():
    attn = BiMSA(D, HEADS, E).eval()
    alone = torch.randn(1, 5, D)
    batch = pad_batch([torch.randn(9, D), alone[0], torch.randn(3, D)], T=9, d=D)
    out = attn(batch, torch.tensor([7, 3, 1]))
    torch.testing.assert_close(out[1, :5], attn(alone, torch.tensor([3]))[0])


def test_gradcheck_float64():
    attn = BiMSA(4, 2, 2).double().eval()
    h = torch.randn(2, 5, 4, dtype=torch.float64, requires_grad=True)
    lengths = torch.tensor([3, 1])
    assert torch.autograd.gradcheck(lambda x: attn(x, lengths), (h,))


@pytest.mark.parametrize("lengths", [[1], [1, 1], [1, 4], [0, 3]])
def test_no_nan_short_sentences_and_padded_rows(lengths):
    attn = BiMSA(D, HEADS, E, attn_dropout=0.5).train()
    lengths = torch.tensor(lengths)
    h = torch.randn(len(lengths), int(lengths.max()) + 2, D, requires_grad=True)
    out = attn(h, lengths)
    out.sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(h.grad).all()
