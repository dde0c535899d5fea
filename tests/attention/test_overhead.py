"""The mechanism's fixed cost per step and per layer: aten operators dispatched by one forward of a tiny SLA
encoder against the stock one, per-step work done once, and a compiled train step without a graph break."""
from __future__ import annotations

import collections
import copy

import pytest
import torch
from attn_helpers import require_fused, tiny_model

from structattn.attention import kernels
from structattn.models.encoder import apply_mechanism

# Operators one mechanism layer may dispatch beyond the stock layer (kernel ``fused``, the CPU default):
# the gate g = sigmoid(W h + b) is 8 (linear -> t, addmm with its 2 resolve_conj, view; sigmoid; transpose) and the
# kernel call 5 (its output and statistics allocations, the output's [b, n, h, d] -> [b, h, n, d] permute, the
# per-call view of the gate). Nothing else belongs to a layer: masks, checks and the dropout seed are per step.
OPS_PER_LAYER = 13
# Per step: the structure mask to [b, 1, n, m] bool (1) and, with dropout, the step's seed (randint, random_, item,
# _local_scalar_dense: 4), once for all layers.
OPS_PER_STEP = 5


def _aten_ops(model, batch, grad: bool, **kw) -> collections.Counter:
    """Operator name -> how often one forward dispatched it (torch.profiler, after one warm-up call)."""
    from torch.profiler import ProfilerActivity, profile

    ids, att, _ = batch
    with torch.set_grad_enabled(grad):
        model(input_ids=ids, attention_mask=att, **kw)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            model(input_ids=ids, attention_mask=att, **kw)
    return collections.Counter(e.name for e in prof.events() if "::" in e.name)


@pytest.mark.parametrize("layers", [2, 4])
@pytest.mark.parametrize("train", [False, True], ids=["inference", "train-forward"])
def test_mechanism_layers_dispatch_at_most_their_budget_of_operators(layers, train, batch):
    """One forward of an SLA encoder (kernel ``fused``; in train mode with attention dropout 0.1) dispatches at
    most OPS_PER_LAYER operators per layer and OPS_PER_STEP per step more than the stock encoder (sdpa).

    Budget: what the mechanism needs, no more: per layer the gate (8 operators) and one kernel call (5); per step
    the structure mask made [b, 1, n, m] bool once and, with dropout, one seed drawn (5). The mechanism's layer
    does not call the stock SDPA function, whose operators (about 11 at inference and 60 with dropout in torch
    2.13, where SDPA runs its math path) are not counted against it: measured, the SLA encoder dispatches 4 fewer
    per layer than the stock one at inference and 60 fewer in a train forward. Masks converted, checks run or
    seeds drawn again in every layer would add their operators per layer and exceed the budget on the
    4-layer model before the 2-layer one."""
    require_fused()
    stock = tiny_model(num_hidden_layers=layers, attention_probs_dropout_prob=0.1).train(train)
    model = apply_mechanism(copy.deepcopy(stock), "sla", kernel="fused").train(train)
    want = _aten_ops(stock, batch, train)
    got = _aten_ops(model, batch, train, structure_mask=batch[2])
    extra = sum(got.values()) - sum(want.values())
    budget = OPS_PER_LAYER * layers + OPS_PER_STEP
    assert extra <= budget, f"{extra} operators more than the stock model (budget {budget}): {dict(got - want)}"
    assert got["aten::randint"] == (1 if train else 0)   # one dropout seed per step, not one per layer


def test_layers_compute_the_gate_inside_the_kernel_at_inference(batch, monkeypatch):
    """At inference the first mechanism layer of a step runs the kernel's checks and makes the plan; every layer
    then calls the fused kernel with its hidden states and gate weights, one call that computes the gate (its
    linear and sigmoid dispatched from C++, not from Python): the gate module never runs. With gradients every
    layer runs its gate module (autograd needs its graph)."""
    from structattn.attention.gate import StructureGate

    require_fused()
    calls = []
    forward = StructureGate.forward
    monkeypatch.setattr(StructureGate, "forward", lambda self, h: calls.append(1) or forward(self, h))
    for layers in (2, 4):
        model = apply_mechanism(tiny_model(num_hidden_layers=layers), "sla", kernel="fused")
        calls.clear()
        _aten_ops(model, batch, False, structure_mask=batch[2])
        assert not calls
        _aten_ops(model, batch, True, structure_mask=batch[2])
        assert len(calls) == 2 * layers   # the warm-up call and the profiled one


@pytest.mark.parametrize("grad", [False, True], ids=["inference", "train"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_planned_layers_give_what_every_layer_checked_gives(grad, dtype, batch):
    """The per-step plan (later layers skip checks, reuse masks and, at inference, compute the gate in the kernel)
    changes no result: a recording (which turns the plan off) gives the same output and gradients up to
    rounding."""
    from structattn.attention import record

    require_fused()
    ids, att, mask = batch
    model = apply_mechanism(tiny_model(num_hidden_layers=3), "sla", kernel="fused").to(dtype)
    results = []
    for recording in (False, True):
        model.zero_grad(set_to_none=True)
        with torch.set_grad_enabled(grad):
            if recording:
                with record(model) as rec:
                    out = model(input_ids=ids, attention_mask=att, structure_mask=mask).last_hidden_state
                assert len(rec.gates) == 3
            else:
                out = model(input_ids=ids, attention_mask=att, structure_mask=mask).last_hidden_state
            if grad:
                out.square().sum().backward()
        grads = [p.grad.clone() for p in model.parameters() if p.grad is not None] if grad else []
        results.append((out.detach(), grads))
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(results[0][0], results[1][0], rtol=tol, atol=tol)
    for a, b in zip(results[0][1], results[1][1]):
        torch.testing.assert_close(a, b, rtol=tol * 10, atol=tol * 10)


def test_kernel_gate_equals_the_gate_module():
    """The fused kernel's own gate (inference) is sigmoid(W h + b) of StructureGate, per token and per head, with
    and without a bias, and its output the kernel's output for that gate."""
    from structattn.attention.gate import StructureGate

    require_fused()
    g = torch.Generator().manual_seed(1)
    b, h, n, d, hidden_size = 2, 4, 9, 8, 32
    q, k, v = (torch.randn(b, h, n, d, generator=g) for _ in range(3))
    hidden = torch.randn(b, n, hidden_size, generator=g)
    local = (torch.rand(b, 1, n, n, generator=g) < 0.4) | torch.eye(n, dtype=torch.bool)
    base = torch.ones(b, 1, n, n, dtype=torch.bool)
    base[1, :, :, 7:] = False
    for gates, bias in ((1, True), (h, False)):
        module = StructureGate(hidden_size, gates, bias=bias, init_std=0.3)
        with torch.no_grad():
            want = kernels.fused_unchecked(q, k, v, local, module(hidden), base, scale=0.3, dropout_p=0.0)
            got = kernels.fused_gated_inference(q, k, v, local, base, hidden, module.weight, module.bias, scale=0.3)
            gate = kernels._native_extension().mixed_forward_gated(q, k, v, base, local, hidden, module.weight,
                                                                   module.bias, 0.3)[1]
        torch.testing.assert_close(gate, module(hidden).detach(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_per_step_masks_are_made_once_for_all_layers(batch):
    """The structure mask's conversion (int -> bool, [b, n, m] -> [b, 1, n, m]) and the eager base model's
    additive mask -> bool run once per forward, whatever the number of layers."""
    require_fused()
    counts = {}
    for layers in (2, 4):
        model = apply_mechanism(tiny_model(num_hidden_layers=layers, base="eager"), "sla", kernel="fused", base="eager")
        counts[layers] = _aten_ops(model, batch, False, structure_mask=batch[2].long())
    for op in ("aten::ne", "aten::gt"):   # structure_mask != 0; additive mask > min / 2
        assert counts[2][op] == counts[4][op] == 1, op


def test_step_dropout_seed_differs_per_layer_and_per_step(batch):
    """One seed per step, one derived seed per layer: two layers never share a dropout mask, two steps neither,
    and torch.manual_seed makes a step reproducible."""
    require_fused()
    ids, att, mask = batch
    model = apply_mechanism(tiny_model(attention_probs_dropout_prob=0.3), "sla", kernel="fused").train()
    seeds = []
    original = kernels.UNCHECKED_KERNELS["fused"]

    def spy(*args, seed=None, **kw):
        seeds.append(seed)
        return original(*args, seed=seed, **kw)

    outs = []
    try:
        kernels.UNCHECKED_KERNELS["fused"] = spy
        for _ in range(2):
            torch.manual_seed(0)
            outs.append(model(input_ids=ids, attention_mask=att, structure_mask=mask).last_hidden_state)
        model(input_ids=ids, attention_mask=att, structure_mask=mask)
    finally:
        kernels.UNCHECKED_KERNELS["fused"] = original
    # every layer of a step runs the unchecked kernel (the spy; the checks ran once) with its derived seed
    assert len(seeds) == 6 and all(isinstance(s, int) for s in seeds)
    assert seeds[0] != seeds[1] and seeds[0:2] == seeds[2:4] and not set(seeds[4:6]) & set(seeds[0:2])
    assert torch.equal(outs[0], outs[1])


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["fused", "reference"])
def test_compiled_train_step_has_no_graph_break(kernel, batch):
    """torch.compile of an SLA sequence classifier with attention dropout 0.1: one graph, no break (the dropout
    seed is drawn inside the graph, no ``.item()``), and the compiled train step runs forward and backward."""
    if kernel == "fused":
        require_fused()
    ids, att, mask = batch
    model = apply_mechanism(tiny_model(task="sequence-classification", attention_probs_dropout_prob=0.1), "sla",
                            kernel=kernel).train()
    labels = torch.tensor([0, 1, 0])
    inputs = dict(input_ids=ids, attention_mask=att, structure_mask=mask, labels=labels)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(model)(**inputs)
    reasons = [r.reason.splitlines()[0] for r in explained.break_reasons]
    assert explained.graph_break_count == 0 and explained.graph_count == 1, reasons
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    compiled(**inputs).loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters() if p.requires_grad)
    torch._dynamo.reset()


def test_gradient_checkpointing_with_attention_dropout_recomputes_the_same_masks(batch):
    """Under gradient checkpointing each layer draws its dropout seed from torch's generator (which the recompute
    in the backward restores), so the gradients equal those of the same model without checkpointing drawing the
    same seeds; with one seed per step the recompute, run after the step, would draw other masks."""
    require_fused()
    ids, att, mask = batch
    grads = []
    for checkpointing in (False, True):
        model = apply_mechanism(tiny_model(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.3), "sla",
                                kernel="fused").train()
        if checkpointing:
            model.gradient_checkpointing_enable()
        else:
            model._structattn_rt.checkpointing = lambda: True   # the same per-layer draws, without the recompute
        torch.manual_seed(3)
        model(input_ids=ids, attention_mask=att, structure_mask=mask).last_hidden_state.pow(2).sum().backward()
        grads.append([p.grad.clone() for p in model.parameters() if p.grad is not None])
    assert len(grads[0]) == len(grads[1])
    for a, b in zip(*grads):
        assert torch.allclose(a, b, atol=1e-6)
