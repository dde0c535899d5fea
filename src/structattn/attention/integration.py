"""Structure-aware attention inside Hugging Face encoders (transformers v5), without copying modeling files.

How it plugs in:

* `register` adds the attention function `structattn_attention` and a matching mask
  function under the name ``"structattn"`` (``transformers.AttentionInterface`` /
  ``AttentionMaskInterface``; without the mask registration the padding mask would be dropped).
* [`install`][structattn.attention.install.install] finds the self-attention modules of the encoder (`ARCHITECTURES`),
  gives each selected one a [`StructureGate`][structattn.attention.gate.StructureGate] submodule named
  ``structattn_gate`` (so its weights land in ``model.safetensors``) and a forward pre-hook that hands the module's
  input hidden states h [b, n, H] to the attention function (keyword ``structattn_hidden``), which computes the gate
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
manager [`record`][structattn.attention.recording.record] collects both for any forward call of the model or its
submodules.

Per-step work (docs/attention-performance.md): what every mechanism layer of one model call shares (the
structure mask in the kernels' format, the padding mask as bool, the check of the kernel's inputs, the dropout
seed) is made by the first layer that needs it and reused by the others
(`Step`); each layer adds only its gate and its kernel call.

This module is the public face; the parts live in modules of one concern each, lowest first (each imports only
those above it in this list):

* `names` — the implementation name, the pre-hook's keyword and the attributes a mechanism adds;
* `stock` — the base a config names and its stock attention function;
* [`runtime`][structattn.attention.runtime] — the per-model state (``Runtime``), the per-step cache (``Step``),
  [`GateRecord`][structattn.attention.runtime.GateRecord], [`runtime_of`][structattn.attention.runtime.runtime_of];
* `masks` — padding and local masks, made once per step;
* [`recording`][structattn.attention.recording] — gate recording per layer call,
  [`record`][structattn.attention.recording.record], [`force_gate`][structattn.attention.recording.force_gate];
* `dispatch` — the attention function `structattn_attention` and the dispatch to the kernels;
* `registration` — `register` and the mask function `structattn_mask`;
* `hooks` — the forward hooks of mechanism layers and of the model;
* [`install`][structattn.attention.install] — [`install`][structattn.attention.install.install],
  [`uninstall`][structattn.attention.install.uninstall], where the attention modules of an architecture are, and which
  parameters are the mechanism's.
"""
from __future__ import annotations

from .dispatch import structattn_attention
from .install import (ARCHITECTURES, REFUSED, SEQ2SEQ_ARCHITECTURES, attention_modules, gate_parameters, install,
                      is_mechanism_parameter, uninstall)
from .names import ATTENTION_NAME, CONCAT_ATTR, GATE_ATTR, GAUSSIAN_ATTR, HIDDEN_KW, MECHANISM_ATTRS
from .recording import force_gate, record
from .registration import register, structattn_mask
from .runtime import WINDOW_CACHE_SIZE, GateRecord, runtime_of

__all__ = ["ARCHITECTURES", "ATTENTION_NAME", "CONCAT_ATTR", "GATE_ATTR", "GAUSSIAN_ATTR", "GateRecord", "HIDDEN_KW",
           "MECHANISM_ATTRS", "REFUSED", "SEQ2SEQ_ARCHITECTURES", "WINDOW_CACHE_SIZE", "attention_modules",
           "force_gate", "gate_parameters", "install", "is_mechanism_parameter", "record", "register", "runtime_of",
           "structattn_attention", "structattn_mask", "uninstall"]
