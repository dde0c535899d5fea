"""The attention function registered as ``"structattn"`` (`structattn_attention`): per layer call, the gate,
the dispatch to the mechanism's kernel (the stock function as the ``exact`` kernel's ``attend``), the layer's
dropout seed, and the ``local`` / ``concat`` / ``gaussian`` mixes, which have no gate."""
from __future__ import annotations

from typing import Any, Callable, Optional

import torch
from torch import nn

from ..errors import UserError
from .biased import biased_attention, reference_biased_attention
from .eager import derive_seed, draw_seed, eager_call
from .gate import StructureGate
from .kernels import (GATED_INFERENCE_KERNELS, KERNEL_CHECKS, KERNELS, UNCHECKED_KERNELS, finite_min, get_kernel,
                      local_pattern, reference_mixed_attention, two_pass_mixed_attention)
from .masks import step_bool_mask, step_local_mask
from .names import CONCAT_ATTR, GATE_ATTR, GAUSSIAN_ATTR, HIDDEN_KW, STRUCTURE_MASK_KW
from .recording import record_call
from .runtime import Runtime
from .stock import config_base, stock_function


def _stock_attend(module: nn.Module, base_fn: Callable, base_name: str, attention_mask: Optional[torch.Tensor],
                  base_bool: Optional[torch.Tensor], scaling: Optional[float], kwargs: dict) -> Callable:
    """The ``attend`` of the ``exact`` kernel: one call of the stock function with a bool mask [b, 1|h, n, m]
    handed over in the stock format (the prepared mask itself for the global pass, so that pass is the stock
    call bit for bit); returns [b, h, n, d]."""
    def attend(q, k, v, mask, *, scale, dropout_p):
        if mask is base_bool:
            fmt = attention_mask
        elif base_name == "eager":
            dt = attention_mask.dtype if attention_mask is not None else q.dtype
            fmt = torch.where(mask, torch.zeros((), dtype=dt, device=mask.device), finite_min(dt))
        else:
            fmt = mask
        out, _ = base_fn(module, q, k, v, fmt, dropout=dropout_p, scaling=scaling, **kwargs)
        return out.transpose(1, 2)
    return attend


class _StepPlan:
    """What the mechanism layers of one model call share when they run a custom-op kernel (``fused``,
    ``triton``) with a gate and nothing is recorded, made by the first of them after the kernel's checks: the
    checked masks, the unchecked kernel and the inputs it was made for. A layer whose call matches (the same
    ``structure_mask`` and padding-mask tensors, unchanged; the same query and key shapes, dtype and device) runs
    its gate and the kernel and nothing else. Never made inside a compiled graph, for a layer called on its own,
    or while gates, probabilities or a forced gate are asked for."""

    __slots__ = ("structure", "version", "attention_mask", "q_shape", "k_shape", "dtype", "device", "kernel",
                 "local", "base", "gated_inference")

    def __init__(self, structure, attention_mask, query, key, hidden, kernel: str, local, base):
        self.structure, self.attention_mask = structure, attention_mask
        self.version = structure._version if isinstance(structure, torch.Tensor) else None
        self.q_shape, self.k_shape, self.dtype, self.device = query.shape, key.shape, query.dtype, query.device
        self.kernel, self.local, self.base = UNCHECKED_KERNELS[kernel], local, base
        # the kernel computes the gate itself at inference: plain tensors, one real dtype for all inputs, no autocast
        # (which would turn the linear inside the kernel to another dtype)
        gated = GATED_INFERENCE_KERNELS.get(kernel)
        same = (query.dtype in (torch.float32, torch.float64) and key.dtype is query.dtype
                and hidden is not None and hidden.dtype is query.dtype
                and not torch.is_autocast_enabled(query.device.type))
        self.gated_inference = gated if same and eager_call(query, key, hidden, local, base) else None

    def fits(self, structure, attention_mask, query: torch.Tensor, key: torch.Tensor) -> bool:
        return (structure is self.structure and attention_mask is self.attention_mask
                and (self.version is None or structure._version == self.version)
                and query.shape == self.q_shape and key.shape == self.k_shape and query.dtype is self.dtype
                and query.device == self.device)


def _run_planned(rt: Runtime, plan: _StepPlan, module: nn.Module, query: torch.Tensor, key: torch.Tensor,
                 value: torch.Tensor, hidden: Optional[torch.Tensor], scaling: Optional[float],
                 dropout: float) -> torch.Tensor:
    """A mechanism layer of a planned step: its gate and the kernel -> out [b, n, h, d]. At inference (no
    gradient, no dropout) a kernel that can computes the gate itself from the hidden states: one call."""
    scale = query.shape[-1] ** -0.5 if scaling is None else scaling
    if plan.gated_inference is not None and dropout == 0.0 and hidden is not None and not torch.is_grad_enabled():
        gate_module = module._modules[GATE_ATTR]
        out = plan.gated_inference(query, key, value, plan.local, plan.base, hidden, gate_module.weight,
                                   gate_module.bias, scale=scale)
    else:
        gate = _gate_values(rt, module, hidden)
        seed = _dropout_seed(rt, module) if dropout > 0.0 else None
        out = plan.kernel(query, key, value, plan.local, gate, plan.base, scale=scale, dropout_p=dropout, seed=seed)
    return out.transpose(1, 2).contiguous()


def _plannable(rt: Runtime, want_probs: bool) -> bool:
    """Whether this step may run on a plan: inside a model call, with nothing to record and no forced gate,
    outside a compiled graph (the caller checks that the kernel is a custom-op one)."""
    return (rt.step.open and not want_probs and rt.gate_override is None and not rt.recorders
            and not (rt.output_gates and rt.output_gates[-1] is not None) and not torch.compiler.is_compiling())


def _dispatch(rt: Runtime, module: nn.Module, stock_attend: Callable[[], Callable], query: torch.Tensor,
              key: torch.Tensor, value: torch.Tensor, local: torch.Tensor, gate: torch.Tensor,
              base_bool: Optional[torch.Tensor], scale: float, dropout: float) -> torch.Tensor:
    """Kernel dispatch: the mechanism's kernel (resolved for the device) -> out [b, n, h, d] (the stock layout).

    query [b, h, n, d], key/value [b, h, m, d], local [b|1, 1, n, m], gate [b, G, n], base_bool [b, 1|h, n, m]
    or None; ``stock_attend()`` makes `_stock_attend`'s function, which the ``exact`` kernel uses.
    The kernels with a custom op ([`UNCHECKED_KERNELS`][structattn.attention.kernels.UNCHECKED_KERNELS]) check their
    inputs in the first layer of a step only, and take the layer's dropout seed (`_dropout_seed`).
    """
    kernel = rt.kernel_for(query.device)
    if kernel == "exact":
        mixed = two_pass_mixed_attention(query, key, value, local, gate, base_bool, scale=scale, dropout_p=dropout,
                                         attend=stock_attend())
    elif kernel in UNCHECKED_KERNELS:
        signature = ("checked", kernel, query.shape, key.shape, gate.shape, query.dtype, key.dtype, query.device)
        fn = KERNELS[kernel] if rt.step.first(signature, (local, base_bool)) else UNCHECKED_KERNELS[kernel]
        seed = _dropout_seed(rt, module) if dropout > 0.0 else None
        mixed = fn(query, key, value, local, gate, base_bool, scale=scale, dropout_p=dropout, seed=seed)
    else:
        mixed = get_kernel(kernel, query.device)(query, key, value, local, gate, base_bool, scale=scale,
                                                 dropout_p=dropout)
    return mixed.transpose(1, 2).contiguous()


def _dropout_seed(rt: Runtime, module: nn.Module):
    """The dropout seed of this layer call: derived from the step's seed (drawn once per step from torch's
    generator, as an int64 tensor inside a compiled graph: no ``.item()`` there) and the layer number; None
    (the kernel draws its own from torch's generator) for a module shared by all layers
    (ALBERT), a call outside a model call, and under gradient checkpointing, whose recompute in the backward
    restores torch's generator, not the step's seed."""
    step = rt.step
    layer = getattr(module, "_structattn_layer", None)
    if layer is None or step.seed_per_layer or not step.open:
        return None
    if step.seed is None:
        step.seed = draw_seed(as_tensor=torch.compiler.is_compiling())
    return derive_seed(step.seed, layer)


def _gate_values(rt: Runtime, module: nn.Module, hidden: Optional[torch.Tensor]) -> torch.Tensor:
    """g = sigmoid(W h + b) [b, G, n] from the layer's input hidden states h [b, n, H] (``force_gate``: the
    forced value)."""
    if hidden is None:
        raise UserError(f"{type(module).__name__} was called without its structattn pre-hook (the hidden states "
                        "its gate reads are missing): call the model or the attention module, not the attention "
                        "function directly")
    gate_module: StructureGate = getattr(module, GATE_ATTR)
    if rt.gate_override is not None:
        return hidden.new_full((hidden.shape[0], gate_module.num_gates, hidden.shape[1]), float(rt.gate_override))
    return gate_module.forward(hidden)   # part of the attention call: no module call of its own (nor its hooks)


def _mix_without_gate(rt: Runtime, module: nn.Module, attend: Callable, query: torch.Tensor, key: torch.Tensor,
                      value: torch.Tensor, structure: Any, base_bool: Optional[torch.Tensor], scale: float,
                      dropout: float, want_probs: bool) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
    """``mix`` = ``local`` | ``concat`` | ``gaussian``: out [b, n, h, d] and, when ``want_probs``, the
    probabilities [b, h, n, m] (None for ``concat``, which has no single distribution).

    local: one stock call over [`local_pattern`][structattn.attention.kernels.local_pattern] (Eq. 3);
    concat: the stock global and local outputs, [b, n, 2 h d] -> ``structattn_concat`` -> [b, n, h d];
    gaussian: `biased_attention` with the layer's Gaussian bias, I = the
    keys each query may attend (its base row).
    """
    mix = rt.mechanism.mix
    b, h, n, d = query.shape
    probs = None
    if mix == "gaussian":
        lengths = None if base_bool is None else base_bool.sum(dim=-1)  # [b, 1|h, n]
        bias = getattr(module, GAUSSIAN_ATTR)(query, key.shape[2], lengths)
        out = biased_attention(query, key, value, bias, base_bool, scale=scale, dropout_p=dropout)
        if want_probs:
            with torch.no_grad():
                probs = reference_biased_attention(query, key, value, bias, base_bool, scale=scale)[1]
        return out.transpose(1, 2), probs
    local = local_pattern(step_local_mask(rt, structure, b, n, key.shape[2], query.device), base_bool)
    out_local = attend(query, key, value, local, scale=scale, dropout_p=dropout)
    if mix == "local":
        if want_probs:
            with torch.no_grad():
                ones = query.new_ones((b, 1, n))
                probs = reference_mixed_attention(query, key, value, local, ones, base_bool, scale=scale)[1]
        return out_local.transpose(1, 2), probs
    out_global = attend(query, key, value, base_bool, scale=scale, dropout_p=dropout)
    both = torch.cat([out_global.transpose(1, 2).reshape(b, n, h * d), out_local.transpose(1, 2).reshape(b, n, h * d)],
                     dim=-1)
    return getattr(module, CONCAT_ATTR)(both).view(b, n, h, d), None


def structattn_attention(module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                         attention_mask: Optional[torch.Tensor], dropout: float = 0.0,
                         scaling: Optional[float] = None, **kwargs: Any):
    """Attention function registered as ``"structattn"`` (the AttentionInterface signature).

    Args:
        query [b, h, n, d], key, value [b, h, m, d]; attention_mask: HF's prepared mask (bool [b, 1, n, m]
        for base sdpa, additive float for base eager, or None); kwargs may hold ``structattn_hidden``
        [b, n, H] (the layer's input hidden states, set by the pre-hook of mechanism layers) and
        ``structure_mask`` [b, n, m] bool.

    Modules that are not mechanism layers (layers outside ``layers``, a decoder's self- and cross-attention)
    run the stock function unchanged.

    Returns:
        (out [b, n, h, d], attention weights [b, h, n, m] or None) like the stock functions. The weights, on
        request, are the probabilities recomputed by a reference implementation (before dropout): the mixed
        ones for ``mix="gate"``, the local ones for ``local``, the biased ones for ``gaussian``, None for
        ``concat``.
    """
    hidden = kwargs.pop(HIDDEN_KW, None)
    structure = kwargs.pop(STRUCTURE_MASK_KW, None)
    rt: Optional[Runtime] = getattr(module, "_structattn_rt", None)
    plan = rt.step.plan if rt is not None else None
    if (plan is not None and module.__dict__.get("_structattn_active") and not kwargs.get("output_attentions")
            and plan.fits(structure, attention_mask, query, key)):
        return _run_planned(rt, plan, module, query, key, value, hidden, scaling, dropout), None
    if rt is None or not getattr(module, "_structattn_active", False):
        base_name = rt.mechanism.base if rt is not None else config_base(getattr(module, "config", None))
        return stock_function(module, base_name)(module, query, key, value, attention_mask, dropout=dropout,
                                                 scaling=scaling, **kwargs)
    base_name = rt.mechanism.base
    want_weights = bool(kwargs.pop("output_attentions", False))  # the stock SDPA wrapper would only warn
    want_probs = want_weights or (bool(rt.recorders) and any(r.want_attentions for r in rt.recorders))
    base_bool = step_bool_mask(rt, attention_mask)
    scale = query.shape[-1] ** -0.5 if scaling is None else scaling

    def stock_attend() -> Callable:
        return _stock_attend(module, rt.base_function(module, base_name), base_name, attention_mask, base_bool,
                             scaling, kwargs)

    probs = None
    if not rt.mechanism.has_gate:
        out, probs = _mix_without_gate(rt, module, stock_attend(), query, key, value, structure, base_bool, scale,
                                       dropout, want_probs)
        out = out.to(query.dtype)
    else:
        local = step_local_mask(rt, structure, query.shape[0], query.shape[2], key.shape[2], query.device)
        kernel = rt.kernel_for(query.device) if _plannable(rt, want_probs) else None
        if kernel in UNCHECKED_KERNELS:
            # the first mechanism layer of the step: the kernel's checks once, then the plan every layer follows
            KERNEL_CHECKS[kernel](query, key, local, base_bool, dropout)
            plan = rt.step.plan = _StepPlan(structure, attention_mask, query, key, hidden, kernel, local, base_bool)
            return _run_planned(rt, plan, module, query, key, value, hidden, scaling, dropout), None
        gate = _gate_values(rt, module, hidden)
        if rt.gate_override == 0.0:  # force_gate(model, 0): the stock call alone
            out, _ = rt.base_function(module, base_name)(module, query, key, value, attention_mask, dropout=dropout,
                                                         scaling=scaling, **kwargs)
        else:
            out = _dispatch(rt, module, stock_attend, query, key, value, local, gate, base_bool, scale, dropout)
        if want_probs:
            with torch.no_grad():
                probs = reference_mixed_attention(query, key, value, local, gate, base_bool, scale=scale)[1]
        record_call(rt, module, gate, probs)
    return out, probs.to(query.dtype) if (want_weights and probs is not None) else None
