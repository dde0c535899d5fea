"""The ``structattn_parser`` spaCy component with a tiny saved parser (no pretrained encoder) and the real
default pipeline (skipped when it is not installed)."""
from __future__ import annotations

import pytest
import torch

import structattn.bna.spacy_component  # noqa: F401  (registers the factory)
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tiny_parser import needs_pipeline, save_tiny  # noqa: E402

from structattn.bna.model import ChartParser  # noqa: E402
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

    with pytest.raises(UserError, match="needs a shipped parser.s name or a saved parser folder"):
        spacy.blank("en").add_pipe("structattn_parser")
    folder = tmp_path / "short"
    save_tiny(folder, max_words=3)
    nlp = spacy.blank("en")
    nlp.add_pipe("structattn_parser", config={"model": str(folder)})
    with pytest.raises(UserError, match="sentence 'a b c d': 4 words, more than the parser's max_words=3"):
        nlp("a b c d")


def _component_nlp(folder, sentencizer: bool = False):
    import spacy

    nlp = spacy.blank("en")
    if sentencizer:
        nlp.add_pipe("sentencizer")
    nlp.add_pipe("structattn_parser", config={"model": str(folder)})
    return nlp


def test_pipe_leaves_an_over_long_doc_unparsed_and_parses_the_others(tmp_path):
    folder = tmp_path / "short"
    save_tiny(folder, max_words=3)
    nlp = _component_nlp(folder, sentencizer=True)
    texts = ["a b .", "c a . a b c d e .", "b c ."]  # the middle doc's second sentence has 6 words
    expected = [nlp(texts[0])._.parse_strings, None, nlp(texts[2])._.parse_strings]
    with pytest.warns(UserWarning, match=r"doc 'c a \. a b c d e \.' left unparsed \(sentence 'a b c d e \.': "
                                         r"6 words, more than the parser's max_words=3; split the sentence\)"):
        docs = list(nlp.pipe(texts, batch_size=3))  # one batch: the bad doc used to abort all three
    assert [d._.parse_strings for d in docs] == expected
    assert expected[0] and expected[2] and all(isinstance(s, str) and s for s in expected[0] + expected[2])
    bad = docs[1]
    assert [s._.parse_string for s in bad.sents] == [None, None]  # no half-parsed doc
    assert "6 words, more than the parser's max_words=3" in bad._.parse_error
    assert docs[0]._.parse_error is None and docs[2]._.parse_error is None
    component = nlp.get_pipe("structattn_parser")
    assert component.skipped_docs == 1
    with pytest.warns(UserWarning, match="2 doc\\(s\\) skipped so far"):
        again = list(nlp.pipe(["a b c d", "a b"], batch_size=1))  # across batches too
    assert again[0]._.parse_strings is None and again[1]._.parse_strings == nlp("a b")._.parse_strings
    assert component.skipped_docs == 2
    with pytest.raises(UserError, match="6 words"):  # a single doc still raises (nothing else to save)
        nlp("a b c d e .")


def test_untagged_straight_quotes_open_and_close_in_turn(model_dir):
    nlp = _component_nlp(model_dir)
    tree = parse_trees(nlp('He said " hi " and " bye "')._.parse_strings[0])[0]
    assert tree.leaves() == ["He", "said", "``", "hi", "''", "and", "``", "bye", "''"]


@needs_pipeline
def test_straight_quotes_are_written_as_structattn_parse_writes_them(model_dir):
    """The component and ``structattn parse`` (text_sentences) give the same treebank tokens for ``"``."""
    import spacy

    from structattn.bna.ptb_text import text_sentences

    text = 'She said "yes (twice)" to me.'
    nlp = spacy.load(DEFAULT_SPACY_MODEL)
    nlp.add_pipe("structattn_parser", config={"model": str(model_dir)})
    leaves = parse_trees(nlp(text)._.parse_strings[0])[0].leaves()
    words, _ = text_sentences([text], DEFAULT_SPACY_MODEL)[0][0]
    assert leaves == words
    assert '"' not in leaves and "``" in leaves and "''" in leaves


@needs_pipeline
def test_model_by_name():
    """model= takes a shipped parser's name (structattn models)."""
    import spacy

    nlp = spacy.load(DEFAULT_SPACY_MODEL)
    nlp.add_pipe("structattn_parser", config={"model": "bna-scratch"})
    doc = nlp("The cat sat on the mat. It purred.")
    assert len(doc._.parse_strings) == 2
    direct = ChartParser.from_pretrained("bna-scratch")
    for sent, string in zip(doc.sents, doc._.parse_strings):
        words = [t.text for t in sent]
        tags = [t.tag_ for t in sent]
        assert string == direct.parse([words], [tags])[0].to_string()
