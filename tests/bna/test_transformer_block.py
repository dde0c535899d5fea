"""TransformerBlock (post-LN, BNA Eq. 10-11), FeedForward, the SelfAttention baseline and the layer registry."""
import pytest
import torch
import torch.nn.functional as F

from layer_refs import compare_with_grads, pad_batch, ref_self_attention
from structattn.errors import UserError
from structattn.bna.bimsa import BiMSA
from structattn.bna.nsa import NgramSpanAttention
from structattn.attention.multihead import check_lengths, self_attention_mask
from structattn.bna.transformer_block import LAYER_KINDS, FeedForward, SelfAttention, TransformerBlock, build_layer

D, HEADS, E = 8, 2, 4


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# --------------------------------------------------------------------------------------------- SelfAttention


def test_self_attention_matches_loop_reference_forward_and_backward():
    attn = SelfAttention(D, HEADS, E).eval()
    lengths = torch.tensor([3, 1, 5])
    compare_with_grads(attn, ref_self_attention, torch.randn(3, 7, D), lengths)


def test_self_attention_extra_padding_beyond_longest_sentence():
    attn = SelfAttention(D, HEADS, E).eval()
    compare_with_grads(attn, ref_self_attention, torch.randn(2, 9, D), torch.tensor([2, 4]))


def test_self_attention_padding_invariance():
    attn = SelfAttention(D, HEADS, E).eval()
    alone = torch.randn(1, 5, D)  # 3 words
    batch = pad_batch([torch.randn(8, D), alone[0], torch.randn(3, D)], T=8, d=D)
    lengths = torch.tensor([6, 3, 1])
    torch.testing.assert_close(attn(batch, lengths)[1, :5], attn(alone, torch.tensor([3]))[0])


def test_self_attention_gradcheck_float64():
    attn = SelfAttention(4, 2, 2).double().eval()
    h = torch.randn(2, 5, 4, dtype=torch.float64, requires_grad=True)
    lengths = torch.tensor([3, 1])
    assert torch.autograd.gradcheck(lambda x: attn(x, lengths), (h,))


@pytest.mark.parametrize("lengths", [[1], [1, 1], [1, 4], [0, 2]])
def test_self_attention_no_nan_short_and_padded(lengths):
    attn = SelfAttention(D, HEADS, E, attn_dropout=0.5).train()
    lengths = torch.tensor(lengths)
    h = torch.randn(len(lengths), int(lengths.max()) + 2, D, requires_grad=True)
    out = attn(h, lengths)
    out.sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(h.grad).all()


def test_mask_rows_never_empty_and_padding_excluded():
    lengths = torch.tensor([0, 2, 5])
    mask = self_attention_mask(lengths, 8)[:, 0]
    assert mask.any(-1).all()
    for s, L in enumerate(lengths.tolist()):
        real = L + 2
        assert mask[s, :real, :real].all() and not mask[s, :real, real:].any()
        pad = mask[s, real:, :]
        assert torch.equal(pad, torch.eye(8, dtype=torch.bool)[real:])


def test_check_lengths_rejects_sentence_longer_than_sequence():
    with pytest.raises(ValueError, match="T - 2"):
        SelfAttention(D, HEADS, E)(torch.randn(2, 5, D), torch.tensor([3, 4]))
    with pytest.raises(ValueError, match="shape"):
        check_lengths(torch.randn(2, 5, D), torch.tensor([3]))


# --------------------------------------------------------------------------------------------- block


def test_feed_forward_is_linear_relu_dropout_linear():
    ff = FeedForward(D, 16, dropout=0.0)
    x = torch.randn(2, 3, D)
    expected = F.relu(x @ ff.w1.weight.T + ff.w1.bias) @ ff.w2.weight.T + ff.w2.bias
    torch.testing.assert_close(ff(x), expected)
    assert ff.w1.out_features == 16 and ff.w2.in_features == 16


@pytest.mark.parametrize("kind", ["sa", "bimsa", "nsa"])
def test_block_is_post_layer_norm_eq_10_11(kind):
    block = build_layer(kind, d_model=D, heads=HEADS, d_head=E, d_ff=16, ngram=2).eval()
    with torch.no_grad():  # non-trivial LayerNorm affine parameters so that a swapped norm would show
        for norm in (block.attn_norm, block.ffn_norm):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.normal_()
    h, lengths = torch.randn(2, 6, D), torch.tensor([4, 2])
    n1, n2 = block.attn_norm, block.ffn_norm
    h1 = F.layer_norm(h + block.attention(h, lengths), (D,), n1.weight, n1.bias, n1.eps)
    ffn = F.relu(h1 @ block.ffn.w1.weight.T + block.ffn.w1.bias) @ block.ffn.w2.weight.T + block.ffn.w2.bias
    expected = F.layer_norm(h1 + ffn, (D,), n2.weight, n2.bias, n2.eps)
    torch.testing.assert_close(block(h, lengths), expected)


def test_block_dropout_only_in_training():
    block = build_layer("sa", d_model=D, heads=HEADS, d_head=E, d_ff=16, residual_dropout=0.5, ff_dropout=0.5,
                        attn_dropout=0.5)
    h, lengths = torch.randn(2, 6, D), torch.tensor([4, 2])
    block.train()
    assert not torch.allclose(block(h, lengths), block(h, lengths))
    block.eval()
    torch.testing.assert_close(block(h, lengths), block(h, lengths))


@pytest.mark.parametrize("kind", ["sa", "bimsa", "nsa"])
def test_block_padding_invariance(kind):
    block = build_layer(kind, d_model=D, heads=HEADS, d_head=E, d_ff=16, ngram=3).eval()
    alone = torch.randn(1, 4, D)  # 2 words
    batch = pad_batch([torch.randn(7, D), alone[0]], T=7, d=D)
    out = block(batch, torch.tensor([5, 2]))
    torch.testing.assert_close(out[1, :4], block(alone, torch.tensor([2]))[0])


# --------------------------------------------------------------------------------------------- registry


def test_layer_kinds_and_build_layer_types():
    assert set(LAYER_KINDS) == {"sa", "bimsa", "nsa"}
    expected = {"sa": SelfAttention, "bimsa": BiMSA, "nsa": NgramSpanAttention}
    for kind, cls in expected.items():
        block = build_layer(kind, d_model=D, heads=HEADS, d_head=E, d_ff=16, attn_dropout=0.1, ngram=3)
        assert isinstance(block, TransformerBlock) and type(block.attention) is cls
        assert block.attention.heads == HEADS and block.attention.attn_dropout == 0.1
    assert build_layer("nsa", d_model=D, heads=HEADS, d_head=E, ngram=5).attention.n == 5


def test_build_layer_dropouts_reach_their_modules():
    block = build_layer("sa", d_model=D, heads=HEADS, d_head=E, residual_dropout=0.3, ff_dropout=0.4)
    assert block.residual_dropout.p == 0.3 and block.ffn.dropout.p == 0.4


def test_unknown_layer_kind_lists_valid_kinds():
    with pytest.raises(UserError, match="'lstm'.*bimsa, nsa, sa"):
        build_layer("lstm")
