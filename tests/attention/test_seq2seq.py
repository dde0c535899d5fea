"""Mechanisms in encoder-decoder models (tiny random Marian and BART): encoder self-attention only."""
from __future__ import annotations

import copy

import pytest
import torch

from structattn.attention import force_gate, gate_parameters, record
from structattn.attention.integration import CONCAT_ATTR, GATE_ATTR, GAUSSIAN_ATTR, attention_modules
from structattn.models.encoder import apply_mechanism, from_pretrained

MECHANISMS = ["hybrid", "local", "hybrid_concat", "gauss_luong", "gauss_sperber", "gauss_yang", "sla"]


def tiny_seq2seq(model_type: str = "marian", layers: int = 3, seed: int = 0):
    import transformers as T

    common = dict(vocab_size=60, d_model=32, encoder_layers=layers, decoder_layers=2, encoder_attention_heads=4,
                  decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
                  pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=0)
    torch.manual_seed(seed)
    if model_type == "marian":
        return T.MarianMTModel(T.MarianConfig(**common)).eval()
    return T.BartForConditionalGeneration(T.BartConfig(**common)).eval()


def _batch(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, 60, (2, 9), generator=g)
    att = torch.ones(2, 9, dtype=torch.long)
    att[1, 6:] = 0
    ids[1, 6:] = 0
    dec = torch.randint(3, 60, (2, 5), generator=g)
    structure = torch.rand(2, 9, 9, generator=g) > 0.5
    structure |= torch.eye(9, dtype=torch.bool)
    return dict(input_ids=ids, attention_mask=att, decoder_input_ids=dec), structure


def _logits(model, batch, **extra):
    return model(**batch, **extra).logits


@pytest.mark.parametrize("model_type", ["marian", "bart"])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_only_the_lowest_encoder_self_attention_layers_get_the_mechanism(model_type, mechanism):
    model = apply_mechanism(tiny_seq2seq(model_type), mechanism, layers=2)
    encoder_modules = attention_modules(model)
    assert len(encoder_modules) == 3
    assert [m._structattn_active for m in encoder_modules] == [True, True, False]
    for module in model.get_decoder().modules():
        assert not hasattr(module, "_structattn_rt")
    expected = {"hybrid": GATE_ATTR, "sla": GATE_ATTR, "local": None, "hybrid_concat": CONCAT_ATTR}.get(
        mechanism, GAUSSIAN_ATTR)
    names = {name for name, _ in model.named_parameters() if ".structattn_" in name}
    if expected is None:
        assert not names
    else:
        assert names and all(f".{expected}." in n and n.startswith("model.encoder.layers.") for n in names), names


@pytest.mark.parametrize("model_type", ["marian", "bart"])
def test_gate_zero_and_all_true_local_masks_are_the_stock_model(model_type):
    batch, _ = _batch()
    stock = tiny_seq2seq(model_type)
    want = _logits(stock, batch)
    hybrid = apply_mechanism(copy.deepcopy(stock), "hybrid", kernel="exact")
    with force_gate(hybrid, 0.0):
        assert torch.equal(_logits(hybrid, batch), want)
    # a band wider than the input is every key: local-only and hybrid equal global attention
    for name in ("local", "hybrid"):
        wide = apply_mechanism(copy.deepcopy(stock), name, k=20, kernel="exact")
        torch.testing.assert_close(_logits(wide, batch), want, atol=1e-5, rtol=1e-5)
    # the concat projection starts as the mean of the two outputs: equal outputs give the stock model
    concat = apply_mechanism(copy.deepcopy(stock), "hybrid_concat", k=20)
    torch.testing.assert_close(_logits(concat, batch), want, atol=1e-5, rtol=1e-5)


def test_local_only_attends_inside_the_band():
    batch, _ = _batch()
    model = apply_mechanism(tiny_seq2seq(), "local", k=1)
    out = model.model.encoder(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                              output_attentions=True)
    probs = out.attentions[0]  # [b, h, n, m] of the lowest layer
    i = torch.arange(9)
    outside = (i[:, None] - i[None, :]).abs() > 1
    real_rows = batch["attention_mask"][:, None, :, None].bool()
    assert torch.all(probs.masked_fill(~real_rows, 0)[:, :, outside] == 0)
    torch.testing.assert_close(probs[0].sum(-1), torch.ones(4, 9))


def test_gaussian_bias_changes_attention_and_trains():
    batch, _ = _batch()
    stock = tiny_seq2seq()
    model = apply_mechanism(copy.deepcopy(stock), "gauss_yang").train()
    torch.manual_seed(0)
    loss = model(**batch, labels=batch["decoder_input_ids"]).loss
    loss.backward()
    params = gate_parameters(model)
    assert len(params) == 2 * 3  # two layers x (W_p, u_p, u_d)
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in params)
    model.eval()
    assert not torch.allclose(_logits(model, batch), _logits(stock, batch))


def test_structure_mask_reaches_the_encoder_through_the_seq2seq_call():
    batch, structure = _batch()
    model = apply_mechanism(tiny_seq2seq(), "sla", layers=2, gate_bias=5.0)
    with_structure = _logits(model, batch, structure_mask=structure)
    everything = _logits(model, batch, structure_mask=torch.ones_like(structure))
    assert not torch.allclose(with_structure, everything)
    with record(model) as rec:
        _logits(model, batch, structure_mask=structure)
    assert len(rec.gates) == 2 and rec.gates[0].shape == (2, 9)


@pytest.mark.parametrize("mechanism", ["hybrid", "hybrid_concat", "gauss_sperber", "local"])
def test_save_load_round_trip_and_generate(tmp_path, mechanism):
    batch, _ = _batch()
    model = apply_mechanism(tiny_seq2seq(), mechanism)
    with torch.no_grad():
        for p in gate_parameters(model):
            p.add_(0.1)  # moved away from the initialisation: loading must restore these values
    model.save_pretrained(tmp_path)
    loaded = from_pretrained(str(tmp_path), task="translation").eval()
    assert loaded.config.structattn["name"] == mechanism
    torch.testing.assert_close(_logits(loaded, batch), _logits(model, batch))
    generated = loaded.generate(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], num_beams=3,
                                max_new_tokens=6)
    assert generated.shape[0] == 2


@pytest.mark.parametrize("model_type", ["marian", "bart"])
def test_from_pretrained_adds_the_mechanism_to_a_stock_translation_checkpoint(tmp_path, model_type):
    batch, _ = _batch()
    stock = tiny_seq2seq(model_type)
    stock.save_pretrained(tmp_path)
    model = from_pretrained(str(tmp_path), task="translation", mechanism="hybrid").eval()
    assert model.config.structattn["name"] == "hybrid" and model.config.structattn["layer_indices"] == [0, 1]
    with force_gate(model, 0.0):
        torch.testing.assert_close(_logits(model, batch), _logits(stock, batch))
