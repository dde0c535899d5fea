"""Shared by the model tests: a two-sentence gold treebank, a tiny saved parser (no pretrained encoder) and the
skips for tests that need the default spaCy pipeline or the packaged MiniLM encoder."""
from __future__ import annotations

import pytest
import torch

from structattn.bna.model import ChartParser, ParserConfig
from structattn.errors import UserError
from structattn.dependency.spacy_backend import SpacyParser
from structattn.settings import DEFAULT_ENCODER_PACKAGE, DEFAULT_SPACY_MODEL, packaged_encoder_folder
from structattn.tasks.ptb import parse_trees

GOLD = """
(S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .))
(S (NP (PRP It)) (VP (VBD purred)) (. .))
"""


def _loads(load) -> bool:
    """Whether ``load()`` finds what it loads (a UserError says it is not installed)."""
    try:
        load()
        return True
    except UserError:
        return False


def has_minilm() -> bool:
    """Whether the default encoder's package (all-MiniLM-L6-v2) is installed."""
    return _loads(lambda: packaged_encoder_folder(DEFAULT_ENCODER_PACKAGE))


needs_pipeline = pytest.mark.skipif(not _loads(lambda: SpacyParser(DEFAULT_SPACY_MODEL)),
                                    reason=f"spaCy pipeline {DEFAULT_SPACY_MODEL} not installed")
needs_minilm = pytest.mark.skipif(not has_minilm(), reason=f"{DEFAULT_ENCODER_PACKAGE} is not installed")


def save_tiny(folder, **overrides) -> ChartParser:
    """Build a tiny untrained parser from GOLD, save it in ``folder`` and load it back."""
    torch.manual_seed(0)
    cfg = dict(encoder="none", d_model=16, heads=2, d_head=8, d_ff=32, label_hidden=16, char_dim=8, word_dim=8,
               num_layers=2, ngram=2)
    cfg.update(overrides)
    parser = ChartParser.build(ParserConfig(**cfg), parse_trees(GOLD))
    parser.save_pretrained(folder)
    return ChartParser.from_pretrained(folder)
