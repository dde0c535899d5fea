"""Dependency parses, the input of every structure mechanism: the [`Parse`][structattn.dependency.record.Parse] record
and its backends (spaCy, CoNLL-U, PTB dependencies), with a disk cache.

The spaCy backend is imported lazily (``from structattn.dependency.spacy_backend import SpacyParser``)
so that reading gold trees does not import spaCy.
"""
from .cache import ParseCache, parse_cached
from .conllu_backend import parse_conllu_string, read_conllu
from .ptb_dependency import read_ptb_dependency
from .record import Parse, ParseError, validate_tree

__all__ = ["Parse", "ParseError", "validate_tree", "ParseCache", "parse_cached",
           "read_conllu", "parse_conllu_string", "read_ptb_dependency", "SpacyParser"]


def __getattr__(name):  # lazy: spaCy takes a second to import
    if name == "SpacyParser":
        from .spacy_backend import SpacyParser

        return SpacyParser
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
