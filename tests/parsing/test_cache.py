"""Parse cache: hits, sharding, corrupt/truncated/stale shards rebuilt with a warning, atomic writes."""
from __future__ import annotations

import json
import logging

import pytest

from structattn.parsing import Parse, ParseCache, parse_cached
from structattn.parsing import cache as cache_mod
from structattn.parsing.cache import write_atomic

FP = "fake-parser v1"


class FakeParser:
    """Chain trees (word k's head is word k-1); counts the items it parses; can fail at an item."""

    def __init__(self, fail_at: int | None = None, fingerprint: str = FP):
        self.calls: list[list[int]] = []
        self.fail_at = fail_at
        self._fp = fingerprint

    def __call__(self, items, indices):
        self.calls.append(list(indices))
        for item, index in zip(items, indices):
            if index == self.fail_at:
                raise RuntimeError(f"boom at {index}")
            words = item.split() if isinstance(item, str) else list(item)
            yield [Parse(words, list(range(len(words))), ["root"] + ["dep"] * (len(words) - 1),
                         ["X"] * len(words), str(index))]

    # the parser protocol used by parse_cached
    def fingerprint(self):
        return self._fp

    def iter_words(self, items, indices=None, progress=None):
        return self(items, indices if indices is not None else range(len(items)))

    iter_texts = iter_words

    @property
    def parsed(self) -> list[int]:
        return [i for call in self.calls for i in call]


ITEMS = [[f"w{i}", "and", "😀", "東京"][: 1 + i % 4] for i in range(10)]


def shard_files(cache: ParseCache, items=ITEMS, fp=FP, kind="words"):
    return sorted(cache.folder(cache.key(items, fp, kind)).glob("*.parses.jsonl"))


def all_files(cache: ParseCache):
    return sorted(p for p in cache.directory.rglob("*") if p.is_file())


@pytest.fixture
def cache(tmp_path):
    return ParseCache(tmp_path / "cache", shard_size=4)


def test_miss_then_hit(cache):
    parser = FakeParser()
    first = cache.get_or_parse(ITEMS, parser, FP, "words")
    assert parser.parsed == list(range(10))
    assert cache.last_stats.misses == 3 and cache.last_stats.hits == 0
    assert len(shard_files(cache)) == 3  # 10 items / 4 per shard

    again = FakeParser()
    second = cache.get_or_parse(ITEMS, again, FP, "words")
    assert again.calls == [] and second == first
    assert cache.last_stats.hits == 3 and cache.last_stats.parsed_items == 0
    assert second[9][0].words == tuple(ITEMS[9]) and second[9][0].sent_id == "9"


def test_key_depends_on_content_fingerprint_and_kind(cache):
    changed = [list(x) for x in ITEMS]
    changed[5][0] = "other"
    keys = {cache.key(ITEMS, FP, "words"), cache.key(changed, FP, "words"),
            cache.key(ITEMS, "fake-parser v2", "words"), cache.key(ITEMS, FP, "texts"),
            cache.key(ITEMS, FP, "words", options={"m": 3})}
    assert len(keys) == 5


def test_new_fingerprint_parses_again(cache):
    cache.get_or_parse(ITEMS, FakeParser(), FP, "words")
    parser = FakeParser()
    cache.get_or_parse(ITEMS, parser, "fake-parser v2", "words")
    assert parser.parsed == list(range(10))


def _flip_byte(path, offset_from_end=20):
    data = bytearray(path.read_bytes())
    data[-offset_from_end] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage, reason", [
    (lambda p: _flip_byte(p), "checksum"),
    (lambda p: p.write_bytes(p.read_bytes()[:-15]), "checksum"),  # payload cut short
    (lambda p: p.write_bytes(p.read_bytes()[:30]), "header"),  # cut inside the header line
    (lambda p: p.write_bytes(b""), "truncated"),
    (lambda p: p.write_bytes(b"\x00\xff garbage\n" + p.read_bytes()), "header"),
])
def test_corrupt_shard_is_rebuilt_with_a_warning(cache, caplog, damage, reason):
    first = cache.get_or_parse(ITEMS, FakeParser(), FP, "words")
    middle = shard_files(cache)[1]
    damage(middle)
    parser = FakeParser()
    with caplog.at_level(logging.WARNING, logger="structattn.parsing.cache"):
        again = cache.get_or_parse(ITEMS, parser, FP, "words")
    assert again == first
    assert parser.parsed == [4, 5, 6, 7]  # only the damaged shard
    assert cache.last_stats.rebuilt == 1 and cache.last_stats.hits == 2
    assert any(middle.name in r.getMessage() and reason in r.getMessage() for r in caplog.records)
    # and it was rewritten: a third run is all hits
    cache.get_or_parse(ITEMS, FakeParser(), FP, "words")
    assert cache.last_stats.hits == 3


def _rewrite_header(path, **changes):
    header_line, payload = path.read_bytes().split(b"\n", 1)
    header = json.loads(header_line)
    header.update(changes)
    path.write_bytes(json.dumps(header).encode() + b"\n" + payload)


@pytest.mark.parametrize("changes, reason", [
    ({"fingerprint": "fake-parser v0"}, "stale"),
    ({"version": 0}, "stale"),
    ({"count": 3}, "count"),
    ({"items_sha256": "0" * 64}, "items_sha256"),
])
def test_stale_header_is_rebuilt(cache, caplog, changes, reason):
    cache.get_or_parse(ITEMS, FakeParser(), FP, "words")
    first_shard = shard_files(cache)[0]
    _rewrite_header(first_shard, **changes)  # checksum still matches: only the header is wrong
    parser = FakeParser()
    with caplog.at_level(logging.WARNING, logger="structattn.parsing.cache"):
        cache.get_or_parse(ITEMS, parser, FP, "words")
    assert parser.parsed == [0, 1, 2, 3]
    assert any(reason in r.getMessage() for r in caplog.records)


def test_missing_shard_is_parsed(cache):
    cache.get_or_parse(ITEMS, FakeParser(), FP, "words")
    shard_files(cache)[2].unlink()
    parser = FakeParser()
    cache.get_or_parse(ITEMS, parser, FP, "words")
    assert parser.parsed == [8, 9] and cache.last_stats.misses == 1


def test_write_atomic_leaves_nothing_on_error(tmp_path):
    target = tmp_path / "out" / "file.jsonl"

    def chunks():
        yield b"partial data\n"
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        write_atomic(target, chunks())
    assert list((tmp_path / "out").iterdir()) == []

    write_atomic(target, [b"old\n"])
    with pytest.raises(RuntimeError):
        write_atomic(target, chunks())
    assert target.read_bytes() == b"old\n"  # the old file survives a failed rewrite
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["file.jsonl"]


def test_crash_mid_parse_keeps_complete_shards_and_resumes(cache):
    with pytest.raises(RuntimeError, match="boom at 9"):
        cache.get_or_parse(ITEMS, FakeParser(fail_at=9), FP, "words")
    files = all_files(cache)
    assert [p.name for p in files] == ["00000.parses.jsonl", "00001.parses.jsonl"]  # no temp file, no shard 2
    parser = FakeParser()
    cache.get_or_parse(ITEMS, parser, FP, "words")
    assert parser.parsed == [8, 9] and cache.last_stats.hits == 2


def test_unwritable_cache_still_returns_results(cache, monkeypatch, caplog):
    def fail(*args, **kwargs):
        raise OSError("read-only file system")

    monkeypatch.setattr(cache_mod, "write_atomic", fail)
    with caplog.at_level(logging.WARNING, logger="structattn.parsing.cache"):
        out = cache.get_or_parse(ITEMS, FakeParser(), FP, "words")
    assert len(out) == 10 and cache.last_stats.write_errors == 3
    assert "could not write" in caplog.text


def test_payload_round_trip_keeps_everything():
    passages = [[Parse(["a", "b"], [2, 0], ["det", "root"], ["DET", "NOUN"], "0.1"),
                 Parse(["\ufffd", "🍕"], [0, 1], ["root", ""], ["X", ""], "0.2")],
                [Parse(["x"], [0], [""], [""], "1")]]
    payload = cache_mod.encode_payload(passages)
    assert cache_mod.decode_payload(payload, 2) == passages
    assert [p.sent_id for p in cache_mod.decode_payload(payload, 2)[0]] == ["0.1", "0.2"]


def test_parse_cached_protocol_and_progress(tmp_path):
    cache = ParseCache(tmp_path, shard_size=3)
    parser = FakeParser()
    done = []
    out = parse_cached(["a b", "c", "d e f", "g"], parser, cache=cache, progress=done.append)
    assert [p[0].words for p in out] == [("a", "b"), ("c",), ("d", "e", "f"), ("g",)]
    assert sum(done) == 4
    done.clear()
    parse_cached(["a b", "c", "d e f", "g"], FakeParser(), cache=cache, progress=done.append)
    assert sum(done) == 4 and cache.last_stats.hits == 2


def test_parse_cached_rejects_bad_items_before_parsing(tmp_path):
    from structattn.parsing import ParseError

    parser = FakeParser()
    with pytest.raises(ParseError, match="item 1"):
        parse_cached([["ok"], []], parser, cache=ParseCache(tmp_path))
    assert parser.calls == []


def test_default_directory_follows_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("STRUCTATTN_CACHE", str(tmp_path / "c"))
    assert ParseCache().directory == tmp_path / "c" / "parses"


def test_spacy_parser_cached_rerun_does_not_load_the_model(tmp_path, spacy_parser):
    from structattn.parsing.spacy_backend import SpacyParser

    items = [["The", "film", "works", "."], ["do", "n't", "miss", "it", "!"]]
    cache = ParseCache(tmp_path)
    first = parse_cached(items, spacy_parser, cache=cache)
    fresh = SpacyParser()
    assert parse_cached(items, fresh, cache=cache) == first
    assert fresh._nlp is None and cache.last_stats.hits == 1
