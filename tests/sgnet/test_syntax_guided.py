"""The syntax-guided layer (fast path vs plain twin, gradcheck, initialisations) and the aggregations of SG-Net."""
from __future__ import annotations

import pytest
import torch
import transformers as T

from structattn.errors import UserError
from structattn.sgnet.layer import (BiAttentionAggregation, LayerSizes, SyntaxGuidedBlock, SyntaxGuidedLayer,
                                             check_mask, copy_last_layer)

SIZES = LayerSizes(hidden=16, heads=4, intermediate=32, hidden_dropout=0.1, attention_dropout=0.1)
COMMON = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
              max_position_embeddings=64)


def random_mask(b: int, t: int, seed: int = 0, p: float = 0.3) -> torch.Tensor:
    """[b, t, t] bool with the diagonal set (no empty row)."""
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(b, t, t, generator=g) < p) | torch.eye(t, dtype=torch.bool)


def real_tokens(b: int, t: int) -> torch.Tensor:
    """[b, t] bool; example 1 (when there is one) padded from position t - 2."""
    real = torch.ones(b, t, dtype=torch.bool)
    if b > 1:
        real[1, t - 2:] = False
    return real


# ----------------------------------------------------------------------------------------- the layer


def test_fast_path_matches_reference_forward_and_backward():
    torch.manual_seed(0)
    layer = SyntaxGuidedLayer(SIZES).eval()
    h = torch.randn(3, 7, 16, requires_grad=True)
    mask = random_mask(3, 7)
    fast = layer(h, mask)
    (gh_fast,) = torch.autograd.grad(fast.square().sum(), h)
    fast_params = torch.autograd.grad(layer(h, mask).square().sum(), list(layer.parameters()))
    ref = layer(h, mask, reference=True)
    (gh_ref,) = torch.autograd.grad(ref.square().sum(), h)
    ref_params = torch.autograd.grad(layer(h, mask, reference=True).square().sum(), list(layer.parameters()))
    torch.testing.assert_close(fast, ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(gh_fast, gh_ref, atol=1e-4, rtol=1e-4)
    for a, b in zip(fast_params, ref_params):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
    # the mask matters: a different mask gives a different output
    assert not torch.allclose(fast, layer(h, torch.ones(3, 7, 7, dtype=torch.bool)), atol=1e-3)


def test_reference_follows_the_mask_by_hand():
    """One query that may see only itself: its attention output is its own value vector."""
    torch.manual_seed(1)
    layer = SyntaxGuidedLayer(SIZES).eval()
    h = torch.randn(1, 4, 16)
    mask = torch.ones(1, 4, 4, dtype=torch.bool)
    mask[0, 2] = False
    mask[0, 2, 2] = True
    q = layer.query(h).view(1, 4, 4, 4).transpose(1, 2)
    k = layer.key(h).view(1, 4, 4, 4).transpose(1, 2)
    v = layer.value(h).view(1, 4, 4, 4).transpose(1, 2)
    from structattn.attention.multihead import masked_attention, reference_masked_attention
    for fn in (masked_attention, reference_masked_attention):
        out = fn(q, k, v, mask.unsqueeze(1))
        torch.testing.assert_close(out[0, :, 2], v[0, :, 2], atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("reference", [False, True])
def test_gradcheck_float64(reference):
    torch.manual_seed(2)
    sizes = LayerSizes(hidden=8, heads=2, intermediate=12)
    layer = SyntaxGuidedLayer(sizes).double().eval()
    h = torch.randn(2, 4, 8, dtype=torch.float64, requires_grad=True)
    mask = random_mask(2, 4, seed=3)
    assert torch.autograd.gradcheck(lambda x: layer(x, mask, reference=reference), (h,), eps=1e-6, atol=1e-5)


def test_dropout_only_in_training():
    torch.manual_seed(3)
    layer = SyntaxGuidedLayer(LayerSizes(hidden=16, heads=4, intermediate=32, hidden_dropout=0.5,
                                         attention_dropout=0.5))
    h, mask = torch.randn(2, 5, 16), random_mask(2, 5)
    layer.eval()
    torch.testing.assert_close(layer(h, mask), layer(h, mask), atol=0, rtol=0)
    layer.train()
    assert not torch.allclose(layer(h, mask), layer(h, mask))


def test_mask_errors():
    layer = SyntaxGuidedLayer(SIZES).eval()
    h = torch.randn(2, 5, 16)
    empty = random_mask(2, 5)
    empty[1, 3] = False
    with pytest.raises(UserError, match="example 1, position 3"):
        layer(h, empty)
    with pytest.raises(UserError, match=r"expected \[batch, T, T\] = \[2, 5, 5\]"):
        layer(h, random_mask(2, 4))
    # 0/1 masks are read as bool
    assert check_mask(random_mask(2, 5).long(), 2, 5).dtype == torch.bool


def test_fresh_init_is_berts():
    sizes = LayerSizes(hidden=64, heads=4, intermediate=128, initializer_range=0.05)
    layer = SyntaxGuidedLayer(sizes)
    for lin in (layer.query, layer.key, layer.value, layer.attention_output, layer.intermediate, layer.output):
        assert abs(float(lin.weight.detach().std()) - 0.05) < 0.005
        assert float(lin.bias.detach().abs().max()) == 0.0
    for norm in (layer.attention_norm, layer.output_norm):
        assert torch.equal(norm.weight, torch.ones(64)) and torch.equal(norm.bias, torch.zeros(64))


def test_sizes_from_configs():
    s = LayerSizes.from_config(T.BertConfig(**COMMON, hidden_dropout_prob=0.2, attention_probs_dropout_prob=0.3,
                                            layer_norm_eps=1e-7, initializer_range=0.01))
    assert (s.hidden, s.heads, s.intermediate, s.hidden_dropout, s.attention_dropout, s.layer_norm_eps,
            s.activation, s.initializer_range) == (32, 4, 64, 0.2, 0.3, 1e-7, "gelu", 0.01)
    d = LayerSizes.from_config(T.DistilBertConfig(vocab_size=100, dim=32, n_layers=2, n_heads=4, hidden_dim=48,
                                                  dropout=0.15, attention_dropout=0.25))
    assert (d.hidden, d.heads, d.intermediate, d.hidden_dropout, d.attention_dropout) == (32, 4, 48, 0.15, 0.25)
    with pytest.raises(UserError, match="not a multiple"):
        LayerSizes.from_config(T.BertConfig(**{**COMMON, "num_attention_heads": 5}))


# ----------------------------------------------------------------------------------------- copy init


def _tiny(model_type: str):
    """A tiny random encoder of ``model_type`` (the attention tests' configurations), in eval mode."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "attention"))
    from attn_helpers import tiny_config

    torch.manual_seed(4)
    return T.AutoModel.from_config(tiny_config(model_type)).eval()


@pytest.mark.parametrize("model_type", ["bert", "roberta", "xlm-roberta", "electra", "distilbert"])
def test_copy_reproduces_the_last_encoder_layer(model_type):
    encoder = _tiny(model_type)
    layer = SyntaxGuidedLayer(LayerSizes.from_config(encoder.config)).eval()
    copy_last_layer(layer, encoder)
    ids = torch.randint(5, 100, (2, 9))
    att = torch.ones(2, 9, dtype=torch.long)
    att[1, 6:] = 0
    with torch.no_grad():
        states = encoder(input_ids=ids, attention_mask=att, output_hidden_states=True).hidden_states
        real = att.bool()
        mask = real.unsqueeze(1).expand(2, 9, 9)  # plain attention over the real tokens
        out = layer(states[-2], mask)
    torch.testing.assert_close(out[real], states[-1][real], atol=1e-5, rtol=1e-5)


def test_copy_refuses_other_encoders():
    encoder = _tiny("albert")
    layer = SyntaxGuidedLayer(LayerSizes.from_config(encoder.config))
    with pytest.raises(UserError, match="BERT family naming .* DistilBERT"):
        copy_last_layer(layer, encoder)


# ----------------------------------------------------------------------------------------- aggregations


def _block(kind: str, alpha=0.5, seed: int = 5) -> SyntaxGuidedBlock:
    torch.manual_seed(seed)
    return SyntaxGuidedBlock(SIZES, kind, alpha).eval()


def _inputs(b: int = 2, t: int = 6, seed: int = 6):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, t, 16, generator=g), real_tokens(b, t), random_mask(b, t, seed=seed)


def _extra_layer(block: SyntaxGuidedBlock, h, real, sg_mask):
    return block.layer(h, block.attention_mask(real, sg_mask))


def test_dual_fixed_alpha():
    block = _block("dual", alpha=0.3)
    h, real, sg = _inputs()
    torch.testing.assert_close(block(h, real, sg), 0.3 * h + 0.7 * _extra_layer(block, h, real, sg))
    assert not list(block.aggregation.parameters())
    with pytest.raises(UserError, match="alpha"):
        SyntaxGuidedBlock(SIZES, "dual", 1.5)


def test_dual_learned_weights():
    block = _block("dual", alpha=None)
    agg = block.aggregation
    assert torch.equal(agg.w.detach(), torch.tensor([0.5, 0.5])) and torch.equal(agg.gamma.detach(), torch.ones(1))
    with torch.no_grad():
        agg.w.copy_(torch.tensor([0.2, 1.0]))
        agg.gamma.fill_(1.7)
    h, real, sg = _inputs()
    h2 = _extra_layer(block, h, real, sg)
    e0, e1 = torch.tensor(0.2).exp(), torch.tensor(1.0).exp()
    expected = 1.7 * (e0 / (e0 + e1) * h + e1 / (e0 + e1) * h2)
    out = block(h, real, sg)
    torch.testing.assert_close(out, expected)
    out.sum().backward()
    assert agg.w.grad is not None and float(agg.w.grad.abs().sum()) > 0 and agg.gamma.grad is not None


def test_sg_only_and_concat():
    h, real, sg = _inputs()
    block = _block("sg_only")
    torch.testing.assert_close(block(h, real, sg), _extra_layer(block, h, real, sg))
    block = _block("concat")
    h2 = _extra_layer(block, h, real, sg)
    lin = block.aggregation.project
    torch.testing.assert_close(block(h, real, sg), torch.cat([h, h2], -1) @ lin.weight.T + lin.bias)


def _brute_biattention(agg: BiAttentionAggregation, h, h2, real):
    b, t, d = h.shape
    w = agg.similarity.weight[0]
    out = torch.empty_like(h)
    for e in range(b):
        keys = [j for j in range(t) if real[e, j]]
        s = torch.tensor([[float(w @ torch.cat([h[e, i], h2[e, j], h[e, i] * h2[e, j]])) for j in keys]
                          for i in range(t)], dtype=h.dtype)
        u = torch.softmax(s, dim=1) @ h2[e, keys]
        q2c = torch.softmax(s.max(dim=1).values[keys], dim=0) @ h[e, keys]
        for i in range(t):
            g = torch.cat([h[e, i], u[i], h[e, i] * u[i], h[e, i] * q2c])
            out[e, i] = agg.project.weight @ g + agg.project.bias
    return out


def test_biattention_against_brute_force():
    block = _block("biattention")
    h, real, sg = _inputs()
    h2 = _extra_layer(block, h, real, sg)
    with torch.no_grad():
        torch.testing.assert_close(block.aggregation(h, h2, real), _brute_biattention(block.aggregation, h, h2, real),
                                   atol=1e-5, rtol=1e-5)
        # padding does not leak in: changing padded positions' vectors leaves real positions unchanged
        h_pad, h2_pad = h.clone(), h2.clone()
        h_pad[~real] += 5.0
        h2_pad[~real] -= 3.0
        a = block.aggregation(h, h2, real)[real]
        torch.testing.assert_close(block.aggregation(h_pad, h2_pad, real)[real], a)


@pytest.mark.parametrize("kind", ["dual", "sg_only", "concat", "biattention"])
def test_tokens_outside_sg_tokens_keep_h(kind):
    block = _block(kind, alpha=None if kind == "dual" else 0.5)
    h, real, sg = _inputs()
    sg_tokens = real.clone()
    sg_tokens[:, 0] = False
    sg_tokens[0, 3] = False
    out = block(h, real, sg, sg_tokens)
    assert torch.equal(out[~sg_tokens], h[~sg_tokens])
    assert not torch.allclose(out[sg_tokens], h[sg_tokens])
    torch.testing.assert_close(out[sg_tokens], block(h, real, sg)[sg_tokens])
    with pytest.raises(UserError, match="sg_tokens has shape"):
        block(h, real, sg, sg_tokens[:, :3])


def test_all_true_mask_equals_vanilla_layer():
    h, real, _ = _inputs()
    sg_only, vanilla = _block("sg_only"), _block("vanilla", seed=9)
    vanilla.load_state_dict(sg_only.state_dict())
    full = torch.ones(2, 6, 6, dtype=torch.bool)
    torch.testing.assert_close(sg_only(h, real, full), vanilla(h, real))
    # vanilla ignores sg_mask and sg_tokens (it has no syntax-guided output)
    torch.testing.assert_close(vanilla(h, real, random_mask(2, 6), ~real), vanilla(h, real))


def test_block_errors():
    with pytest.raises(UserError, match="valid aggregations: dual, sg_only, vanilla, concat, biattention"):
        SyntaxGuidedBlock(SIZES, "sum")
    h, real, _ = _inputs()
    with pytest.raises(UserError, match="needs sg_mask"):
        _block("dual")(h, real)
    with pytest.raises(UserError, match="unknown init"):
        _block("dual").init_from("random")
