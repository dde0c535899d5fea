"""Structure-aware attention inside Hugging Face encoders (transformers v5), without copying modeling files.

How it plugs in:

* :func:`register` adds the attention function :func:`structattn_attention` and a matching mask
  function under the name ``"structattn"`` (``transformers.AttentionInterface`` /
  ``AttentionMaskInterface``; without the mask registration the padding mask would be dropped).
* :func:`install` finds the self-attention modules of the encoder (:data:`ARCHITECTURES`), gives each
  selected one a :class:`~structattn.attention.gate.StructureGate` submodule named ``structattn_gate``
  (so its weights land in ``model.safetensors``) and a forward pre-hook that computes
  g = sigmoid(W h + b) [b, G, n] from the module's input hidden states h [b, n, H] and hands it to the
  attention function as the keyword ``structattn_gate``. Settings go to ``config.structattn`` (a dict, so
  they persist in ``config.json``), and the model's attention implementation becomes ``"structattn"``.
* ``model(..., structure_mask=M)`` with M [b, T, T] bool (True = query row may attend key column) reaches
  the attention function as an extra keyword. For multiple choice, M may be [b, choices, T, T]; it is
  flattened like ``input_ids``. Mechanisms with a ``window`` relation build a token window when no mask is
  given; the others fail with a message saying what to pass.

In the attention function the global part is the stock kernel (``sdpa`` or the model's own ``eager``
function, setting ``base``) called exactly as the stock model calls it; layers without the mechanism,
and the ``global`` mechanism, call only that kernel.

Outputs on request: ``model(..., output_gates=True)`` adds ``gates`` (a tuple of [b, n] per-token or
[b, h, n] per-head gate values, one per mechanism layer call, lowest layer first) to the model output;
``output_attentions=True`` returns the mixed probabilities [b, h, n, m] as ``attentions``; the context
manager :func:`record` collects both for any forward call of the model or its submodules.
"""
from __future__ import annotations

import contextlib
import dataclasses
import sys
import warnings
from typing import Any, Iterator, Optional

import torch
from torch import nn

from ..errors import UserError
from .gate import StructureGate
from .kernels import (finite_min, fused_mixed_attention, get_kernel, reference_mixed_attention,
                      resolve_kernel_name, two_pass_mixed_attention)
from .mechanisms import MechanismConfig, get_mechanism

ATTENTION_NAME = "structattn"
GATE_ATTR = "structattn_gate"

#: model_type -> class name of the module that calls transformers' attention interface (tested ones).
ARCHITECTURES: dict[str, str] = {
    "bert": "BertSelfAttention",
    "roberta": "RobertaSelfAttention",
    "xlm-roberta": "XLMRobertaSelfAttention",
    "electra": "ElectraSelfAttention",
    "distilbert": "DistilBertSelfAttention",
    "albert": "AlbertAttention",
    "modernbert": "ModernBertAttention",
}

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


class _Runtime:
    """State shared by the attention modules of one model (kept as a plain attribute, not a submodule)."""

    def __init__(self, mechanism: MechanismConfig, layer_indices: list[int]):
        self.mechanism = mechanism
        self.layer_indices = layer_indices
        self.recorders: list[GateRecord] = []
        self.output_gates: list[Optional[GateRecord]] = []
        self.gate_override: Optional[float] = None
        self.kernel_cache: dict[str, str] = {}
        self.window_cache: dict[tuple, torch.Tensor] = {}
        self.call_counter = 0

    def kernel_for(self, device: torch.device) -> str:
        key = device.type
        if key not in self.kernel_cache:
            self.kernel_cache[key] = resolve_kernel_name(self.mechanism.kernel, device)
        return self.kernel_cache[key]

    def kernels_resolved(self) -> list[str]:
        """The kernel names resolved so far (one per device type the model ran on)."""
        return list(self.kernel_cache.values())

    def window(self, n: int, m: int, k: int, device: torch.device) -> torch.Tensor:
        key = (n, m, k, str(device))
        if key not in self.window_cache:
            i = torch.arange(n, device=device)[:, None]
            j = torch.arange(m, device=device)[None, :]
            self.window_cache[key] = ((i - j).abs() <= k)[None, None]
        return self.window_cache[key]


def runtime_of(model: nn.Module) -> Optional[_Runtime]:
    """The structattn state of a model (None when no mechanism is installed)."""
    return getattr(model, "_structattn_rt", None)


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


def _local_mask(rt: _Runtime, structure: Optional[torch.Tensor], b: int, n: int, m: int,
                device: torch.device) -> torch.Tensor:
    """The local pattern for this call: bool [b|1, 1, n, m]."""
    mech = rt.mechanism
    if structure is None:
        if mech.relation == "window":
            return rt.window(n, m, mech.k, device)
        if mech.relation == "all":
            return torch.ones((1, 1, n, m), dtype=torch.bool, device=device)
        opts = ", ".join(f"{k}={v}" for k, v in mech.relation_options().items())
        raise UserError(
            f"mechanism {mech.name!r} needs structure_mask=[batch, T, T] bool (True = may attend) in the model call; "
            f"build it with structattn.structure from relation {mech.relation!r}{' (' + opts + ')' if opts else ''}")
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


def _in_backward() -> bool:
    try:
        return torch._C._current_graph_task_id() != -1
    except AttributeError:  # pragma: no cover - older torch
        return False


def structattn_attention(module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                         attention_mask: Optional[torch.Tensor], dropout: float = 0.0,
                         scaling: Optional[float] = None, **kwargs: Any):
    """Attention function registered as ``"structattn"`` (the AttentionInterface signature).

    Args:
        query [b, h, n, d], key, value [b, h, m, d]; attention_mask: HF's prepared mask (bool [b, 1, n, m]
        for base sdpa, additive float for base eager, or None); kwargs may hold ``structattn_gate``
        [b, G, n] (set by the pre-hook of mechanism layers) and ``structure_mask`` [b, n, m] bool.

    Returns:
        (out [b, n, h, d], attention weights [b, h, n, m] or None) like the stock functions.
    """
    gate = kwargs.pop(GATE_ATTR, None)
    structure = kwargs.pop("structure_mask", None)
    rt: Optional[_Runtime] = getattr(module, "_structattn_rt", None)
    base_name = rt.mechanism.base if rt is not None else _config_base(getattr(module, "config", None))
    base_fn = _base_function(module, base_name)
    if gate is None or rt is None:
        return base_fn(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)

    want_weights = bool(kwargs.pop("output_attentions", False))  # the stock SDPA wrapper would only warn
    b, h, n, _ = query.shape
    m = key.shape[2]
    local = _local_mask(rt, structure, b, n, m, query.device)
    base_bool = _bool_mask(attention_mask)
    want_probs = want_weights or any(r.want_attentions for r in rt.recorders)
    recording = (rt.recorders or rt.output_gates and rt.output_gates[-1] is not None) and not _in_backward()
    sc = query.shape[-1] ** -0.5 if scaling is None else scaling

    if rt.gate_override == 0.0:
        out, weights = base_fn(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)
    else:
        kernel = rt.kernel_for(query.device)
        if kernel == "exact":
            def attend(q, k, v, mask, *, scale, dropout_p):
                if mask is base_bool:
                    fmt = attention_mask
                elif base_name == "eager":
                    dt = attention_mask.dtype if attention_mask is not None else q.dtype
                    fmt = torch.where(mask, torch.zeros((), dtype=dt, device=mask.device), finite_min(dt))
                else:
                    fmt = mask
                o, _ = base_fn(module, q, k, v, fmt, dropout=dropout_p, scaling=scaling, **kwargs)
                return o.transpose(1, 2)

            mixed = two_pass_mixed_attention(query, key, value, local, gate, base_bool, scale=sc,
                                             dropout_p=dropout, attend=attend)
        elif kernel == "fused":
            mixed = fused_mixed_attention(query, key, value, local, gate, base_bool, scale=sc, dropout_p=dropout)
        else:
            mixed = get_kernel(kernel, query.device)(query, key, value, local, gate, base_bool, scale=sc,
                                                     dropout_p=dropout)
        out = mixed.transpose(1, 2).contiguous()
        weights = None

    probs = None
    if want_probs:
        with torch.no_grad():
            probs = reference_mixed_attention(query, key, value, local, gate, base_bool, scale=sc)[1]
        weights = probs.to(query.dtype) if want_weights else weights
    if recording:
        layer = getattr(module, "_structattn_layer", None)
        if layer is None:
            layer = rt.call_counter
            rt.call_counter += 1
        g = gate.detach()
        g = g[:, 0] if g.shape[1] == 1 else g
        targets = list(rt.recorders)
        if rt.output_gates and rt.output_gates[-1] is not None:
            targets.append(rt.output_gates[-1])
        for rec in targets:
            rec.gates.append(g)
            rec.layers.append(layer)
            if rec.want_attentions and probs is not None:
                rec.attentions.append(probs)
    return out, weights


# ============================================================================================ hooks


def _gate_pre_hook(module: nn.Module, args: tuple, kwargs: dict):
    """Forward pre-hook of a mechanism layer: g = sigmoid(W h + b) from its input hidden states."""
    rt: _Runtime = module._structattn_rt
    impl = module.config._attn_implementation
    if impl != ATTENTION_NAME:
        raise UserError(f"the attention implementation of this model was changed to {impl!r} after structattn "
                        f"installed mechanism {rt.mechanism.name!r}: structure-aware attention would silently be "
                        f"off. Call model.set_attn_implementation('{ATTENTION_NAME}') or "
                        "structattn.remove_mechanism(model)")
    hidden = args[0] if args else kwargs["hidden_states"]
    gate_module: StructureGate = getattr(module, GATE_ATTR)
    if rt.gate_override is not None:
        g = hidden.new_full((hidden.shape[0], gate_module.num_gates, hidden.shape[1]), float(rt.gate_override))
    else:
        g = gate_module(hidden)
    kwargs = dict(kwargs)
    kwargs[GATE_ATTR] = g
    return args, kwargs


def _model_pre_hook(model: nn.Module, args: tuple, kwargs: dict):
    """Top-level pre-hook: takes ``output_gates`` out of the call and starts collecting if it is True."""
    rt: _Runtime = model._structattn_rt
    want = kwargs.pop("output_gates", False)
    rt.call_counter = 0
    if len(rt.output_gates) > 8:  # left over by forward calls that raised
        del rt.output_gates[:-8]
    rt.output_gates.append(GateRecord() if want else None)
    return args, kwargs


def _model_post_hook(model: nn.Module, args: tuple, kwargs: dict, output: Any):
    """Top-level forward hook: attaches ``gates`` (a tuple) to the output when they were requested."""
    rt: _Runtime = model._structattn_rt
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


def _attention_class_name(model: nn.Module) -> str:
    config = model.config
    model_type = getattr(config, "model_type", None)
    if model_type in REFUSED:
        raise UserError(f"structattn cannot install into {model_type!r}: {REFUSED[model_type]}, not through "
                        "transformers' attention interface. Supported architectures: "
                        f"{', '.join(sorted(ARCHITECTURES))}")
    if model_type in ARCHITECTURES:
        return ARCHITECTURES[model_type]
    recordable = getattr(model, "_can_record_outputs", None) or {}
    cls = recordable.get("attentions") if isinstance(recordable, dict) else None
    if getattr(model, "_supports_attention_backend", False) and isinstance(cls, type):
        warnings.warn(f"structattn: architecture {model_type!r} is not in the tested list; installing into its "
                      f"{cls.__name__} modules", UserWarning, stacklevel=3)
        return cls.__name__
    raise UserError(f"structattn does not know where the self-attention of {model_type!r} ({type(model).__name__}) "
                    "is, or it does not use transformers' attention interface. Supported architectures: "
                    f"{', '.join(sorted(ARCHITECTURES))}")


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


def attention_modules(model: nn.Module) -> list[nn.Module]:
    """The self-attention modules of the encoder, lowest layer first (ALBERT: its shared module(s))."""
    name = _attention_class_name(model)
    return [mod for mod in model.modules() if type(mod).__name__ == name]


def install(model: nn.Module, mechanism: str | MechanismConfig | dict = "sla", **options: Any) -> nn.Module:
    """Install a mechanism into ``model`` in place (replacing one installed before) and return the model.

    Every existing weight is kept; only gate parameters are created (on the model's device and dtype).
    Raises :class:`UserError` for an unsupported architecture, a decoder, or bad options.
    """
    mech = get_mechanism(mechanism, **options)
    config = model.config
    if getattr(config, "is_decoder", False) or getattr(config, "is_encoder_decoder", False):
        raise UserError("structattn installs into encoders only (this config has is_decoder/is_encoder_decoder set)")
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
    rt = _Runtime(mech, indices)
    param = next(model.parameters())
    init_std = mech.gate_init_std
    if init_std is None:
        init_std = float(getattr(config, "initializer_range", 0.02))
    for idx, module in enumerate(modules):
        layer = None if shared else idx
        module._structattn_rt = rt
        module._structattn_layer = layer
        active = not mech.is_global and (shared or idx in indices)
        if not active:
            continue
        gates = 1 if mech.gate == "token" else _num_heads(module, config)
        gate = StructureGate(_input_size(module), gates, bias=mech.gate_has_bias, init_bias=mech.gate_bias,
                             init_std=init_std, device=param.device, dtype=param.dtype)
        module.add_module(GATE_ATTR, gate)
        module.register_forward_pre_hook(_gate_pre_hook, with_kwargs=True)
    model._structattn_rt = rt
    model.register_forward_pre_hook(_model_pre_hook, with_kwargs=True)
    model.register_forward_hook(_model_post_hook, with_kwargs=True)
    config.structattn = {**mech.to_dict(), "layer_indices": indices}
    _set_implementation(model, ATTENTION_NAME)
    return model


def _set_implementation(model: nn.Module, name: str) -> None:
    try:
        model.set_attn_implementation(name)
    except Exception:  # noqa: BLE001 - some models refuse dynamic switching; set the config directly
        pass
    if model.config._attn_implementation != name:
        model.config._attn_implementation = name
    for module in model.modules():
        cfg = getattr(module, "config", None)
        if cfg is not None and cfg is not model.config and hasattr(cfg, "_attn_implementation"):
            if getattr(cfg, "_attn_implementation", None) != name:
                try:
                    cfg._attn_implementation = name
                except Exception:  # noqa: BLE001
                    pass


def uninstall(model: nn.Module) -> nn.Module:
    """Remove an installed mechanism: gates, hooks and settings; the stock attention (its base) comes back."""
    rt = runtime_of(model)
    if rt is None:
        return model
    for module in model.modules():
        if getattr(module, "_structattn_rt", None) is rt and module is not model:
            if hasattr(module, GATE_ATTR):
                delattr(module, GATE_ATTR)
            _remove_hooks(module, _gate_pre_hook)
            del module._structattn_rt
            if hasattr(module, "_structattn_layer"):
                del module._structattn_layer
    _remove_hooks(model, _model_pre_hook, _model_post_hook)
    del model._structattn_rt
    if hasattr(model.config, "structattn"):
        del model.config.structattn
    _set_implementation(model, rt.mechanism.base)
    return model


# ============================================================================================ analysis helpers


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


def gate_parameters(model: nn.Module) -> list[nn.Parameter]:
    """The parameters the mechanism added (for their own learning rate, or to count them)."""
    return [p for name, p in model.named_parameters() if f".{GATE_ATTR}." in f".{name}"]


register()
