"""spaCy on the parser's side: PTB POS tags of given words, and raw text split into treebank-token sentences.

The pipeline is [`structattn.settings.DEFAULT_SPACY_MODEL`][structattn.settings.DEFAULT_SPACY_MODEL] unless named,
loaded once per process through `structattn.dependency.spacy_backend.SpacyParser` (the same loading rules as the
dependency parses).

* `spacy_tags` - fine-grained PTB tags (``token.tag_``) of pre-split sentences: the words are
  unescaped (``-LRB-`` -> ``(``), a ``Doc`` is built from them (spaCy's tokenizer never runs, so one tag per
  word) and only the tagging components run.
* `text_sentences` - raw texts -> sentences (the pipeline's sentence split and tokens): the tokens in
  treebank form (`treebank_words`) with their tags. Whitespace tokens are not words and are left out.
* `treebank_words` - one sentence's spaCy tokens as treebank tokens, the one rule shared by
  ``structattn parse`` and the spaCy component: brackets escaped (``(`` -> ``-LRB-``,
  `structattn.tasks.ptb.escape_word`), and a straight double quote ``"`` written as the treebank's
  opening `````` or closing ``''`` (the treebank has no ``"``): by its tag when the tagger says `````` or ``''``,
  and, for a token without a tag (no tagger ran), opening and closing in turn within the sentence.
"""
from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from ..settings import DEFAULT_SPACY_MODEL

# Components that tagging does not need (dropped for speed in spacy_tags).
_NOT_FOR_TAGS = ("parser", "senter", "ner")


@lru_cache(maxsize=4)
def load_pipeline(model: str = DEFAULT_SPACY_MODEL):
    """The loaded ``spacy.Language`` (tokenizer, tok2vec, tagger, attribute ruler, parser); UserError if missing."""
    from ..dependency.spacy_backend import SpacyParser

    return SpacyParser(model).nlp


def spacy_tags(word_lists: Sequence[Sequence[str]], model: str = DEFAULT_SPACY_MODEL,
               batch_size: int = 256) -> list[list[str]]:
    """PTB tags of every word: ``len(result[k]) == len(word_lists[k])``.

    Words are treebank tokens; empty sentences get ``[]``."""
    from spacy.tokens import Doc

    from ..dependency.spacy_backend import repair_word
    from ..tasks.ptb import unescape_word

    nlp = load_pipeline(model)
    skip = [name for name in nlp.pipe_names if name in _NOT_FOR_TAGS]
    docs = (Doc(nlp.vocab, words=[repair_word(unescape_word(w)) for w in words]) for words in word_lists if words)
    tagged = iter(nlp.pipe(docs, batch_size=batch_size, disable=skip))
    return [[t.tag_ for t in next(tagged)] if words else [] for words in word_lists]


def text_sentences(texts: Sequence[str], model: str = DEFAULT_SPACY_MODEL,
                   batch_size: int = 64) -> list[list[tuple[list[str], list[str]]]]:
    """Raw texts -> per text, its sentences as (treebank tokens, PTB tags); whitespace tokens left out.

    A text with no word (empty, whitespace only) gives ``[]``."""
    from ..dependency.spacy_backend import repair_text

    nlp = load_pipeline(model)
    out = []
    for doc in nlp.pipe((repair_text(t) for t in texts), batch_size=batch_size):
        sentences = []
        for sent in doc.sents:
            tokens = [t for t in sent if not t.is_space]
            if tokens:
                tags = [t.tag_ for t in tokens]
                sentences.append((treebank_words([t.text for t in tokens], tags), tags))
        out.append(sentences)
    return out


QUOTE_TAGS = ("``", "''")


def treebank_words(texts: Sequence[str], tags: Sequence[str]) -> list[str]:
    """One sentence's token texts [L] and tags [L] (``""`` = not tagged) -> its treebank tokens [L].

    Brackets are escaped; a straight ``"`` becomes its tag when that is `````` or ``''``; an untagged ``"``
    becomes `````` or ``''`` in turn (the first in the sentence opens). Any other token is only escaped.
    """
    from ..tasks.ptb import escape_word

    out, untagged_quotes = [], 0
    for text, tag in zip(texts, tags, strict=True):
        if text == '"' and tag in QUOTE_TAGS:
            out.append(tag)
        elif text == '"' and not tag:
            out.append(QUOTE_TAGS[untagged_quotes % 2])
            untagged_quotes += 1
        else:
            out.append(escape_word(text))
    return out
