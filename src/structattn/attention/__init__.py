"""Structure-aware attention inside the encoder: kernels, mechanisms, gates and their transformers integration.

* [`kernels`][structattn.attention.kernels] — pure functions over q, k, v, masks and gates (reference, exact, shared
  exponential, fused native, FlexAttention, fused Triton), all with the same semantics and shapes.
* [`mechanisms`][structattn.attention.mechanisms] — [`MechanismConfig`][structattn.attention.mechanisms.MechanismConfig]
  and the registry `MECHANISMS` of named mechanisms (``sorted(MECHANISMS)`` lists them).
* `eager` — when the custom-op kernels (``fused``, ``triton``) skip their op in eager mode; dropout seeds.
* [`gate`][structattn.attention.gate] — [`StructureGate`][structattn.attention.gate.StructureGate], g = sigmoid(W h +
  b).
* `integration` — registration as transformers attention implementation ``"structattn"``,
  installation into a model, gate/attention recording; it re-exports the modules of one concern each that hold
  them (`names`, `stock`, [`runtime`][structattn.attention.runtime], `masks`,
  [`recording`][structattn.attention.recording], `dispatch`, `registration`, `hooks`,
  [`install`][structattn.attention.install]).

The user-facing loaders are in [`structattn.models.encoder`][structattn.models.encoder] (``from_pretrained``,
``apply_mechanism``).
"""
# Imported on first use of a name: the integration imports transformers, which the plain modules here
# (``multihead``, ``gaussian``, ``kernels``) and the command line's start-up must not pay for.
_LAZY = {
    "StructureGate": "gate",
    **{name: "integration" for name in ("ARCHITECTURES", "ATTENTION_NAME", "REFUSED", "GateRecord",
                                        "attention_modules", "force_gate", "gate_parameters", "install", "record",
                                        "register", "runtime_of", "structattn_attention", "uninstall")},
    **{name: "kernels" for name in ("KERNELS", "fused_available", "fused_mixed_attention", "local_pattern",
                                    "mixed_attention", "reference_mixed_attention", "shared_exp_mixed_attention",
                                    "two_pass_mixed_attention")},
    **{name: "mechanisms" for name in ("MECHANISMS", "MechanismConfig", "get_mechanism")},
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
