"""Words with character offsets, and their on-disk cache: the cache gives exactly what spaCy's tokenizer gives,
reads back without spaCy, ignores shards of another spaCy version or that fail to load, and says what to do when a
text is missing and spaCy is not installed."""
from __future__ import annotations

import logging

import numpy as np
import pytest

from structattn.errors import UserError
from structattn.tasks import text_words as TW

TEXTS = ["The Normans (Norman: Nourmands) gave their name to Normandy's region.", "  ", "Who was Rollo?",
         "Who was Rollo?", "c.1066 -- \"quoted\" words,and  spaces\n\nnew line"]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STRUCTATTN_CACHE", str(tmp_path))
    monkeypatch.setitem(TW._LOADED, "key", None)   # nothing loaded from an earlier test's folder
    return tmp_path / TW.CACHE_SUBDIR


def test_words_and_spans_cover_the_text():
    words, spans = TW.words_with_offsets(TEXTS[0])
    text = TEXTS[0]
    assert words[:3] == ["The", "Normans", "("] and "'s" in words
    assert all(text[s:e] == w for w, (s, e) in zip(words, spans))
    assert TW.words_with_offsets("   \n ") == ([], [])


def test_cache_gives_what_spacy_gives_and_reads_back_without_it(cache, monkeypatch):
    want = [TW.words_with_offsets(t) for t in TEXTS]
    assert TW.words_with_offsets_many(TEXTS) == want
    assert len(list(cache.glob("*.npz"))) == 1                      # the misses, once, in one shard
    monkeypatch.setitem(TW._LOADED, "key", None)                   # as a new process would
    monkeypatch.setattr(TW, "_tokenize", lambda text: pytest.fail("a cached text was tokenised again"))
    assert TW.words_with_offsets_many(list(reversed(TEXTS))) == list(reversed(want))
    monkeypatch.setattr(TW, "_spacy_version", lambda: None)       # a machine without spaCy reads every shard
    monkeypatch.setitem(TW._LOADED, "key", None)
    assert TW.words_with_offsets_many(TEXTS[:1]) == want[:1]
    assert len(list(cache.glob("*.npz"))) == 1


def test_new_texts_add_a_shard_and_old_ones_are_not_tokenised_again(cache, monkeypatch):
    TW.words_with_offsets_many(TEXTS[:2])
    seen = []
    real = TW._tokenize
    monkeypatch.setattr(TW, "_tokenize", lambda text: seen.append(text) or real(text))
    TW.words_with_offsets_many(TEXTS)
    assert sorted(seen) == sorted(set(TEXTS[2:]))
    assert len(list(cache.glob("*.npz"))) == 2


def test_shards_of_another_spacy_version_or_broken_are_not_used(cache, monkeypatch, caplog):
    TW.words_with_offsets_many(TEXTS[:1])
    monkeypatch.setattr(TW, "_spacy_version", lambda: "0.0.0-other")
    monkeypatch.setitem(TW._LOADED, "key", None)
    seen = []
    real = TW._tokenize
    monkeypatch.setattr(TW, "_tokenize", lambda text: seen.append(text) or real(text))
    TW.words_with_offsets_many(TEXTS[:1])
    assert seen == TEXTS[:1]
    (cache / "broken.npz").write_bytes(b"not a zip file")
    monkeypatch.setitem(TW._LOADED, "key", None)
    with caplog.at_level(logging.WARNING):
        assert TW.words_with_offsets_many(TEXTS[:1]) == [TW.words_with_offsets(TEXTS[0])]
    assert "ignoring" in caplog.text and "broken.npz" in caplog.text


def test_missing_text_without_spacy_says_what_to_do(cache, monkeypatch):
    monkeypatch.setattr(TW, "_spacy_version", lambda: None)
    with pytest.raises(UserError, match="1 of 1 texts are not in the word cache .* spaCy is not installed"):
        TW.words_with_offsets_many(["never seen"])


def test_shard_layout(cache):
    TW.words_with_offsets_many(TEXTS)
    (path,) = cache.glob("*.npz")
    with np.load(path, allow_pickle=False) as shard:
        assert shard["keys"].shape == (4, 16) and shard["counts"].sum() == len(shard["spans"])
        assert str(shard["spacy_version"]) == TW._spacy_version()
