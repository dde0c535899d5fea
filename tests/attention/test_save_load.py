"""save_pretrained / from_pretrained: settings in config.json, gates in model.safetensors, stock loaders still work."""
from __future__ import annotations

import json
import warnings

import pytest
import torch
from attn_helpers import random_batch, tiny_model

import structattn.models.encoder as sm
from structattn.attention import force_gate, gate_parameters
from structattn.errors import UserError


@pytest.fixture
def stock_dir(tmp_path):
    """A tiny stock BERT checkpoint (what a user downloads)."""
    model = tiny_model("bert")
    path = tmp_path / "stock"
    model.save_pretrained(path)
    return path


def _trained(model, mask_batch):
    """Give the gates non-initial values (so that loading them is visible)."""
    with torch.no_grad():
        for p in gate_parameters(model):
            p.add_(torch.randn_like(p) * 0.5)
    return model


def test_from_pretrained_lifts_every_pretrained_weight(stock_dir):
    stock = tiny_model("bert")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        model = sm.from_pretrained(str(stock_dir), mechanism="sla", m=4)
    stock_state = stock.state_dict()
    for name, tensor in model.state_dict().items():
        if ".structattn_gate." in name:
            continue
        assert torch.equal(tensor, stock_state[name]), name
    assert model.config.structattn["m"] == 4 and model.config._attn_implementation == "structattn"
    assert len(gate_parameters(model)) == 2 * 2


def test_round_trip_keeps_settings_gates_and_outputs(stock_dir, tmp_path):
    ids, att, mask = random_batch()
    model = sm.from_pretrained(str(stock_dir), task="sequence-classification", mechanism="sla", m=4, gate="head",
                               layers=[1], gate_bias=-1.0, num_labels=3)
    _trained(model, mask)
    model.eval()
    want = model(input_ids=ids, attention_mask=att, structure_mask=mask).logits
    out_dir = tmp_path / "run"
    model.save_pretrained(out_dir)

    saved = json.loads((out_dir / "config.json").read_text())
    assert saved["structattn"]["name"] == "sla" and saved["structattn"]["m"] == 4
    assert saved["structattn"]["gate"] == "head" and saved["structattn"]["layers"] == [1]
    from safetensors import safe_open

    with safe_open(str(out_dir / "model.safetensors"), framework="pt") as fh:
        assert any(".structattn_gate." in k for k in fh.keys())

    back = sm.from_pretrained(str(out_dir), task="sequence-classification").eval()
    assert back.config.structattn == model.config.structattn
    assert torch.equal(back(input_ids=ids, attention_mask=att, structure_mask=mask).logits, want)


def test_automodel_loads_the_folder_with_its_mechanism(stock_dir, tmp_path):
    import transformers as T

    ids, att, mask = random_batch()
    model = _trained(sm.from_pretrained(str(stock_dir), task="sequence-classification", num_labels=2), mask).eval()
    model.save_pretrained(tmp_path / "run")
    auto = T.AutoModelForSequenceClassification.from_pretrained(tmp_path / "run").eval()
    assert auto.config._attn_implementation == "structattn"
    assert any(".structattn_gate." in n for n, _ in auto.named_parameters())
    want = model(input_ids=ids, attention_mask=att, structure_mask=mask).logits
    assert torch.equal(auto(input_ids=ids, attention_mask=att, structure_mask=mask).logits, want)


def test_gates_follow_the_encoder_between_tasks(stock_dir, tmp_path):
    ids, att, mask = random_batch()
    base = _trained(sm.from_pretrained(str(stock_dir), mechanism="hybrid"), mask).eval()
    want = base(input_ids=ids, attention_mask=att, structure_mask=mask).last_hidden_state
    base.save_pretrained(tmp_path / "enc")
    clf = sm.from_pretrained(str(tmp_path / "enc"), task="token-classification", num_labels=5).eval()
    assert clf.config.structattn["name"] == "hybrid"
    got = clf.bert(input_ids=ids, attention_mask=att, structure_mask=mask).last_hidden_state
    assert torch.equal(got, want)


def test_another_mechanism_on_load_starts_fresh(stock_dir, tmp_path):
    model = _trained(sm.from_pretrained(str(stock_dir), mechanism="sla"), None)
    model.save_pretrained(tmp_path / "run")
    other = sm.from_pretrained(str(tmp_path / "run"), mechanism="wla", k=2)
    assert other.config.structattn["name"] == "wla" and other.config.structattn["k"] == 2
    assert not torch.equal(gate_parameters(other)[0], gate_parameters(model)[0])


def test_same_mechanism_with_new_options_keeps_gates(stock_dir, tmp_path):
    model = _trained(sm.from_pretrained(str(stock_dir), mechanism="sla"), None)
    model.save_pretrained(tmp_path / "run")
    again = sm.from_pretrained(str(tmp_path / "run"), m=5, kernel="exact")
    assert again.config.structattn["m"] == 5 and again.config.structattn["kernel"] == "exact"
    assert torch.equal(gate_parameters(again)[0], gate_parameters(model)[0])


def test_bad_task_and_attn_implementation(stock_dir):
    with pytest.raises(UserError, match="valid tasks"):
        sm.from_pretrained(str(stock_dir), task="summarisation")
    with pytest.raises(UserError, match="base="):
        sm.from_pretrained(str(stock_dir), attn_implementation="eager")
    with pytest.raises(UserError, match="valid mechanisms"):
        sm.from_pretrained(str(stock_dir), mechanism="lisa")


def test_eager_base_round_trip(stock_dir, tmp_path):
    ids, att, mask = random_batch()
    model = sm.from_pretrained(str(stock_dir), mechanism="sdoi", base="eager").eval()
    assert model.config.structattn["base"] == "eager"
    want = model(input_ids=ids, attention_mask=att, structure_mask=mask).last_hidden_state
    model.save_pretrained(tmp_path / "run")
    back = sm.from_pretrained(str(tmp_path / "run")).eval()
    assert back.config.structattn["base"] == "eager"
    assert torch.equal(back(input_ids=ids, attention_mask=att, structure_mask=mask).last_hidden_state, want)


@pytest.mark.parametrize("mechanism,unit", [("hybrid", "token"), ("wla", "word")])
def test_checkpoint_from_before_window_unit_loads_with_its_unit(stock_dir, tmp_path, mechanism, unit):
    ids, att, _ = random_batch()
    model = _trained(sm.from_pretrained(str(stock_dir), mechanism=mechanism), None).eval()
    model.save_pretrained(tmp_path / "run")
    config = tmp_path / "run" / "config.json"
    saved = json.loads(config.read_text())
    assert saved["structattn"]["window_unit"] == unit
    del saved["structattn"]["window_unit"]  # what a checkpoint written before the field existed holds
    config.write_text(json.dumps(saved))
    back = sm.from_pretrained(str(tmp_path / "run")).eval()
    assert back.config.structattn["window_unit"] == unit
    if unit == "token":  # the same band without structure_mask, the same gates: the same output
        assert torch.equal(back(input_ids=ids, attention_mask=att).last_hidden_state,
                           model(input_ids=ids, attention_mask=att).last_hidden_state)
    else:
        with pytest.raises(UserError, match="word boundaries"):
            back(input_ids=ids, attention_mask=att)


def test_gates_missing_from_the_checkpoint_are_reported(stock_dir, tmp_path):
    model = _trained(sm.from_pretrained(str(stock_dir), mechanism="sla", layers=[1]), None)
    model.save_pretrained(tmp_path / "run")
    with pytest.warns(UserWarning, match="no saved value for 2 gate parameter"):
        more = sm.from_pretrained(str(tmp_path / "run"), layers=None)  # layer 0's gate was never trained
    assert torch.equal(gate_parameters(more)[2], gate_parameters(model)[0])  # layer 1's gate is loaded
