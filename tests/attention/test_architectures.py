"""Every supported architecture (tiny random configs) with both stock kernels; refused ones fail clearly."""
from __future__ import annotations

import copy

import pytest
import torch
from attn_helpers import random_batch, require_fused, tiny_config, tiny_model

from structattn.attention import force_gate, gate_parameters, record
from structattn.attention.integration import ARCHITECTURES
from structattn.errors import UserError
from structattn.models.encoder import apply_mechanism

ARCHS = sorted(ARCHITECTURES)
TASKS = ["sequence-classification", "token-classification", "question-answering", "multiple-choice"]


def _real(att):
    return att.bool()[..., None]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("base", ["sdpa", "eager"])
def test_exactness_on_every_architecture(arch, base):
    ids, att, mask = random_batch()
    stock = tiny_model(arch, base=base)
    want = stock(input_ids=ids, attention_mask=att).last_hidden_state
    exact = apply_mechanism(copy.deepcopy(stock), "sla", kernel="exact", base=base)
    with force_gate(exact, 0.0):
        assert torch.equal(exact(input_ids=ids, attention_mask=att, structure_mask=mask).last_hidden_state, want)
    everything = torch.ones_like(mask)
    assert torch.equal(exact(input_ids=ids, attention_mask=att, structure_mask=everything).last_hidden_state, want)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("base", ["sdpa", "eager"])
def test_fused_all_true_mask_is_the_stock_model_on_every_architecture(arch, base):
    require_fused()
    ids, att, mask = random_batch()
    stock = tiny_model(arch, base=base)
    want = stock(input_ids=ids, attention_mask=att).last_hidden_state
    fused = apply_mechanism(copy.deepcopy(stock), "sla", kernel="fused", base=base)
    got = fused(input_ids=ids, attention_mask=att, structure_mask=torch.ones_like(mask)).last_hidden_state
    # padding queries whose every key is masked (ModernBERT's sliding window) are garbage in eager; compare real ones
    assert torch.allclose(got * _real(att), want * _real(att), atol=5e-6)


@pytest.mark.parametrize("arch", ARCHS)
def test_structure_reaches_every_layer_and_gates_train(arch):
    ids, att, mask = random_batch()
    stock = tiny_model(arch)
    model = apply_mechanism(copy.deepcopy(stock), "sla").train()
    with record(model) as rec:
        out = model(input_ids=ids, attention_mask=att, structure_mask=mask).last_hidden_state
    assert len(rec.gates) == stock.config.num_hidden_layers
    out.pow(2).mean().backward()
    params = gate_parameters(model)
    assert params and all(p.grad is not None and p.grad.abs().sum() > 0 for p in params)
    ref = stock(input_ids=ids, attention_mask=att).last_hidden_state
    assert not torch.allclose(model.eval()(input_ids=ids, attention_mask=att, structure_mask=mask).last_hidden_state,
                              ref, atol=1e-4)


@pytest.mark.parametrize("arch", ["bert", "distilbert", "modernbert"])
@pytest.mark.parametrize("task", TASKS)
def test_task_heads(arch, task):
    ids, att, mask = random_batch(b=4, t=10)
    stock = tiny_model(arch, task=task)
    model = apply_mechanism(copy.deepcopy(stock), "wla", k=2)
    if task == "multiple-choice":
        kw = dict(input_ids=ids.view(2, 2, 10), attention_mask=att.view(2, 2, 10), structure_mask=mask.view(2, 2, 10, 10))
        skw = dict(input_ids=ids.view(2, 2, 10), attention_mask=att.view(2, 2, 10))
    else:
        kw = dict(input_ids=ids, attention_mask=att, structure_mask=mask)
        skw = dict(input_ids=ids, attention_mask=att)
    out = model(**kw)
    assert all(torch.isfinite(v).all() for v in out.values() if isinstance(v, torch.Tensor))
    with force_gate(model, 0.0):
        same = model(**kw)
    want = stock(**skw)
    first = next(k for k in ("logits", "start_logits") if k in want)
    assert torch.equal(same[first], want[first])


def test_albert_shares_its_gate_and_refuses_layer_selection():
    model = apply_mechanism(tiny_model("albert"), "sla")
    assert len(gate_parameters(model)) == 2  # one shared gate (weight, bias) like every ALBERT weight
    with pytest.raises(UserError, match="shares"):
        apply_mechanism(tiny_model("albert"), "hybrid")


@pytest.mark.parametrize("model_type,config", [
    ("deberta-v2", lambda T: T.DebertaV2Config(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                                 intermediate_size=64)),
    ("deberta", lambda T: T.DebertaConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                            intermediate_size=64)),
    ("mpnet", lambda T: T.MPNetConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                        intermediate_size=64)),
    ("xlnet", lambda T: T.XLNetConfig(vocab_size=100, d_model=32, n_layer=2, n_head=4, d_inner=64)),
])
def test_refused_architectures_say_why(model_type, config):
    import transformers as T

    model = T.AutoModel.from_config(config(T))
    with pytest.raises(UserError) as err:
        apply_mechanism(model, "sla")
    msg = str(err.value)
    assert model_type in msg and "attention interface" in msg and "bert" in msg


def test_decoders_are_refused():
    import transformers as T

    model = T.BertModel(tiny_config("bert", is_decoder=True))
    with pytest.raises(UserError, match="is a decoder"):
        apply_mechanism(model, "sla")
