"""The names of SG-Net's choices that a configuration or the command line gives, without torch: the command
line's help lists them without importing the layers. The registries they name (``layer.AGGREGATIONS``) are keyed
by them."""
from __future__ import annotations

#: How the SG-Net layer combines the encoder's output with its syntax-guided one (keys of ``layer.AGGREGATIONS``).
AGGREGATIONS = ("dual", "sg_only", "vanilla", "concat", "biattention")

#: How the SG layer's weights start: fresh, or a copy of the encoder's top layer.
INITS = ("fresh", "copy")

#: How a multiple-choice head pools an option's tokens.
POOLS = ("first", "mean", "option")

#: What a loaded checkpoint provides: the whole model, or the encoder only.
MODEL_PARTS = ("all", "encoder")
