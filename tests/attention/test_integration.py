"""Structure-aware attention inside a tiny BERT: exactness, gates, outputs on request, training paths."""
from __future__ import annotations

import copy

import pytest
import torch
from attn_helpers import HEADS, HIDDEN, LAYERS, random_batch, tiny_model, window_mask

from structattn.attention import force_gate, gate_parameters, kernels, record
from structattn.attention.integration import attention_modules
from structattn.errors import UserError
from structattn.modeling import apply_mechanism, mechanism_of, remove_mechanism

KERNELS = ["exact", "fused", "shared_exp", "reference"]


def _hidden(model, ids, att, **kw):
    return model(input_ids=ids, attention_mask=att, **kw).last_hidden_state


@pytest.mark.parametrize("base", ["sdpa", "eager"])
@pytest.mark.parametrize("kernel", KERNELS)
def test_forced_zero_gate_is_the_stock_model_exactly(base, kernel, batch):
    ids, att, mask = batch
    stock = tiny_model(base=base)
    model = apply_mechanism(copy.deepcopy(stock), "sla", kernel=kernel, base=base)
    with force_gate(model, 0.0):
        assert torch.equal(_hidden(model, ids, att, structure_mask=mask), _hidden(stock, ids, att))


@pytest.mark.parametrize("base", ["sdpa", "eager"])
def test_zero_gate_from_parameters_is_exact_with_the_exact_kernel(base, batch):
    ids, att, mask = batch
    stock = tiny_model(base=base)
    model = apply_mechanism(copy.deepcopy(stock), "sla", kernel="exact", base=base, gate_bias=float("-inf"))
    assert torch.equal(_hidden(model, ids, att, structure_mask=mask), _hidden(stock, ids, att))
    # without padding too (HF then passes no mask at all to SDPA)
    full = torch.ones_like(att)
    assert torch.equal(_hidden(model, ids, full, structure_mask=mask), _hidden(stock, ids, full))


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
        assert torch.allclose(got, want, atol=2e-6)


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


def test_kernels_agree_inside_the_model(batch):
    ids, att, mask = batch
    outs = {}
    for kernel in KERNELS:
        model = apply_mechanism(tiny_model(), "sla", kernel=kernel)  # same seed: same gates
        outs[kernel] = _hidden(model, ids, att, structure_mask=mask)
    real = att.bool()[..., None]
    for kernel in KERNELS:
        assert torch.allclose(outs[kernel] * real, outs["reference"] * real, atol=1e-5), kernel


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
    out = model(input_ids=ids, attention_mask=att, structure_mask=mask, output_attentions=True, output_gates=True)
    assert len(out.attentions) == LAYERS
    probs = out.attentions[0]
    assert probs.shape == (ids.shape[0], HEADS, ids.shape[1], ids.shape[1])
    assert torch.allclose(probs.sum(-1), torch.ones(()), atol=1e-5)
    assert torch.all(probs[1, :, :, -4:] == 0)  # padded keys get nothing
    g = out.gates[0][:, None, :, None]
    # local keys (structure AND padding) get more than (1 - g) times their global share... check the blend:
    assert torch.all(probs <= 1)
    assert torch.all((probs > 0) | ~att.bool()[:, None, None, :] | (g == 1))


def test_record_context_collects_gates_and_attentions(batch):
    ids, att, mask = batch
    model = apply_mechanism(tiny_model(), "sla")
    with record(model, attentions=True) as rec:
        model(input_ids=ids, attention_mask=att, structure_mask=mask)
    assert rec.layers == list(range(LAYERS))
    assert len(rec.gates) == LAYERS and len(rec.attentions) == LAYERS
    model(input_ids=ids, attention_mask=att, structure_mask=mask)
    assert len(rec.gates) == LAYERS  # closed


def test_missing_mask_errors_and_window_on_the_fly(batch):
    ids, att, mask = batch
    sla = apply_mechanism(tiny_model(), "sla")
    with pytest.raises(UserError, match="structure_mask"):
        sla(input_ids=ids, attention_mask=att)
    with pytest.raises(UserError, match="shape"):
        sla(input_ids=ids, attention_mask=att, structure_mask=mask[:, :5, :5])
    wla = apply_mechanism(tiny_model(), "wla", k=2)
    implicit = _hidden(wla, ids, att)
    explicit = _hidden(wla, ids, att, structure_mask=window_mask(*ids.shape, 2))
    assert torch.equal(implicit, explicit)


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


def test_training_with_attention_dropout_is_finite(batch):
    ids, att, mask = batch
    for kernel in ["fused", "exact", "shared_exp"]:
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
def test_torch_compile_forward_and_backward(batch):
    ids, att, mask = batch
    for kernel in ["fused", "exact"]:
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
