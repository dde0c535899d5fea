"""Structure-aware attention inside the encoder: kernels, mechanisms, gates and their transformers integration.

* :mod:`.kernels` — pure functions over q, k, v, masks and gates (reference, exact, shared exponential,
  fused native, FlexAttention, fused Triton), all with the same semantics and shapes.
* :mod:`.mechanisms` — :class:`MechanismConfig` and the registry :data:`MECHANISMS`
  (``sla``, ``wla``, ``hybrid``, ``sdoi``, ``global``).
* :mod:`.eager` — when the custom-op kernels (``fused``, ``triton``) skip their op in eager mode; dropout seeds.
* :mod:`.gate` — :class:`StructureGate`, g = sigmoid(W h + b).
* :mod:`.integration` — registration as transformers attention implementation ``"structattn"``,
  installation into a model, gate/attention recording; it re-exports the modules of one concern each that hold
  them (:mod:`.names`, :mod:`.stock`, :mod:`.runtime`, :mod:`.masks`, :mod:`.recording`, :mod:`.dispatch`,
  :mod:`.registration`, :mod:`.hooks`, :mod:`.install`).

The user-facing loaders are in :mod:`structattn.models.encoder` (``from_pretrained``, ``apply_mechanism``).
"""
from .gate import StructureGate
from .integration import (ARCHITECTURES, ATTENTION_NAME, REFUSED, GateRecord, attention_modules, force_gate,
                          gate_parameters, install, record, register, runtime_of, structattn_attention, uninstall)
from .kernels import (KERNELS, fused_available, fused_mixed_attention, local_pattern, mixed_attention,
                      reference_mixed_attention, shared_exp_mixed_attention, two_pass_mixed_attention)
from .mechanisms import MECHANISMS, MechanismConfig, get_mechanism

__all__ = ["ARCHITECTURES", "ATTENTION_NAME", "GateRecord", "KERNELS", "MECHANISMS", "MechanismConfig", "REFUSED",
           "StructureGate", "attention_modules", "force_gate", "fused_available", "fused_mixed_attention",
           "gate_parameters", "get_mechanism", "install", "local_pattern", "mixed_attention", "record",
           "reference_mixed_attention", "register", "runtime_of", "shared_exp_mixed_attention",
           "structattn_attention", "two_pass_mixed_attention", "uninstall"]
