"""The names structattn uses inside a transformers model: its attention implementation, the keyword its pre-hook
hands to the attention function, and the attributes of the submodules a mechanism adds to an attention module."""
from __future__ import annotations

ATTENTION_NAME = "structattn"
GATE_ATTR = "structattn_gate"
STRUCTURE_MASK_KW = "structure_mask"  # the model call's keyword for the [b, T, T] bool mask
HIDDEN_KW = "structattn_hidden"  # the layer's input hidden states, handed by its pre-hook to the attention function
CONCAT_ATTR = "structattn_concat"  # mix="concat": Linear(2 H -> H) over [global; local] outputs
GAUSSIAN_ATTR = "structattn_gaussian"  # mix="gaussian": GaussianLocality
#: Names of the submodules a mechanism adds to an attention module (their weights are the mechanism's).
MECHANISM_ATTRS = (GATE_ATTR, CONCAT_ATTR, GAUSSIAN_ATTR)
