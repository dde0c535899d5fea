"""``treebank_words``: the one rule that turns spaCy tokens into treebank tokens for ``structattn parse`` and the
spaCy component (brackets escaped, straight quotes by tag or in turn)."""
from __future__ import annotations

import pytest

from structattn.bna.ptb_text import treebank_words


def test_quotes_follow_their_tags_and_brackets_are_escaped():
    texts = ['"', "Hi", "(", "there", ")", '"', "a/b"]
    tags = ["``", "UH", "-LRB-", "RB", "-RRB-", "''", "NN"]
    assert treebank_words(texts, tags) == ["``", "Hi", "-LRB-", "there", "-RRB-", "''", "a\\/b"]


def test_untagged_quotes_open_then_close():
    assert treebank_words(['"', "a", '"', "b", '"'], ["", "", "", "", ""]) == ["``", "a", "''", "b", "``"]


def test_a_quote_with_another_tag_is_left_alone():
    assert treebank_words(['"', "x"], ["NFP", "NN"]) == ['"', "x"]  # neither an opening nor a closing quote


def test_lengths_must_match():
    with pytest.raises(ValueError):
        treebank_words(["a", "b"], ["DT"])
