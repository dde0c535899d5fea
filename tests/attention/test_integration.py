"""Structure-aware attention inside a tiny BERT: exactness, gates, outputs on request, training paths."""
from __future__ import annotations

import copy

import pytest
import torch
from attn_helpers import HEADS, HIDDEN, LAYERS, random_batch, tiny_model

from structattn.attention import force_gate, gate_parameters, kernels, record
from structattn.attention.integration import attention_modules
from structattn.errors import UserError
from structattn.models.encoder import apply_mechanism, mechanism_of, remove_mechanism

KERNELS = ["exact", "fused", "shared_exp", "reference"]


def _hidden(model, ids, att, **kw):
    return model(input_ids=ids, attention_mask=att, **kw).last_hidden_state


def _zero_gates(model):
    """Gate parameters that give g = 0 exactly: W = 0 and b = -1e4 (float32 sigmoid(-1e4) is exactly 0)."""
    with torch.no_grad():
        for gate in (m.structattn_gate for m in attention_modules(model) if hasattr(m, "structattn_gate")):
            gate.weight.zero_()
            gate.bias.fill_(-1e4)
    return model


@pytest.mark.parametrize("base", ["sdpa", "eager"])
def test_forced_zero_gate_bypasses_the_kernel_and_is_the_stock_model(base, batch):
    ids, att, mask = batch
    stock = tiny_model(base=base)
    model = apply_mechanism(copy.deepcopy(stock), "sla", base=base)
    with force_gate(model, 0.0):
        assert torch.equal(_hidden(model, ids, att, structure_mask=mask), _hidden(stock, ids, att))
    assert model._structattn_rt.kernels_resolved() == []  # no kernel ran: see the tests below for each kernel


@pytest.mark.parametrize("base", ["sdpa", "eager"])
@pytest.mark.parametrize("kernel", KERNELS)
def test_zero_gate_parameters_through_each_kernel_give_the_stock_model(base, kernel, batch):
    """g = 0 from the gate parameters, so the call goes through the kernel. ``exact`` is bit-exact; the others
    compute the global softmax themselves and agree within float32 rounding (atol 2e-6 on hidden states of
    size ~1 after two layers)."""
    ids, att, mask = batch
    assert torch.sigmoid(torch.tensor(-1e4, dtype=torch.float32)).item() == 0.0
    stock = tiny_model(base=base)
    model = _zero_gates(apply_mechanism(copy.deepcopy(stock), "sla", kernel=kernel, base=base))
    for a in (att, torch.ones_like(att)):  # with padding, and without (HF then passes SDPA no mask at all)
        out = model(input_ids=ids, attention_mask=a, structure_mask=mask, output_gates=True)
        assert all(torch.equal(g, torch.zeros_like(g)) for g in out.gates)
        got, want = out.last_hidden_state, _hidden(stock, ids, a)
        if kernel == "exact":
            assert torch.equal(got, want)
        else:
            assert torch.allclose(got, want, rtol=0, atol=2e-6)
    assert model._structattn_rt.kernels_resolved() == [kernel]


@pytest.mark.parametrize("base", ["sdpa", "eager"])
@pytest.mark.parametrize("kernel", KERNELS)
def test_all_true_local_mask_is_the_stock_model_for_any_gate(base, kernel, batch):
    ids, att, _ = batch
    stock = tiny_model(base=base)
    model = apply_mechanism(copy.deepcopy(stock), "sla", kernel=kernel, base=base, gate_bias=1.5)
    everything = torch.ones(ids.shape[0], ids.shape[1], ids.shape[1], dtype=torch.bool)
    got, want = _hidden(model, ids, att, structure_mask=everything), _hidden(stock, ids, att)
    if kernel == "exact":
        assert torch.equal(got, want)
    else:
        assert torch.allclose(got, want, rtol=0, atol=2e-6)
    assert model._structattn_rt.kernels_resolved() == [kernel]


def test_structure_changes_the_output_and_gates_start_near_half(batch):
    ids, att, mask = batch
    stock = tiny_model()
    model = apply_mechanism(copy.deepcopy(stock), "sla")
    out = model(input_ids=ids, attention_mask=att, structure_mask=mask, output_gates=True)
    assert not torch.allclose(out.last_hidden_state, _hidden(stock, ids, att), atol=1e-3)
    assert len(out.gates) == LAYERS and out.gates[0].shape == ids.shape
    g = torch.stack(out.gates)
    assert 0.3 < g.mean() < 0.7
    # large negative initial bias: starts from the pretrained model's behaviour
    near = apply_mechanism(copy.deepcopy(stock), "sla", gate_bias=-20.0)
    assert torch.allclose(_hidden(near, ids, att, structure_mask=mask), _hidden(stock, ids, att), atol=1e-5)


@pytest.mark.parametrize("kernel", KERNELS)
def test_kernels_agree_inside_the_model(kernel, batch):
    ids, att, mask = batch
    want = _hidden(apply_mechanism(tiny_model(), "sla", kernel="reference"), ids, att, structure_mask=mask)
    got = _hidden(apply_mechanism(tiny_model(), "sla", kernel=kernel), ids, att, structure_mask=mask)  # same gates
    real = att.bool()[..., None]
    assert torch.allclose(got * real, want * real, atol=1e-5)


def test_per_head_gates_and_layer_selection(batch):
    ids, att, mask = batch
    model = apply_mechanism(tiny_model(), "sla", gate="head", layers=[-1])
    out = model(input_ids=ids, attention_mask=att, structure_mask=mask, output_gates=True)
    assert len(out.gates) == 1 and out.gates[0].shape == (ids.shape[0], HEADS, ids.shape[1])
    assert model.config.structattn["layer_indices"] == [LAYERS - 1]
    modules = attention_modules(model)
    assert not hasattr(modules[0], "structattn_gate") and hasattr(modules[-1], "structattn_gate")


def test_parameter_counts():
    model = apply_mechanism(tiny_model(), "sla")
    assert sum(p.numel() for p in gate_parameters(model)) == LAYERS * (HIDDEN + 1)
    model = apply_mechanism(model, "hybrid")  # replaces: lowest 2 layers, no bias
    assert sum(p.numel() for p in gate_parameters(model)) == 2 * HIDDEN
    model = apply_mechanism(model, "wla", gate="head")
    assert sum(p.numel() for p in gate_parameters(model)) == LAYERS * HEADS * (HIDDEN + 1)


def test_output_attentions_gives_mixed_probabilities(batch):
    ids, att, mask = batch
    model = apply_mechanism(tiny_model(), "sla")
    out = model(input_ids=ids, attention_mask=att, structure_mask=mask, output_attentions=True)
    assert len(out.attentions) == LAYERS
    probs = out.attentions[0]
    assert probs.shape == (ids.shape[0], HEADS, ids.shape[1], ids.shape[1])
    assert torch.allclose(probs.sum(-1), torch.ones(()), atol=1e-5)
    assert torch.all(probs[1, :, :, -4:] == 0)  # padded keys get nothing


def _heads(x):
    """[b, n, H] -> [b, h, n, d]."""
    b, n, _ = x.shape
    return x.view(b, n, HEADS, HIDDEN // HEADS).transpose(1, 2)


@pytest.mark.parametrize("base", ["sdpa", "eager"])
@pytest.mark.parametrize("kernel", KERNELS)
def test_output_attentions_times_values_is_what_the_kernel_computed(base, kernel, batch):
    """The returned probabilities (recomputed by the reference) times the layer's V equal the context the
    kernel produced, i.e. the self-attention output before the output projection (eval mode: no dropout)."""
    ids, att, mask = batch
    model = apply_mechanism(tiny_model(base=base), "sla", kernel=kernel, base=base)
    values, contexts = [], []
    hooks = []
    for module in attention_modules(model):
        hooks.append(module.value.register_forward_hook(lambda m, i, o: values.append(o)))
        hooks.append(module.register_forward_hook(lambda m, i, o: contexts.append(o[0])))
    out = model(input_ids=ids, attention_mask=att, structure_mask=mask, output_attentions=True)
    for h in hooks:
        h.remove()
    assert model._structattn_rt.kernels_resolved() == [kernel]
    assert len(out.attentions) == len(values) == len(contexts) == LAYERS
    for probs, v, ctx in zip(out.attentions, values, contexts):
        assert torch.allclose(probs @ _heads(v), _heads(ctx), rtol=0, atol=1e-5)


def test_record_context_collects_gates_and_attentions(batch):
    ids, att, mask = batch
    model = apply_mechanism(tiny_model(), "sla")
    with record(model, attentions=True) as rec:
        model(input_ids=ids, attention_mask=att, structure_mask=mask)
    assert rec.layers == list(range(LAYERS))
    assert len(rec.gates) == LAYERS and len(rec.attentions) == LAYERS
    model(input_ids=ids, attention_mask=att, structure_mask=mask)
    assert len(rec.gates) == LAYERS  # closed


def test_missing_mask_errors(batch):
    ids, att, mask = batch
    sla = apply_mechanism(tiny_model(), "sla")
    with pytest.raises(UserError, match="structure_mask"):
        sla(input_ids=ids, attention_mask=att)
    with pytest.raises(UserError, match="shape"):
        sla(input_ids=ids, attention_mask=att, structure_mask=mask[:, :5, :5])


def test_integer_masks_are_accepted(batch):
    ids, att, mask = batch
    model = apply_mechanism(tiny_model(), "sla")
    assert torch.equal(_hidden(model, ids, att, structure_mask=mask.long()),
                       _hidden(model, ids, att, structure_mask=mask))


def test_global_mechanism_is_the_stock_model(batch):
    ids, att, mask = batch
    stock = tiny_model()
    model = apply_mechanism(copy.deepcopy(stock), "global")
    assert gate_parameters(model) == []
    assert model.config._attn_implementation == "structattn"
    assert torch.equal(_hidden(model, ids, att, structure_mask=mask), _hidden(stock, ids, att))
    assert torch.equal(_hidden(model, ids, att), _hidden(stock, ids, att))


def test_switching_attention_off_behind_our_back_fails_loudly(batch):
    ids, att, mask = batch
    model = apply_mechanism(tiny_model(), "sla")
    model.set_attn_implementation("sdpa")
    with pytest.raises(UserError, match="silently"):
        model(input_ids=ids, attention_mask=att, structure_mask=mask)


def test_remove_mechanism_restores_the_stock_model(batch):
    ids, att, mask = batch
    stock = tiny_model()
    model = apply_mechanism(copy.deepcopy(stock), "sla")
    assert mechanism_of(model).name == "sla"
    remove_mechanism(model)
    assert mechanism_of(model) is None and gate_parameters(model) == []
    assert not hasattr(model.config, "structattn") and model.config._attn_implementation == "sdpa"
    assert torch.equal(_hidden(model, ids, att), _hidden(stock, ids, att))


@pytest.mark.parametrize("kernel", ["fused", "exact"])
@pytest.mark.parametrize("gate", ["token", "head"])
def test_every_new_parameter_gets_a_gradient(kernel, gate, batch):
    ids, att, mask = batch
    model = apply_mechanism(tiny_model(task="sequence-classification"), "sla", kernel=kernel, gate=gate)
    model.train()
    out = model(input_ids=ids, attention_mask=att, structure_mask=mask, labels=torch.tensor([0, 1, 0]))
    out.loss.backward()
    for p in gate_parameters(model):
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    before = [p.detach().clone() for p in gate_parameters(model)]
    opt.step()
    assert all(not torch.equal(a, p) for a, p in zip(before, gate_parameters(model)))


@pytest.mark.parametrize("kernel", ["fused", "exact", "shared_exp"])
def test_training_with_attention_dropout_is_finite(kernel, batch):
    ids, att, mask = batch
    model = apply_mechanism(tiny_model(attention_probs_dropout_prob=0.3), "sla", kernel=kernel).train()
    out = _hidden(model, ids, att, structure_mask=mask)
    out.sum().backward()
    assert torch.isfinite(out).all()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_gradient_checkpointing_gives_the_same_gradients(batch):
    ids, att, mask = batch
    grads = []
    for checkpointing in (False, True):
        model = apply_mechanism(tiny_model(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0), "sla")
        if checkpointing:
            model.gradient_checkpointing_enable()
        model.train()
        with record(model) as rec:
            _hidden(model, ids, att, structure_mask=mask).pow(2).sum().backward()
        assert len(rec.gates) == LAYERS  # the recompute in backward is not recorded twice
        grads.append([p.grad.clone() for p in gate_parameters(model)])
    for a, b in zip(*grads):
        assert torch.allclose(a, b, atol=1e-6)


def test_bf16_autocast_model_step_no_nan(batch):
    ids, att, mask = batch
    model = apply_mechanism(tiny_model(task="sequence-classification"), "sla").train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(input_ids=ids, attention_mask=att, structure_mask=mask, labels=torch.tensor([0, 1, 1]))
    out.loss.backward()
    assert torch.isfinite(out.logits.float()).all()
    for p in gate_parameters(model):
        assert torch.isfinite(p.grad).all()


def test_multiple_choice_structure_mask_is_flattened():
    ids, att, mask = random_batch(b=4, t=10)
    choices = 2
    model = apply_mechanism(tiny_model(task="multiple-choice"), "sla")
    out = model(input_ids=ids.view(2, choices, 10), attention_mask=att.view(2, choices, 10),
                structure_mask=mask.view(2, choices, 10, 10), output_gates=True)
    assert out.logits.shape == (2, choices)
    flat = model(input_ids=ids.view(2, choices, 10), attention_mask=att.view(2, choices, 10), structure_mask=mask)
    assert torch.equal(out.logits, flat.logits)
    assert out.gates[0].shape == (4, 10)


def test_tuple_outputs_still_work(batch):
    ids, att, mask = batch
    model = apply_mechanism(tiny_model(), "sla")
    out = model(input_ids=ids, attention_mask=att, structure_mask=mask, return_dict=False, output_gates=True)
    assert isinstance(out, tuple) and len(out[-1]) == LAYERS


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["fused", "exact"])
def test_torch_compile_forward_and_backward(kernel, batch):
    ids, att, mask = batch
    model = apply_mechanism(tiny_model(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0), "sla",
                            kernel=kernel).train()
    want = _hidden(model, ids, att, structure_mask=mask)
    compiled = torch.compile(model, dynamic=False)
    got = compiled(input_ids=ids, attention_mask=att, structure_mask=mask).last_hidden_state
    assert torch.allclose(got, want, atol=1e-5)
    got.sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in gate_parameters(model))


def test_kernel_auto_resolves():
    model = apply_mechanism(tiny_model(), "sla")
    rt = model._structattn_rt
    expected = "fused" if kernels.fused_available() else "exact"
    assert rt.kernel_for(torch.device("cpu")) == expected
