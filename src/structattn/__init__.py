"""structattn: structure-aware attention (SLA, WLA, hybrid local/global, SG-Net SDOI, BNA) inside Hugging Face
encoders.

    import structattn
    model = structattn.from_pretrained("bert-base-uncased", task="sequence-classification", mechanism="sla", m=3)

The heavy modules (torch, transformers) are imported on first use of these names.

One folder per system over a shared core. A module imports only from its own layer or a lower one, a system only
from the core and the systems it builds on, and no two modules import each other, directly or around a loop
(``tests/test_import_layers.py`` checks all three with ``ast``).

The core, bottom to top:

 1. ``errors``, ``settings``, ``io``, ``config_io``, ``textcheck``, ``paths``, ``cli_grammar``, ``verbosity``,
    ``stopping``, ``integrity``: user errors, data and cache locations, atomic file writing, typed JSON
    configuration, the control-character check of every reader, the path checks made before work, the command
    line's shared grammar, quiet loading, SIGINT/SIGTERM outside writes, damaged-file checks (anyone may use
    them).
 2. ``structure``: word-level relations (tree distance, ancestors, window, direction) and sub-word expansion.
 3. ``tasks``: readers for each benchmark and its official-equivalent metric (SQuAD, EVALB, BLEU, RACE, ...).
 4. ``dependency``: the Parse record; spaCy, CoNLL-U and PTB dependency backends; the parse cache.
 5. ``attention``: kernels (pure functions over q, k, v, masks), mechanisms (with the Gaussian biases), their
    registration in transformers, and a plain multi-head attention module.
 6. ``models``: an encoder with a mechanism (``models.encoder``), encoders by reference, int8 packing, the
    shipped trained models by name (``models.trained``; their files are package data in ``trained/``), the one
    refusal of a folder an earlier structattn wrote (``models.saved_version``).
 7. ``train``: the training engine (the ``Family`` interface), checkpoints, configuration, provenance,
    significance; the encoder families' shared base (``train.encoder_family``: inference apart from training),
    the sentence and token tasks' features (``train.features``) and forked feature building (``train.forking``).

The systems, each in one folder:

 8. ``finetuning`` (SLA, WLA, LISA: sentence and token tasks), ``translation`` (hybrid local/global attention),
    ``bna`` (the BNA constituency parser), ``sgnet`` (SG-Net: reading, multiple choice and sentence tasks); each
    builds on the core only.

Above them:

 9. ``run_config`` (a fine-tuning run's options: the core's and every system's), ``trainers`` (which trainer
    runs a task) and ``sweep`` (grids of fine-tuning runs).
10. ``analysis``: mask views, the sentence tasks' report tables and figures.
11. ``commands`` and ``cli``: one module per command; ``cli`` dispatches.
"""
__version__ = "0.3.0"

_LAZY = {
    "from_pretrained": "structattn.models.encoder",
    "apply_mechanism": "structattn.models.encoder",
    "remove_mechanism": "structattn.models.encoder",
    "mechanism_of": "structattn.models.encoder",
    "MECHANISMS": "structattn.attention.mechanisms",
    "MechanismConfig": "structattn.attention.mechanisms",
    "Parse": "structattn.dependency.record",
    "RunConfig": "structattn.run_config",
    "Reader": "structattn.sgnet.reader",
    "Parser": "structattn.bna.parser",
    "Translator": "structattn.translation.translator",
    "StructureProcessor": "structattn.models.processor",
    "StructureDataCollator": "structattn.models.data_collator",
    "UserError": "structattn.errors",
    "set_verbose": "structattn.verbosity",
}

__all__ = sorted(_LAZY)

from .models import auto as _auto  # noqa: E402  (AutoConfig / AutoModel* load saved structure-aware models)

_auto.install_import_hook()


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'structattn' has no attribute {name!r}")
