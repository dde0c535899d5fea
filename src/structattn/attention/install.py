"""Installing a mechanism into a model and removing it: where an architecture's self-attention modules are
(`ARCHITECTURES`, `SEQ2SEQ_ARCHITECTURES`, `REFUSED`), the submodules a mechanism adds to them
(gate, concat projection, Gaussian bias) and their hooks, and which parameters are the mechanism's."""
from __future__ import annotations

import inspect
import types
import warnings
from typing import Any

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
from .gate import StructureGate
from .gaussian import GaussianLocality
from .hooks import gate_pre_hook, model_post_hook, model_pre_hook, remove_hooks
from .mechanisms import MechanismConfig, get_mechanism
from .names import ATTENTION_NAME, CONCAT_ATTR, GATE_ATTR, GAUSSIAN_ATTR, MECHANISM_ATTRS, STRUCTURE_MASK_KW
from .registration import register
from .runtime import Runtime, runtime_of

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

#: model_type -> why structure-aware attention cannot be installed.
REFUSED: dict[str, str] = {
    "deberta": "DeBERTa computes disentangled (relative-position) attention itself",
    "deberta-v2": "DeBERTa-v2/v3 computes disentangled (relative-position) attention itself",
    "mpnet": "MPNet adds a relative-position bias inside its own attention code",
    "xlnet": "XLNet uses two-stream relative attention written inside the model",
}


def _attention_class(model: nn.Module) -> type[nn.Module]:
    """The self-attention module class of ``model``: from `ARCHITECTURES`, or (with a warning) the class
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
    Raises [`UserError`][structattn.errors.UserError] for an unsupported architecture, a decoder, or bad options.
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
    rt = Runtime(mech, [m for m in model.modules() if hasattr(m, "gradient_checkpointing")])
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
            module.register_forward_pre_hook(gate_pre_hook, with_kwargs=True)
    model._structattn_rt = rt
    model.register_forward_pre_hook(model_pre_hook, with_kwargs=True)
    model.register_forward_hook(model_post_hook, with_kwargs=True)
    config.structattn = {**mech.to_dict(), "layer_indices": indices}
    _set_implementation(model, ATTENTION_NAME)
    _advertise_structure_mask(model)
    return model


def _advertise_structure_mask(model: nn.Module) -> None:
    """Give the model an own ``forward`` whose signature lists ``structure_mask`` (it calls the class's forward,
    where the mask travels in ``**kwargs``): tools that keep only the inputs a forward names (``Trainer``'s
    ``remove_unused_columns``, which is on by default) then keep the mask."""
    class_forward = type(model).forward
    signature = inspect.signature(class_forward)
    if STRUCTURE_MASK_KW in signature.parameters:
        return
    params = list(signature.parameters.values())
    at = next((i for i, p in enumerate(params) if p.kind is inspect.Parameter.VAR_KEYWORD), len(params))
    params.insert(at, inspect.Parameter(STRUCTURE_MASK_KW, inspect.Parameter.KEYWORD_ONLY, default=None))

    def forward(self, *args, **kwargs):
        return class_forward(self, *args, **kwargs)

    forward.__signature__ = signature.replace(parameters=params)
    forward.__doc__ = class_forward.__doc__
    forward._structattn_forward = True
    model.forward = types.MethodType(forward, model)


def _withdraw_structure_mask(model: nn.Module) -> None:
    if getattr(model.__dict__.get("forward"), "_structattn_forward", False):
        del model.forward


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
            remove_hooks(module, gate_pre_hook)
            del module._structattn_rt
            for attr in ("_structattn_layer", "_structattn_active"):
                if hasattr(module, attr):
                    delattr(module, attr)
    remove_hooks(model, model_pre_hook, model_post_hook)
    _withdraw_structure_mask(model)
    del model._structattn_rt
    if hasattr(model.config, "structattn"):
        del model.config.structattn
    _set_implementation(model, rt.mechanism.base)
    return model


def is_mechanism_parameter(name: str) -> bool:
    """True for a parameter (or saved key) that belongs to a mechanism's own module (gate, concat projection,
    Gaussian bias)."""
    return any(f".{attr}." in f".{name}" for attr in MECHANISM_ATTRS)


def gate_parameters(model: nn.Module) -> list[nn.Parameter]:
    """The parameters the mechanism added: gates, concat projections, Gaussian biases (for their own learning
    rate, or to count them)."""
    return [p for name, p in model.named_parameters() if is_mechanism_parameter(name)]
