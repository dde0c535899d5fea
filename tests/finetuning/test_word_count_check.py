"""The parser returned another number of words than it was given: the message says so, with the counts."""
from __future__ import annotations

import pytest

from structattn.dependency import Parse
from structattn.tasks.base import Example
from structattn.train.features import _check_word_counts


def chain(words):
    return [Parse(words, list(range(len(words))), ["dep"] * len(words), [""] * len(words))]


def test_mismatch_names_segment_and_counts_and_no_stale_cache_guess():
    ex = Example(words_a=["a", "b"], words_b=["c", "d", "e"], label=0, guid="dev-7")
    _check_word_counts([ex], [chain(["a", "b"])], [chain(["c", "d", "e"])])  # equal counts: fine
    with pytest.raises(RuntimeError) as info:
        _check_word_counts([ex], [chain(["a", "b"])], [chain(["c", "de"])])
    message = str(info.value)
    assert "dev-7" in message and "returned 2 words for the 3 words of the second segment" in message
    assert "stale" not in message and "pipeline" in message
