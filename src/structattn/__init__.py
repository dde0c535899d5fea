"""structattn: structure-aware attention (SLA, WLA, hybrid local/global, SG-Net SDOI, BNA) inside Hugging Face
encoders.

    import structattn
    model = structattn.from_pretrained("bert-base-uncased", task="sequence-classification", mechanism="sla", m=3)

The heavy modules (torch, transformers) are imported on first use of these names.

Layers, bottom to top. A module imports only from its own layer or a lower one, and no two modules import each
other, directly or around a loop (``tests/test_import_layers.py`` checks both with ``ast``):

 1. ``errors``, ``settings``, ``io``, ``config_io``, ``textcheck``, ``paths``, ``cli_grammar``, ``verbosity``:
    user errors, data and cache locations, atomic file writing, typed JSON configuration, the control-character
    check of every reader, the path checks made before work, the command line's shared grammar, quiet loading
    (anyone may use them).
 2. ``structure``: word-level relations (tree distance, ancestors, window, direction) and sub-word expansion.
 3. ``tasks``: readers for each benchmark and its official-equivalent metric (SQuAD, EVALB, BLEU, RACE, ...).
 4. ``parsing``: the Parse record; spaCy, CoNLL-U and PTB backends; the parse cache; PTB text normalisation.
 5. ``layers``: modules outside the encoder's own attention: the syntax-guided layer, BiMSA, NSA, Gaussian
    biases, LISA, the chart parser's word encoders.
 6. ``attention``: kernels (pure functions over q, k, v, masks), mechanisms and their registration in transformers.
 7. ``heads``: task heads and set-up: span QA, chart (CKY), translation tokenizer and batches.
 8. ``models``: the end-to-end models a user loads: encoder + mechanism (``models.encoder``), SG-Net
    (``models.sgnet``), the BNA chart parser (``models.parser``), the translation model and its translator, the
    shipped trained models by name (``models.trained``; their files are package data in ``trained/``).
 9. ``integrations``: other libraries' entry points (the spaCy component).
10. ``train``: the Accelerate loop, checkpoints, sweeps, significance; one module per family: sentence tasks
    (``loop``, ``data``), ``reading``, ``multiple_choice``, ``translation``, ``parsing``, ``probing``.
11. ``analysis``: reports, tables and figures per family.
12. ``commands`` and ``cli``: one module per command; ``cli`` dispatches.

Old module paths (``structattn.modeling``, ``structattn.chart_parser``, ...) still import, with a
:class:`~structattn._moved.ModuleMovedWarning` naming the new one (:data:`structattn._moved.MOVED`).
"""
__version__ = "0.1.0"

_LAZY = {
    "from_pretrained": "structattn.models.encoder",
    "apply_mechanism": "structattn.models.encoder",
    "remove_mechanism": "structattn.models.encoder",
    "mechanism_of": "structattn.models.encoder",
    "MECHANISMS": "structattn.attention.mechanisms",
    "MechanismConfig": "structattn.attention.mechanisms",
    "Parse": "structattn.parsing.record",
    "Reader": "structattn.train.reader",
    "UserError": "structattn.errors",
    "set_verbose": "structattn.verbosity",
}

__all__ = sorted(_LAZY)

from . import _moved  # noqa: E402  (old module paths: one import hook, see the docstring)

_moved.install()


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'structattn' has no attribute {name!r}")
