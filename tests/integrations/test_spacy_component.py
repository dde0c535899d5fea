"""The ``structattn_parser`` spaCy component with a tiny saved parser (no pretrained encoder) and the real
default pipeline (skipped when it is not installed)."""
from __future__ import annotations

import pytest
import torch

import structattn.integrations.spacy_component  # noqa: F401  (registers the factory)
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
from tiny_parser import needs_pipeline, save_tiny  # noqa: E402

from structattn.models.parser import ChartParser  # noqa: E402
from structattn.errors import UserError  # noqa: E402
from structattn.settings import DEFAULT_SPACY_MODEL  # noqa: E402
from structattn.tasks.ptb import parse_trees  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("parser")
    save_tiny(folder)
    return folder


def tokens_of(parse_string: str) -> list[str]:
    return [t.word for t in parse_trees(parse_string)[0].preterminals()]


@needs_pipeline
def test_component_parses_every_sentence(model_dir):
    import spacy

    nlp = spacy.load(DEFAULT_SPACY_MODEL)
    nlp.add_pipe("structattn_parser", config={"model": str(model_dir)})
    doc = nlp("The cat (a tabby) sat on the mat. It purred.")
    sents = list(doc.sents)
    assert len(sents) == 2
    assert doc._.parse_strings == [s._.parse_string for s in sents]
    first = parse_trees(sents[0]._.parse_string)[0]
    assert first.leaves() == ["The", "cat", "-LRB-", "a", "tabby", "-RRB-", "sat", "on", "the", "mat", "."]
    assert first.tags() == [t.tag_ for t in sents[0]]  # the pipeline's tagger ran before the component
    # the same through nlp.pipe (the component's batched path) and with the parser called directly
    piped = list(nlp.pipe(["The cat (a tabby) sat on the mat. It purred.", "Hi ."], batch_size=2))
    assert piped[0]._.parse_strings == doc._.parse_strings
    direct = ChartParser.from_pretrained(model_dir).parse(
        [first.leaves()], [first.tags()])[0].to_string()
    assert direct == sents[0]._.parse_string


def test_doc_without_tagger_or_sentences(model_dir):
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("structattn_parser", config={"model": str(model_dir)})
    doc = nlp("The cat sat .  ")
    assert len(doc._.parse_strings) == 1  # no sentence boundaries: the doc is one sentence
    tree = parse_trees(doc._.parse_strings[0])[0]
    assert tree.leaves() == ["The", "cat", "sat", "."]  # the trailing whitespace token is not a word
    assert tree.tags() == ["XX"] * 4
    assert doc[:]._.parse_string == doc._.parse_strings[0]
    assert nlp("   ")._.parse_strings == [""]


def test_missing_model_and_long_sentence(tmp_path):
    import spacy

    with pytest.raises(UserError, match="needs a saved parser folder"):
        spacy.blank("en").add_pipe("structattn_parser")
    folder = tmp_path / "short"
    save_tiny(folder, max_words=3)
    nlp = spacy.blank("en")
    nlp.add_pipe("structattn_parser", config={"model": str(folder)})
    with pytest.raises(UserError, match="sentence 'a b c d': 4 words, more than the parser's max_words=3"):
        nlp("a b c d")
