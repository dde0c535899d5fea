"""The forward hooks of an installed model: the pre-hook of each mechanism layer (checks the implementation, hands
the layer's input hidden states to the attention function) and the model's pre- and post-hooks (start and end of
a step, ``output_gates``)."""
from __future__ import annotations

from typing import Any

from torch import nn

from ..errors import UserError
from .names import ATTENTION_NAME, HIDDEN_KW
from .runtime import GateRecord, Runtime


def gate_pre_hook(module: nn.Module, args: tuple, kwargs: dict) -> None:
    """Forward pre-hook of a mechanism layer: checks that the model still runs ``"structattn"`` (once per step:
    the layers of one model call share their config; a layer called on its own checks on every call) and, for
    ``mix="gate"``, hands the layer's input hidden states [b, n, H] to the attention function (keyword
    `HIDDEN_KW`), which computes the gate from them. It edits the call's own
    keyword dict (a new one per call) instead of returning a copy."""
    rt: Runtime = module._structattn_rt
    step = rt.step
    if not step.implementation_checked:
        impl = module.config._attn_implementation
        if impl != ATTENTION_NAME:
            raise UserError(f"the attention implementation of this model was changed to {impl!r} after structattn "
                            f"installed mechanism {rt.mechanism.name!r}: structure-aware attention would silently "
                            f"be off. Call model.set_attn_implementation('{ATTENTION_NAME}') or "
                            "structattn.remove_mechanism(model)")
        step.implementation_checked = step.open
    if rt.mechanism.has_gate:
        kwargs[HIDDEN_KW] = args[0] if args else kwargs["hidden_states"]


def model_pre_hook(model: nn.Module, args: tuple, kwargs: dict):
    """Top-level pre-hook: starts the step (`Step`), takes ``output_gates``
    out of the call and starts collecting if it is True."""
    rt: Runtime = model._structattn_rt
    want = kwargs.pop("output_gates", False)
    rt.call_counter = 0
    rt.step.start(seed_per_layer=rt.checkpointing())
    if len(rt.output_gates) > 8:  # left over by forward calls that raised
        del rt.output_gates[:-8]
    rt.output_gates.append(GateRecord() if want else None)
    return args, kwargs


def model_post_hook(model: nn.Module, args: tuple, kwargs: dict, output: Any):
    """Top-level forward hook: ends the step (its masks are freed) and attaches ``gates`` (a tuple) to the output
    when they were requested."""
    rt: Runtime = model._structattn_rt
    rt.step.open = rt.step.implementation_checked = False
    rt.step.plan = None
    rt.step.entries.clear()
    rec = rt.output_gates.pop() if rt.output_gates else None
    if rec is not None:
        if isinstance(output, dict):
            output["gates"] = tuple(rec.gates)
        elif isinstance(output, tuple):
            output = output + (tuple(rec.gates),)
    return output


def remove_hooks(module: nn.Module, *fns) -> None:
    """Remove the forward (pre-)hooks of ``module`` that are one of ``fns``, with their keyword flags."""
    for store in (module._forward_pre_hooks, module._forward_hooks):
        for key in [k for k, f in store.items() if f in fns]:
            del store[key]
            for extra in ("_forward_pre_hooks_with_kwargs", "_forward_hooks_with_kwargs", "_forward_hooks_always_called"):
                getattr(module, extra, {}).pop(key, None)
