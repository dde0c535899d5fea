"""structattn: structure-aware attention (SLA, WLA, hybrid, SDOI) inside Hugging Face encoders.

    import structattn
    model = structattn.from_pretrained("bert-base-uncased", task="sequence-classification", mechanism="sla", m=3)

The heavy modules (torch, transformers) are imported on first use of these names.
"""
__version__ = "0.1.0"

_LAZY = {
    "from_pretrained": "structattn.modeling",
    "apply_mechanism": "structattn.modeling",
    "remove_mechanism": "structattn.modeling",
    "mechanism_of": "structattn.modeling",
    "MECHANISMS": "structattn.attention.mechanisms",
    "MechanismConfig": "structattn.attention.mechanisms",
    "Parse": "structattn.parsing.record",
    "UserError": "structattn.errors",
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'structattn' has no attribute {name!r}")
