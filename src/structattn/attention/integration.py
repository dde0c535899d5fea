"""Structure-aware attention inside Hugging Face encoders (transformers v5), without copying modeling files.

How it plugs in:

* :func:`register` adds the attention function :func:`structattn_attention` and a matching mask
  function under the name ``"structattn"`` (``transformers.AttentionInterface`` /
  ``AttentionMaskInterface``; without the mask registration the padding mask would be dropped).
* :func:`install` finds the self-attention modules of the encoder (:data:`ARCHITECTURES`), gives each
  selected one a :class:`~structattn.attention.gate.StructureGate` submodule named ``structattn_gate``
  (so its weights land in ``model.safetensors``) and a forward pre-hook that hands the module's input hidden
  states h [b, n, H] to the attention function (keyword ``structattn_hidden``), which computes the gate
  g = sigmoid(W h + b) [b, G, n] itself. Settings go to ``config.structattn`` (a dict, so
  they persist in ``config.json``), and the model's attention implementation becomes ``"structattn"``.
* ``model(..., structure_mask=M)`` with M [b, T, T] bool (True = query row may attend key column) reaches
  the attention function as an extra keyword. For multiple choice, M may be [b, choices, T, T]; it is
  flattened like ``input_ids``. Without it, a ``window`` mechanism over tokens (``window_unit="token"``)
  builds the band |i - j| <= k over token positions, the very mask the collator builds for it; every
  other mechanism (a window over words included: the call has no word boundaries) fails with a message
  saying what to pass.

In the attention function the global part is the stock kernel (``sdpa`` or the model's own ``eager``
function, setting ``base``) called exactly as the stock model calls it; layers without the mechanism,
and the ``global`` mechanism, call only that kernel.

Outputs on request: ``model(..., output_gates=True)`` adds ``gates`` (a tuple of [b, n] per-token or
[b, h, n] per-head gate values, one per mechanism layer call, lowest layer first) to the model output;
``output_attentions=True`` returns the mixed probabilities [b, h, n, m] as ``attentions``; the context
manager :func:`record` collects both for any forward call of the model or its submodules.

Per-step work (docs/attention-performance.md): what every mechanism layer of one model call shares (the
structure mask in the kernels' format, the padding mask as bool, the check of the kernel's inputs, the dropout
seed) is made by the first layer that needs it and reused by the others (:class:`_Step`); each layer adds only
its gate and its kernel call.
"""
from __future__ import annotations

import contextlib
import dataclasses
import sys
import warnings
from typing import Any, Callable, Iterator, Optional

import torch
from torch import nn
from transformers.models.albert.modeling_albert import AlbertAttention
from transformers.models.bart.modeling_bart import BartAttention
from transformers.models.bert.modeling_bert import BertSelfAttention
from transformers.models.distilbert.modeling_distilbert import DistilBertSelfAttention
from transformers.models.electra.modeling_electra import ElectraSelfAttention
from transformers.models.marian.modeling_marian import MarianAttention
from transformers.models.modernbert.modeling_modernbert import ModernBertAttention
from transformers.models.roberta.modeling_roberta import RobertaSelfAttention
from transformers.models.xlm_roberta.modeling_xlm_roberta import XLMRobertaSelfAttention

from ..errors import UserError
from .gaussian import GaussianLocality
from ..structure.relations import band
from .biased import biased_attention, reference_biased_attention
from .gate import StructureGate
from .eager import derive_seed, draw_seed
from .kernels import (KERNELS, UNCHECKED_KERNELS, finite_min, get_kernel, local_pattern, reference_mixed_attention,
                      resolve_kernel_name, tensor_version, two_pass_mixed_attention)
from .mechanisms import MechanismConfig, get_mechanism

ATTENTION_NAME = "structattn"
GATE_ATTR = "structattn_gate"
HIDDEN_KW = "structattn_hidden"  # the layer's input hidden states, handed by its pre-hook to the attention function
CONCAT_ATTR = "structattn_concat"  # mix="concat": Linear(2 H -> H) over [global; local] outputs
GAUSSIAN_ATTR = "structattn_gaussian"  # mix="gaussian": GaussianLocality
#: Names of the submodules a mechanism adds to an attention module (their weights are the mechanism's).
MECHANISM_ATTRS = (GATE_ATTR, CONCAT_ATTR, GAUSSIAN_ATTR)

#: model_type -> the module class that calls transformers' attention interface (tested ones).
ARCHITECTURES: dict[str, type[nn.Module]] = {
    "bert": BertSelfAttention,
    "roberta": RobertaSelfAttention,
    "xlm-roberta": XLMRobertaSelfAttention,
    "electra": ElectraSelfAttention,
    "distilbert": DistilBertSelfAttention,
    "albert": AlbertAttention,
    "modernbert": ModernBertAttention,
}

#: Encoder-decoder model_type -> its attention class; the mechanism goes into the encoder's self-attention
#: modules only (the decoder uses the same class for self- and cross-attention, which stay stock).
SEQ2SEQ_ARCHITECTURES: dict[str, type[nn.Module]] = {
    "marian": MarianAttention,
    "bart": BartAttention,
}

#: How many token-window masks (one per sequence shape) a model keeps.
WINDOW_CACHE_SIZE = 8

#: model_type -> why structure-aware attention cannot be installed.
REFUSED: dict[str, str] = {
    "deberta": "DeBERTa computes disentangled (relative-position) attention itself",
    "deberta-v2": "DeBERTa-v2/v3 computes disentangled (relative-position) attention itself",
    "mpnet": "MPNet adds a relative-position bias inside its own attention code",
    "xlnet": "XLNet uses two-stream relative attention written inside the model",
}

_registered = False


# ============================================================================================ registration


def _config_base(config) -> str:
    settings = getattr(config, "structattn", None)
    if isinstance(settings, dict) and settings.get("base") in ("sdpa", "eager"):
        return settings["base"]
    return "sdpa"


def structattn_mask(*args: Any, **kwargs: Any):
    """Mask function registered as ``"structattn"``: the stock ``sdpa`` (bool) or ``eager`` (additive float)
    mask, whichever the model's ``config.structattn["base"]`` names."""
    from transformers.masking_utils import eager_mask, sdpa_mask

    fn = eager_mask if _config_base(kwargs.get("config")) == "eager" else sdpa_mask
    return fn(*args, **kwargs)


def register() -> None:
    """Register ``"structattn"`` with transformers' attention and attention-mask interfaces (idempotent)."""
    global _registered
    if _registered:
        return
    from transformers import AttentionInterface, AttentionMaskInterface

    AttentionInterface.register(ATTENTION_NAME, structattn_attention)
    AttentionMaskInterface.register(ATTENTION_NAME, structattn_mask)
    _registered = True


# ============================================================================================ runtime state


@dataclasses.dataclass
class GateRecord:
    """What :func:`record` (or ``output_gates=True``) collected, one entry per mechanism layer call.

    gates: [b, n] (per-token gate) or [b, h, n] (per-head gate) tensors, detached.
    attentions: mixed probabilities [b, h, n, m] (only when requested), detached.
    layers: encoder layer index of each entry (ALBERT's shared layer: its call number).
    """

    want_attentions: bool = False
    gates: list = dataclasses.field(default_factory=list)
    attentions: list = dataclasses.field(default_factory=list)
    layers: list = dataclasses.field(default_factory=list)


class _Step:
    """What the mechanism layers of one forward call of the model share, prepared by the first layer that needs
    it: the structure and padding masks in the kernels' format, the inputs already checked, the dropout seed.

    Entries are matched by the identity and version of the tensors they were made from (so a call that reaches
    a layer without the model's pre-hook, or edits a mask in place, never reuses a stale one) and dropped when
    the next call of the model starts. Inside ``torch.compile`` nothing is cached (the graph computes each once).
    """

    MAX_ENTRIES = 16

    def __init__(self):
        self.open = False          # between the model's pre-hook and its forward hook
        self.seed = None           # dropout seed of the step: an int, or an int64 tensor in a compiled graph
        self.seed_per_layer = False  # gradient checkpointing: each layer draws its own seed (see _dropout_seed)
        self.entries: dict[tuple, tuple] = {}

    def start(self, seed_per_layer: bool) -> None:
        self.open, self.seed, self.seed_per_layer = True, None, seed_per_layer
        self.entries.clear()

    def cached(self, key: tuple, sources: tuple, build: Callable[[], Any]) -> Any:
        """``build()``, made once per step for these source tensors (any of them may be None); one entry per
        ``key``: other sources replace it."""
        if torch.compiler.is_compiling():
            return build()
        hit = self.entries.get(key)
        if hit is not None and _same_tensors(hit[0], hit[1], sources):
            return hit[2]
        value = build()
        if len(self.entries) >= self.MAX_ENTRIES:
            self.entries.clear()
        # holding the sources keeps their ids from being reused while the entry lives
        self.entries[key] = (sources, tuple(tensor_version(t) for t in sources), value)
        return value

    def first(self, key: tuple, sources: tuple) -> bool:
        """True for the first call of this step with ``key`` and these source tensors (inside a compiled graph:
        always)."""
        built = []
        self.cached(key, sources, lambda: built.append(True))
        return bool(built)


def _same_tensors(held: tuple, versions: tuple, sources: tuple) -> bool:
    """Whether ``sources`` are the ``held`` objects, unchanged since (same in-place versions)."""
    if len(held) != len(sources):
        return False
    for a, b, version in zip(held, sources, versions):
        if a is not b or tensor_version(b) != version:
            return False
    return True


class _Runtime:
    """State shared by the attention modules of one model (kept as a plain attribute, not a submodule)."""

    def __init__(self, mechanism: MechanismConfig, checkpoint_layers: list[nn.Module] = ()):
        self.mechanism = mechanism
        self.recorders: list[GateRecord] = []
        self.output_gates: list[Optional[GateRecord]] = []
        self.gate_override: Optional[float] = None
        self.kernel_cache: dict[str, str] = {}
        self.window_cache: dict[tuple, torch.Tensor] = {}
        self.base_functions: dict[tuple[type, str], Callable] = {}
        self.call_counter = 0
        self.step = _Step()
        # the modules that carry transformers' ``gradient_checkpointing`` flag (read once per step)
        self.checkpoint_layers = list(checkpoint_layers)

    def checkpointing(self) -> bool:
        return any(getattr(m, "gradient_checkpointing", False) for m in self.checkpoint_layers)

    def base_function(self, module: nn.Module, base: str) -> Callable:
        """:func:`_base_function` for this module class, looked up once."""
        key = (type(module), base)
        fn = self.base_functions.get(key)
        if fn is None:
            fn = self.base_functions[key] = _base_function(module, base)
        return fn

    def kernel_for(self, device: torch.device) -> str:
        key = device.type
        if key not in self.kernel_cache:
            self.kernel_cache[key] = resolve_kernel_name(self.mechanism.kernel, device)
        return self.kernel_cache[key]

    def kernels_resolved(self) -> list[str]:
        """The kernel names resolved so far (one per device type the model ran on)."""
        return list(self.kernel_cache.values())

    def window(self, n: int, m: int, k: int, device: torch.device) -> torch.Tensor:
        """The token window |i - j| <= k as bool [1, 1, n, m]; the :data:`WINDOW_CACHE_SIZE` most recently
        used shapes are kept (a dict keeps insertion order: the first key is the least recently used)."""
        key = (n, m, k, str(device))
        mask = self.window_cache.pop(key, None)
        if mask is None:
            mask = torch.from_numpy(band(n, m, k)).to(device)[None, None]
        self.window_cache[key] = mask
        while len(self.window_cache) > WINDOW_CACHE_SIZE:
            del self.window_cache[next(iter(self.window_cache))]
        return mask


def runtime_of(model: nn.Module) -> Optional[_Runtime]:
    """The structattn state of a model (None when no mechanism is installed); for a wrapper around an encoder
    (:class:`~structattn.sgnet.model.SGNetModel`) the state of its ``base_model``."""
    rt = getattr(model, "_structattn_rt", None)
    if rt is None:
        inner = getattr(model, "base_model", None)
        if isinstance(inner, nn.Module) and inner is not model:
            rt = getattr(inner, "_structattn_rt", None)
    return rt


# ============================================================================================ attention function


def _base_function(module: nn.Module, base: str):
    """The stock attention function: HF's SDPA wrapper or the model file's own eager function."""
    if base == "sdpa":
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward
    fn = getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)
    if fn is None:
        from transformers.models.bert.modeling_bert import eager_attention_forward as fn
    return fn


def _bool_mask(attention_mask: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """HF's prepared mask (bool for sdpa, additive float for eager) -> bool [b, 1|h, n, m] or None."""
    if attention_mask is None:
        return None
    if attention_mask.dtype == torch.bool:
        return attention_mask
    return attention_mask > finite_min(attention_mask.dtype) / 2


def _step_bool_mask(rt: _Runtime, attention_mask: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """:func:`_bool_mask`, converted once per step (eager masks are float; sdpa's are bool already)."""
    if attention_mask is None or attention_mask.dtype == torch.bool:
        return attention_mask
    return rt.step.cached(("base",), (attention_mask,), lambda: _bool_mask(attention_mask))


def _missing_mask_error(mech: MechanismConfig) -> UserError:
    """What to do when a mechanism that needs ``structure_mask`` was called without one."""
    build = ("build it with structattn.structure: encode_words (token_word per token), word structures for "
             f"relation {mech.relation!r}, then StructureCollator (the `structattn train` pipeline does this)")
    if mech.relation == "window":
        return UserError(
            f"mechanism {mech.name!r} counts its window in words (window_unit='word'), and a call without "
            "structure_mask has no word boundaries. Pass structure_mask=[batch, T, T] bool (True = may attend); "
            f"{build}. For a window over sub-word tokens (the SLA paper's WLA, Xu et al.'s hybrid) install the "
            "mechanism with window_unit='token'; then no structure_mask is needed")
    opts = ", ".join(f"{k}={v}" for k, v in mech.relation_options().items())
    return UserError(f"mechanism {mech.name!r} needs structure_mask=[batch, T, T] bool (True = may attend) in the "
                     f"model call{' (' + opts + ')' if opts else ''}; {build}")


def _local_mask(rt: _Runtime, structure: Any, b: int, n: int, m: int, device: torch.device) -> torch.Tensor:
    """The local pattern for this call: bool [b|1, 1, n, m].

    structure: the call's ``structure_mask`` ([b, n, m] or [b, choices, n, m], bool or 0/1) or None.
    """
    mech = rt.mechanism
    if structure is None:
        if mech.relation == "window" and mech.window_unit == "token":
            return rt.window(n, m, mech.k, device)
        if mech.relation == "all":
            return torch.ones((1, 1, n, m), dtype=torch.bool, device=device)
        raise _missing_mask_error(mech)
    if not isinstance(structure, torch.Tensor):
        structure = torch.as_tensor(structure)
    if structure.dtype != torch.bool:
        structure = structure != 0
    if structure.dim() == 4 and structure.shape[0] * structure.shape[1] == b:  # multiple choice [b, c, T, T]
        structure = structure.reshape(b, structure.shape[2], structure.shape[3])
    if structure.dim() != 3 or tuple(structure.shape) != (b, n, m):
        raise UserError(f"structure_mask has shape {tuple(structure.shape)}; expected [batch, T, T] = "
                        f"[{b}, {n}, {m}] for this input (or [batch, choices, T, T] for multiple choice)")
    return structure.to(device=device, non_blocking=True).unsqueeze(1)


def _step_local_mask(rt: _Runtime, structure: Any, b: int, n: int, m: int, device: torch.device) -> torch.Tensor:
    """:func:`_local_mask`, checked, converted and moved once per step (every layer of a call gets the same
    ``structure_mask``)."""
    return rt.step.cached(("local", b, n, m, device), (structure,),
                          lambda: _local_mask(rt, structure, b, n, m, device))


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


def _dispatch(rt: _Runtime, module: nn.Module, stock_attend: Callable[[], Callable], query: torch.Tensor,
              key: torch.Tensor, value: torch.Tensor, local: torch.Tensor, gate: torch.Tensor,
              base_bool: Optional[torch.Tensor], scale: float, dropout: float) -> torch.Tensor:
    """Kernel dispatch: the mechanism's kernel (resolved for the device) -> out [b, n, h, d] (the stock layout).

    query [b, h, n, d], key/value [b, h, m, d], local [b|1, 1, n, m], gate [b, G, n], base_bool [b, 1|h, n, m]
    or None; ``stock_attend()`` makes :func:`_stock_attend`'s function, which the ``exact`` kernel uses.
    The kernels with a custom op (:data:`~structattn.attention.kernels.UNCHECKED_KERNELS`) check their inputs in
    the first layer of a step only, and take the layer's dropout seed (:func:`_dropout_seed`).
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


def _dropout_seed(rt: _Runtime, module: nn.Module):
    """The dropout seed of this layer call: derived from the step's seed (drawn once per step from torch's
    generator, as an int64 tensor inside a compiled graph: no ``.item()`` there) and the layer number; None
    (the kernel draws its own from torch's generator, as every call did before) for a module shared by all layers
    (ALBERT), a call outside a model call, and under gradient checkpointing, whose recompute in the backward
    restores torch's generator, not the step's seed."""
    step = rt.step
    layer = getattr(module, "_structattn_layer", None)
    if layer is None or step.seed_per_layer or not step.open:
        return None
    if step.seed is None:
        step.seed = draw_seed(as_tensor=torch.compiler.is_compiling())
    return derive_seed(step.seed, layer)


def _gate_values(rt: _Runtime, module: nn.Module, hidden: Optional[torch.Tensor]) -> torch.Tensor:
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


def _in_backward() -> bool:
    return torch._C._current_graph_task_id() != -1


def _output_gate_record(rt: _Runtime) -> Optional[GateRecord]:
    """The record of the current top-level call when it asked for ``output_gates``, else None."""
    return rt.output_gates[-1] if rt.output_gates else None


def _record(rt: _Runtime, module: nn.Module, gate: torch.Tensor, probs: Optional[torch.Tensor]) -> None:
    """Recording: append this call's gate [b, n] (or [b, h, n]) and, where asked, its mixed probabilities
    [b, h, n, m] to every open :func:`record` and to the ``output_gates`` record of the current call.
    Nothing is recorded while autograd recomputes a checkpointed layer in the backward pass."""
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


def _mix_without_gate(rt: _Runtime, module: nn.Module, attend: Callable, query: torch.Tensor, key: torch.Tensor,
                      value: torch.Tensor, structure: Any, base_bool: Optional[torch.Tensor], scale: float,
                      dropout: float, want_probs: bool) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
    """``mix`` = ``local`` | ``concat`` | ``gaussian``: out [b, n, h, d] and, when ``want_probs``, the
    probabilities [b, h, n, m] (None for ``concat``, which has no single distribution).

    local: one stock call over :func:`~structattn.attention.kernels.local_pattern` (Eq. 3);
    concat: the stock global and local outputs, [b, n, 2 h d] -> ``structattn_concat`` -> [b, n, h d];
    gaussian: :func:`~structattn.attention.biased.biased_attention` with the layer's Gaussian bias, I = the
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
    local = local_pattern(_step_local_mask(rt, structure, b, n, key.shape[2], query.device), base_bool)
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
    structure = kwargs.pop("structure_mask", None)
    rt: Optional[_Runtime] = getattr(module, "_structattn_rt", None)
    if rt is None or not getattr(module, "_structattn_active", False):
        base_name = rt.mechanism.base if rt is not None else _config_base(getattr(module, "config", None))
        return _base_function(module, base_name)(module, query, key, value, attention_mask, dropout=dropout,
                                                 scaling=scaling, **kwargs)
    base_name = rt.mechanism.base
    base_fn = rt.base_function(module, base_name)
    want_weights = bool(kwargs.pop("output_attentions", False))  # the stock SDPA wrapper would only warn
    want_probs = want_weights or any(r.want_attentions for r in rt.recorders)
    base_bool = _step_bool_mask(rt, attention_mask)
    scale = query.shape[-1] ** -0.5 if scaling is None else scaling

    def stock_attend() -> Callable:
        return _stock_attend(module, base_fn, base_name, attention_mask, base_bool, scaling, kwargs)

    probs = None
    if not rt.mechanism.has_gate:
        out, probs = _mix_without_gate(rt, module, stock_attend(), query, key, value, structure, base_bool, scale,
                                       dropout, want_probs)
        out = out.to(query.dtype)
    else:
        local = _step_local_mask(rt, structure, query.shape[0], query.shape[2], key.shape[2], query.device)
        gate = _gate_values(rt, module, hidden)
        if rt.gate_override == 0.0:  # force_gate(model, 0): the stock call alone
            out, _ = base_fn(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)
        else:
            out = _dispatch(rt, module, stock_attend, query, key, value, local, gate, base_bool, scale, dropout)
        if want_probs:
            with torch.no_grad():
                probs = reference_mixed_attention(query, key, value, local, gate, base_bool, scale=scale)[1]
        _record(rt, module, gate, probs)
    return out, probs.to(query.dtype) if (want_weights and probs is not None) else None


# ============================================================================================ hooks


def _gate_pre_hook(module: nn.Module, args: tuple, kwargs: dict) -> None:
    """Forward pre-hook of a mechanism layer: checks that the model still runs ``"structattn"`` and, for
    ``mix="gate"``, hands the layer's input hidden states [b, n, H] to the attention function (keyword
    :data:`HIDDEN_KW`), which computes the gate from them. It edits the call's own keyword dict (a new one per
    call) instead of returning a copy."""
    impl = module.config._attn_implementation
    if impl != ATTENTION_NAME:
        raise UserError(f"the attention implementation of this model was changed to {impl!r} after structattn "
                        f"installed mechanism {module._structattn_rt.mechanism.name!r}: structure-aware attention "
                        f"would silently be off. Call model.set_attn_implementation('{ATTENTION_NAME}') or "
                        "structattn.remove_mechanism(model)")
    if module._structattn_rt.mechanism.has_gate:
        kwargs[HIDDEN_KW] = args[0] if args else kwargs["hidden_states"]


def _model_pre_hook(model: nn.Module, args: tuple, kwargs: dict):
    """Top-level pre-hook: starts the step (:class:`_Step`), takes ``output_gates`` out of the call and starts
    collecting if it is True."""
    rt: _Runtime = model._structattn_rt
    want = kwargs.pop("output_gates", False)
    rt.call_counter = 0
    rt.step.start(seed_per_layer=rt.checkpointing())
    if len(rt.output_gates) > 8:  # left over by forward calls that raised
        del rt.output_gates[:-8]
    rt.output_gates.append(GateRecord() if want else None)
    return args, kwargs


def _model_post_hook(model: nn.Module, args: tuple, kwargs: dict, output: Any):
    """Top-level forward hook: ends the step (its masks are freed) and attaches ``gates`` (a tuple) to the output
    when they were requested."""
    rt: _Runtime = model._structattn_rt
    rt.step.open = False
    rt.step.entries.clear()
    rec = rt.output_gates.pop() if rt.output_gates else None
    if rec is not None:
        if isinstance(output, dict):
            output["gates"] = tuple(rec.gates)
        elif isinstance(output, tuple):
            output = output + (tuple(rec.gates),)
    return output


def _remove_hooks(module: nn.Module, *fns) -> None:
    for store in (module._forward_pre_hooks, module._forward_hooks):
        for key in [k for k, f in store.items() if f in fns]:
            del store[key]
            for extra in ("_forward_pre_hooks_with_kwargs", "_forward_hooks_with_kwargs", "_forward_hooks_always_called"):
                getattr(module, extra, {}).pop(key, None)


# ============================================================================================ install


def _attention_class(model: nn.Module) -> type[nn.Module]:
    """The self-attention module class of ``model``: from :data:`ARCHITECTURES`, or (with a warning) the class
    that an untested architecture records attentions from when it uses transformers' attention interface."""
    config = model.config
    model_type = getattr(config, "model_type", None)
    if model_type in REFUSED:
        raise UserError(f"structattn cannot install into {model_type!r}: {REFUSED[model_type]}, not through "
                        "transformers' attention interface. Supported architectures: "
                        f"{', '.join(sorted(ARCHITECTURES))}")
    if model_type in ARCHITECTURES:
        return ARCHITECTURES[model_type]
    if model_type in SEQ2SEQ_ARCHITECTURES:
        return SEQ2SEQ_ARCHITECTURES[model_type]
    recordable = getattr(model, "_can_record_outputs", None) or {}
    cls = recordable.get("attentions") if isinstance(recordable, dict) else None
    if getattr(model, "_supports_attention_backend", False) and isinstance(cls, type):
        warnings.warn(f"structattn: architecture {model_type!r} is not in the tested list; installing into its "
                      f"{cls.__name__} modules", UserWarning, stacklevel=3)
        return cls
    raise UserError(f"structattn does not know where the self-attention of {model_type!r} ({type(model).__name__}) "
                    "is, or it does not use transformers' attention interface. Supported architectures: "
                    f"{', '.join(sorted(ARCHITECTURES))}; encoder-decoder: {', '.join(sorted(SEQ2SEQ_ARCHITECTURES))}")


def _num_layers(config) -> int:
    for name in ("num_hidden_layers", "n_layers", "num_layers"):
        value = getattr(config, name, None)
        if isinstance(value, int):
            return value
    raise UserError(f"cannot tell how many layers {type(config).__name__} has")


def _num_heads(module: nn.Module, config) -> int:
    for obj, name in ((module, "num_attention_heads"), (module, "n_heads"), (config, "num_attention_heads"),
                      (config, "n_heads")):
        value = getattr(obj, name, None)
        if isinstance(value, int):
            return value
    raise UserError(f"cannot tell how many heads {type(module).__name__} has")


def _input_size(module: nn.Module) -> int:
    for child in module.children():
        if isinstance(child, nn.Linear):
            return child.in_features
    raise UserError(f"cannot tell the hidden size of {type(module).__name__}")


def _is_encoder_decoder(model: nn.Module) -> bool:
    return bool(getattr(model.config, "is_encoder_decoder", False))


def attention_modules(model: nn.Module) -> list[nn.Module]:
    """The self-attention modules of the encoder, lowest layer first (ALBERT: its shared module(s)).

    For an encoder-decoder model (Marian, BART) only the encoder's self-attention modules: the decoder's
    self-attention and cross-attention stay stock."""
    cls = _attention_class(model)
    root = model.get_encoder() if _is_encoder_decoder(model) else model
    return [mod for mod in root.modules() if isinstance(mod, cls)]


def _concat_projection(hidden: int, like: torch.Tensor) -> nn.Linear:
    """Linear(2 H -> H) of ``mix="concat"``, starting as the mean of the two outputs: W = [I/2, I/2], b = 0
    (so installing it into a trained model starts from a blend, not from noise)."""
    proj = nn.Linear(2 * hidden, hidden, device=like.device, dtype=like.dtype)
    with torch.no_grad():
        eye = torch.eye(hidden, device=like.device, dtype=like.dtype) / 2
        proj.weight.copy_(torch.cat([eye, eye], dim=1))
        proj.bias.zero_()
    return proj


def _add_mechanism_modules(module: nn.Module, mech: MechanismConfig, config, param: torch.Tensor,
                           init_std: float) -> None:
    """Give one mechanism layer its parameters: the gate (``mix="gate"``), the concat projection or the
    Gaussian bias; every one is a submodule, so its weights are saved with the model."""
    hidden = _input_size(module)
    heads = _num_heads(module, config)
    if mech.has_gate:
        gates = 1 if mech.gate == "token" else heads
        module.add_module(GATE_ATTR, StructureGate(hidden, gates, bias=mech.gate_has_bias, init_bias=mech.gate_bias,
                                                   init_std=init_std, device=param.device, dtype=param.dtype))
    elif mech.mix == "concat":
        module.add_module(CONCAT_ATTR, _concat_projection(hidden, param))
    elif mech.mix == "gaussian":
        module.add_module(GAUSSIAN_ATTR, GaussianLocality(mech.gaussian, hidden // heads, window=mech.gaussian_window,
                                                          init_std=init_std, device=param.device, dtype=param.dtype))


def install(model: nn.Module, mechanism: str | MechanismConfig | dict = "sla", **options: Any) -> nn.Module:
    """Install a mechanism into ``model`` in place (replacing one installed before) and return the model.

    Every existing weight is kept; only gate parameters are created (on the model's device and dtype).
    Raises :class:`UserError` for an unsupported architecture, a decoder, or bad options.
    """
    mech = get_mechanism(mechanism, **options)
    config = model.config
    if getattr(config, "is_decoder", False) and not getattr(config, "is_encoder_decoder", False):
        raise UserError("structattn installs into encoders (and the encoder of an encoder-decoder model) only; "
                        "this config is a decoder (is_decoder=True)")
    modules = attention_modules(model)
    if not modules:
        raise UserError(f"no self-attention modules found in {type(model).__name__}")
    if runtime_of(model) is not None:
        uninstall(model)
    register()

    num_layers = _num_layers(config)
    shared = len(modules) != num_layers
    if shared and mech.layers is not None:
        raise UserError(f"{type(model).__name__} shares its attention module across layers ({len(modules)} modules "
                        f"for {num_layers} layers): the mechanism applies to every layer; leave layers unset")
    indices = mech.layer_indices(num_layers)
    rt = _Runtime(mech, [m for m in model.modules() if hasattr(m, "gradient_checkpointing")])
    param = next(model.parameters())
    init_std = mech.gate_init_std
    if init_std is None:
        init_std = float(getattr(config, "initializer_range", 0.02))
    for idx, module in enumerate(modules):
        layer = None if shared else idx
        module._structattn_rt = rt
        module._structattn_layer = layer
        module._structattn_active = not mech.is_global and (shared or idx in indices)
        if module._structattn_active:
            _add_mechanism_modules(module, mech, config, param, init_std)
            module.register_forward_pre_hook(_gate_pre_hook, with_kwargs=True)
    model._structattn_rt = rt
    model.register_forward_pre_hook(_model_pre_hook, with_kwargs=True)
    model.register_forward_hook(_model_post_hook, with_kwargs=True)
    config.structattn = {**mech.to_dict(), "layer_indices": indices}
    _set_implementation(model, ATTENTION_NAME)
    return model


def _set_implementation(model: nn.Module, name: str) -> None:
    """Switch the model (and its sub-models) to attention implementation ``name``; a refusal is the user's to
    see (the gate pre-hook also fails loudly if a module ends up on another implementation)."""
    try:
        model.set_attn_implementation(name)
    except ValueError as exc:
        raise UserError(f"transformers refused attention implementation {name!r} for {type(model).__name__}: "
                        f"{exc}") from exc


def uninstall(model: nn.Module) -> nn.Module:
    """Remove an installed mechanism: gates, hooks and settings; the stock attention (its base) comes back."""
    rt = runtime_of(model)
    if rt is None:
        return model
    for module in model.modules():
        if getattr(module, "_structattn_rt", None) is rt and module is not model:
            for attr in MECHANISM_ATTRS:
                if hasattr(module, attr):
                    delattr(module, attr)
            _remove_hooks(module, _gate_pre_hook)
            del module._structattn_rt
            for attr in ("_structattn_layer", "_structattn_active"):
                if hasattr(module, attr):
                    delattr(module, attr)
    _remove_hooks(model, _model_pre_hook, _model_post_hook)
    del model._structattn_rt
    if hasattr(model.config, "structattn"):
        del model.config.structattn
    _set_implementation(model, rt.mechanism.base)
    return model


# ========================================================================================== analysis functions


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


def is_mechanism_parameter(name: str) -> bool:
    """True for a parameter (or saved key) that belongs to a mechanism's own module (gate, concat projection,
    Gaussian bias)."""
    return any(f".{attr}." in f".{name}" for attr in MECHANISM_ATTRS)


def gate_parameters(model: nn.Module) -> list[nn.Parameter]:
    """The parameters the mechanism added: gates, concat projections, Gaussian biases (for their own learning
    rate, or to count them)."""
    return [p for name, p in model.named_parameters() if is_mechanism_parameter(name)]


register()
