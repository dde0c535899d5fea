"""Raw text to words with character offsets, for tasks that come as running text (SQuAD passages and
questions, RACE and MCTest stories).

Words are the tokens of spaCy's rule-based English tokenizer (``spacy.blank("en")``: no model, no
statistics, the same answer on every machine), whitespace tokens dropped. It splits punctuation and
clitics off words (``Normandy's`` -> ``Normandy`` ``'s``; ``(1066)`` -> ``(`` ``1066`` ``)``), so a SQuAD
answer usually starts and ends on a word boundary, and the parser sees the words it was trained on. Each
word keeps its ``[start, end)`` character span in the text, so a predicted span of words maps back to the
exact substring of the original text.
"""
from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def _tokenizer():
    import spacy

    return spacy.blank("en").tokenizer


def words_with_offsets(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """The words of ``text`` and their ``[start, end)`` character spans, in order.

    ``text[start:end] == word`` for every word; whitespace never belongs to a word; a text of only
    whitespace gives no words.
    """
    words, spans = [], []
    for token in _tokenizer()(text):
        if token.is_space or not token.text.strip():
            continue
        words.append(token.text)
        spans.append((token.idx, token.idx + len(token.text)))
    return words, spans


def words_of(text: str) -> list[str]:
    """Just the words of :func:`words_with_offsets`."""
    return words_with_offsets(text)[0]
