"""Recording: each mechanism layer call appends its gate (and, on request, its mixed probabilities) to the open
[`record`][structattn.attention.recording.record] blocks and to the ``output_gates`` record of the current model call;
[`force_gate`][structattn.attention.recording.force_gate] fixes every gate to one value."""
from __future__ import annotations

import contextlib
from typing import Iterator, Optional

import torch
from torch import nn

from ..errors import UserError
from .runtime import GateRecord, Runtime, runtime_of


def _in_backward() -> bool:
    return torch._C._current_graph_task_id() != -1


def _output_gate_record(rt: Runtime) -> Optional[GateRecord]:
    """The record of the current top-level call when it asked for ``output_gates``, else None."""
    return rt.output_gates[-1] if rt.output_gates else None


def record_call(rt: Runtime, module: nn.Module, gate: torch.Tensor, probs: Optional[torch.Tensor]) -> None:
    """Recording: append this call's gate [b, n] (or [b, h, n]) and, where asked, its mixed probabilities
    [b, h, n, m] to every open [`record`][structattn.attention.recording.record] and to the ``output_gates`` record of
    the current call. Nothing is recorded while autograd recomputes a checkpointed layer in the backward pass."""
    if not rt.recorders and _output_gate_record(rt) is None:
        return
    targets = list(rt.recorders)
    if _output_gate_record(rt) is not None:
        targets.append(_output_gate_record(rt))
    if _in_backward():
        return
    layer = getattr(module, "_structattn_layer", None)
    if layer is None:  # a module shared by all layers (ALBERT): number its calls
        layer = rt.call_counter
        rt.call_counter += 1
    g = gate.detach()
    g = g[:, 0] if g.shape[1] == 1 else g
    for rec in targets:
        rec.gates.append(g)
        rec.layers.append(layer)
        if rec.want_attentions and probs is not None:
            rec.attentions.append(probs)


@contextlib.contextmanager
def record(model: nn.Module, attentions: bool = False) -> Iterator[GateRecord]:
    """Collect gate values (and, with ``attentions=True``, mixed probabilities) of every forward call inside.

    Example::

        with record(model, attentions=True) as rec:
            model(**batch)
        rec.gates[0]        # [b, n] gate of the lowest mechanism layer
        rec.attentions[0]   # [b, h, n, m]
    """
    rt = runtime_of(model)
    if rt is None:
        raise UserError("record(): no structattn mechanism is installed in this model")
    rec = GateRecord(want_attentions=attentions)
    rt.recorders.append(rec)
    try:
        yield rec
    finally:
        rt.recorders.remove(rec)


@contextlib.contextmanager
def force_gate(model: nn.Module, value: float) -> Iterator[None]:
    """Inside the block every gate equals ``value``. At 0 the mechanism layers call only the stock kernel, so
    the output is the stock model's, bit for bit, whatever the kernel."""
    rt = runtime_of(model)
    if rt is None:
        raise UserError("force_gate(): no structattn mechanism is installed in this model")
    previous = rt.gate_override
    rt.gate_override = float(value)
    try:
        yield
    finally:
        rt.gate_override = previous
