"""Parse cache: content-addressed per item (subsets and supersets reuse it), corrupt/truncated/stale
entries and buckets parsed again with a warning, atomic writes, info and prune."""
from __future__ import annotations

import json
import logging
import os
import time

import pytest

from structattn.parsing import Parse, ParseCache, parse_cached
from structattn.parsing import cache as cache_mod
from structattn.parsing.cache import cache_info, prune, write_atomic

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


def fresh(items):
    """What the parser gives for ``items`` without any cache (the oracle for cached results)."""
    return [list(p) for p in FakeParser()(items, list(range(len(items))))]


def bucket_of(cache: ParseCache, item, fp=FP, kind="words"):
    key = cache.key(item, fp, kind)
    return cache.namespace(fp, kind).bucket_path(key[:cache_mod.BUCKET_DIGITS])


def sharing_bucket(cache: ParseCache, index: int) -> list[int]:
    """Indices of the ITEMS whose entries are in the same bucket file as ITEMS[index]."""
    return [i for i in range(len(ITEMS)) if bucket_of(cache, ITEMS[i]) == bucket_of(cache, ITEMS[index])]


def last_entry_index(cache: ParseCache, path) -> int:
    """Index in ITEMS of the item whose entry is the last line of bucket file ``path``."""
    key = path.read_bytes().rstrip(b"\n").split(b"\n")[-1][:64].decode()
    return next(i for i in range(len(ITEMS)) if cache.key(ITEMS[i], FP, "words") == key)


def all_files(cache: ParseCache):
    return sorted(p for p in cache.directory.rglob("*") if p.is_file())


@pytest.fixture
def cache(tmp_path):
    return ParseCache(tmp_path / "cache", flush_items=4)


def test_miss_then_hit(cache):
    parser = FakeParser()
    first = cache.get_or_parse(ITEMS, parser, FP, "words")
    assert parser.parsed == list(range(10)) and first == fresh(ITEMS)
    assert cache.last_stats.misses == 10 and cache.last_stats.hits == 0

    again = FakeParser()
    second = cache.get_or_parse(ITEMS, again, FP, "words")
    assert again.calls == [] and second == first
    assert cache.last_stats.hits == 10 and cache.last_stats.parsed_items == 0
    assert second[9][0].words == tuple(ITEMS[9]) and second[9][0].sent_id == "9"


def test_subset_after_full_run_parses_nothing(cache):
    cache.get_or_parse(ITEMS, FakeParser(), FP, "words")
    for subset in (ITEMS[:3], ITEMS[7:], ITEMS[::-1], [ITEMS[5]]):
        parser = FakeParser()
        out = cache.get_or_parse(subset, parser, FP, "words")
        assert parser.parsed == [] and cache.last_stats.hits == len(subset)
        assert out == fresh(subset)  # sentence ids follow the items' new positions


def test_superset_parses_only_the_new_items(cache):
    cache.get_or_parse(ITEMS[:6], FakeParser(), FP, "words")
    bigger = ITEMS[:3] + [["brand", "new"]] + ITEMS[3:] + [["another", "one", "."]]
    parser = FakeParser()
    out = cache.get_or_parse(bigger, parser, FP, "words")
    assert parser.parsed == [3, 7, 8, 9, 10, 11]  # the two new items and ITEMS[6:], at their positions in `bigger`
    assert out == fresh(bigger)
    assert cache.last_stats.hits == 6 and cache.last_stats.misses == 6


def test_identical_items_are_parsed_once(cache):
    items = [["a", "b"], ["c"], ["a", "b"], ["a", "b"]]
    parser = FakeParser()
    out = cache.get_or_parse(items, parser, FP, "words")
    assert parser.parsed == [0, 1] and cache.last_stats.parsed_items == 2
    assert out == fresh(items)


def test_sentence_ids_not_made_from_the_index_are_kept_as_they_are(cache):
    def named(items, indices):
        for item, index in zip(items, indices):
            yield [Parse(item, [0], ["root"], ["X"], f"doc-{item[0]}"),
                   Parse(item, [0], ["root"], ["X"], f"{index}.2")]

    cache.get_or_parse([["x"], ["y"]], named, FP, "words")
    out = cache.get_or_parse([["q"], ["y"]], named, FP, "words")
    assert [p.sent_id for p in out[1]] == ["doc-y", "1.2"]  # verbatim; relative to the new index


def test_key_depends_on_content_fingerprint_kind_and_options(cache):
    keys = {cache.key(ITEMS[5], FP, "words"), cache.key(["other"] + ITEMS[5][1:], FP, "words"),
            cache.key(ITEMS[5], "fake-parser v2", "words"), cache.key(ITEMS[5], FP, "texts"),
            cache.key(ITEMS[5], FP, "words", options={"m": 3})}
    assert len(keys) == 5
    assert cache.key(ITEMS[5], FP, "words") == cache.key(list(ITEMS[5]), FP, "words")


def test_new_fingerprint_parses_again(cache):
    cache.get_or_parse(ITEMS, FakeParser(), FP, "words")
    parser = FakeParser()
    cache.get_or_parse(ITEMS, parser, "fake-parser v2", "words")
    assert parser.parsed == list(range(10))


def _flip_byte(path, offset_from_end=5):
    data = bytearray(path.read_bytes())
    data[-offset_from_end] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage, reason, whole_bucket", [
    (lambda p: _flip_byte(p), "checksum", False),  # in the last entry
    (lambda p: p.write_bytes(p.read_bytes()[:-15]), "checksum", False),  # the last entry cut short
    (lambda p: p.write_bytes(p.read_bytes()[:30]), "truncated", True),  # cut inside the header line
    (lambda p: p.write_bytes(b""), "truncated", True),
    (lambda p: p.write_bytes(b"\x00\xff garbage\n" + p.read_bytes()), "corrupt header", True),
])
def test_corrupt_entry_or_bucket_is_parsed_again_with_a_warning(cache, caplog, damage, reason, whole_bucket):
    first = cache.get_or_parse(ITEMS, FakeParser(), FP, "words")
    damaged = bucket_of(cache, ITEMS[5])
    expected = sharing_bucket(cache, 5) if whole_bucket else [last_entry_index(cache, damaged)]
    assert len(expected) < len(ITEMS)
    damage(damaged)
    parser = FakeParser()
    with caplog.at_level(logging.WARNING, logger="structattn.parsing.cache"):
        again = cache.get_or_parse(ITEMS, parser, FP, "words")
    assert again == first
    assert parser.parsed == expected  # only the damaged items
    assert cache.last_stats.rebuilt == len(expected) and cache.last_stats.hits == 10 - len(expected)
    assert any(damaged.name in r.getMessage() and reason in r.getMessage() for r in caplog.records)
    # and it was rewritten: a third run is all hits
    cache.get_or_parse(ITEMS, FakeParser(), FP, "words")
    assert cache.last_stats.hits == 10


def test_corrupt_entry_among_good_ones_costs_only_that_item(tmp_path, caplog):
    cache = ParseCache(tmp_path)
    items = [[f"x{i}"] for i in range(600)]  # many entries per bucket
    cache.get_or_parse(items, FakeParser(), FP, "words")
    path = next(p for p in sorted(cache.folder(FP, "words").glob("*.jsonl")) if len(p.read_bytes().split(b"\n")) > 4)
    lines = path.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b'"X"', b'"Y"')  # a silent bit of rot in the second entry
    path.write_bytes(b"\n".join(lines))
    parser = FakeParser()
    with caplog.at_level(logging.WARNING, logger="structattn.parsing.cache"):
        out = cache.get_or_parse(items, parser, FP, "words")
    assert len(parser.parsed) == 1 and out == fresh(items)
    assert "1 entries fail their checksum" in caplog.text


def test_entry_with_a_valid_check_but_malformed_content_is_parsed_again(cache, caplog):
    import hashlib

    first = cache.get_or_parse(ITEMS, FakeParser(), FP, "words")
    path = bucket_of(cache, ITEMS[3])
    key = cache.key(ITEMS[3], FP, "words").encode()
    payload = b'[[1,"",["w3"],[0,0],["root"],["X"]]]'  # two heads for one word
    check = hashlib.sha256(key + b" " + payload).hexdigest()[:16].encode()
    lines = [line for line in path.read_bytes().split(b"\n") if not line.startswith(key)]
    path.write_bytes(b"\n".join(lines) + key + b" " + check + b" " + payload + b"\n")
    parser = FakeParser()
    with caplog.at_level(logging.WARNING, logger="structattn.parsing.cache"):
        assert cache.get_or_parse(ITEMS, parser, FP, "words") == first
    assert parser.parsed == [3] and cache.last_stats.rebuilt == 1 and "malformed" in caplog.text


def _rewrite_header(path, **changes):
    header_line, payload = path.read_bytes().split(b"\n", 1)
    header = json.loads(header_line)
    header.update(changes)
    path.write_bytes(json.dumps(header).encode() + b"\n" + payload)


@pytest.mark.parametrize("changes, reason", [
    ({"fingerprint": "fake-parser v0"}, "stale"),
    ({"version": 1}, "stale"),
    ({"namespace": "0" * 32}, "namespace"),
    ({"bucket": "zz"}, "bucket"),
])
def test_stale_bucket_header_is_parsed_again(cache, caplog, changes, reason):
    cache.get_or_parse(ITEMS, FakeParser(), FP, "words")
    _rewrite_header(bucket_of(cache, ITEMS[0]), **changes)  # entries still intact: only the header is wrong
    parser = FakeParser()
    with caplog.at_level(logging.WARNING, logger="structattn.parsing.cache"):
        cache.get_or_parse(ITEMS, parser, FP, "words")
    assert parser.parsed == sharing_bucket(cache, 0)
    assert any(reason in r.getMessage() for r in caplog.records)


def test_missing_bucket_is_parsed(cache):
    cache.get_or_parse(ITEMS, FakeParser(), FP, "words")
    bucket_of(cache, ITEMS[8]).unlink()
    parser = FakeParser()
    cache.get_or_parse(ITEMS, parser, FP, "words")
    assert parser.parsed == sharing_bucket(cache, 8) and cache.last_stats.misses == len(parser.parsed)


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


def test_crash_mid_parse_keeps_written_entries_and_resumes(cache):
    with pytest.raises(RuntimeError, match="boom at 9"):
        cache.get_or_parse(ITEMS, FakeParser(fail_at=9), FP, "words")
    assert not any(p.name.endswith(".tmp") for p in all_files(cache))  # no temporary file left
    parser = FakeParser()
    cache.get_or_parse(ITEMS, parser, FP, "words")
    assert parser.parsed == [8, 9] and cache.last_stats.hits == 8  # written every 4 items


def test_unwritable_cache_still_returns_results(cache, monkeypatch, caplog):
    def fail(*args, **kwargs):
        raise OSError("read-only file system")

    monkeypatch.setattr(cache_mod, "write_atomic", fail)
    with caplog.at_level(logging.WARNING, logger="structattn.parsing.cache"):
        out = cache.get_or_parse(ITEMS, FakeParser(), FP, "words")
    assert out == fresh(ITEMS) and cache.last_stats.write_errors > 0
    assert "could not write" in caplog.text


def test_entry_round_trip_keeps_everything(cache):
    passages = [[Parse(["a", "b"], [2, 0], ["det", "root"], ["DET", "NOUN"], "0.1"),
                 Parse(["\ufffd", "🍕"], [0, 1], ["root", ""], ["X", ""], "0.2")],
                [Parse(["x"], [0], [""], [""], "1")]]
    cache.get_or_parse(["a b", "x"], lambda items, indices: iter(passages), FP, "texts")
    assert cache.get_or_parse(["a b", "x"], FakeParser(), FP, "texts") == passages


def test_parse_cached_protocol_and_progress(tmp_path):
    cache = ParseCache(tmp_path, flush_items=3)
    parser = FakeParser()
    done = []
    out = parse_cached(["a b", "c", "d e f", "g"], parser, cache=cache, progress=done.append)
    assert [p[0].words for p in out] == [("a", "b"), ("c",), ("d", "e", "f"), ("g",)]
    assert sum(done) == 4
    done.clear()
    parse_cached(["a b", "c", "d e f", "g"], FakeParser(), cache=cache, progress=done.append)
    assert sum(done) == 4 and cache.last_stats.hits == 4


def test_parse_cached_rejects_bad_items_before_parsing(tmp_path):
    from structattn.parsing import ParseError

    parser = FakeParser()
    with pytest.raises(ParseError, match="item 1"):
        parse_cached([["ok"], []], parser, cache=ParseCache(tmp_path))
    assert parser.calls == []


def test_default_directory_follows_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("STRUCTATTN_CACHE", str(tmp_path / "c"))
    assert ParseCache().directory == tmp_path / "c" / "parses"


# ---------------------------------------------------------------------- info and prune
def _old_format_folder(cache: ParseCache):
    """A format-1 shard folder, as earlier versions wrote them."""
    folder = cache.directory / ("ab" * 16)
    folder.mkdir(parents=True)
    (folder / "00000.parses.jsonl").write_bytes(b'{"format":"structattn-parses","version":1}\n' + b"x" * 100)
    return folder


def test_info_counts_entries_per_fingerprint_and_kind(cache):
    cache.get_or_parse(ITEMS, FakeParser(), FP, "words")
    cache.get_or_parse(["a b", "c"], FakeParser(), "fake-parser v2", "texts")
    old = _old_format_folder(cache)
    info = cache_info(cache.directory)
    got = sorted((n.fingerprint, n.kind, n.entries) for n in info.namespaces)
    assert got == [(FP, "words", 10), ("fake-parser v2", "texts", 2)]
    assert [o.path for o in info.others] == [old]
    assert info.bytes == sum(p.stat().st_size for p in all_files(cache))


def test_prune_removes_other_formats_and_keeps_the_rest(cache):
    cache.get_or_parse(ITEMS, FakeParser(), FP, "words")
    old = _old_format_folder(cache)
    removed = prune(cache.directory)
    assert [r.path for r in removed] == [old] and not old.exists()
    parser = FakeParser()
    cache.get_or_parse(ITEMS, parser, FP, "words")
    assert parser.parsed == []


def test_prune_keep_fingerprints_days_and_all(cache):
    cache.get_or_parse(ITEMS, FakeParser(), FP, "words")
    cache.get_or_parse(ITEMS, FakeParser(fingerprint="old parser"), "old parser", "words")
    removed = prune(cache.directory, keep_fingerprints=[FP])
    assert [(r.entries, "old parser" in r.reason) for r in removed] == [(10, True)]
    assert [n.fingerprint for n in cache_info(cache.directory).namespaces] == [FP]

    meta = cache.folder(FP, "words") / "namespace.json"
    ten_days_ago = time.time() - 10 * 86400
    os.utime(meta, (ten_days_ago, ten_days_ago))
    assert prune(cache.directory, days=11) == []
    assert [r.entries for r in prune(cache.directory, days=9)] == [10]

    cache.get_or_parse(ITEMS, FakeParser(), FP, "words")
    assert len(prune(cache.directory, remove_all=True)) == 1 and cache_info(cache.directory).namespaces == []


def test_use_refreshes_the_last_used_time(cache):
    cache.get_or_parse(ITEMS, FakeParser(), FP, "words")
    meta = cache.folder(FP, "words") / "namespace.json"
    os.utime(meta, (0, 0))
    cache.get_or_parse(ITEMS[:2], FakeParser(), FP, "words")  # all hits: still a use
    assert prune(cache.directory, days=1) == []


def test_spacy_parser_cached_rerun_does_not_load_the_model(tmp_path, spacy_parser):
    from structattn.parsing.spacy_backend import SpacyParser

    items = [["The", "film", "works", "."], ["do", "n't", "miss", "it", "!"]]
    cache = ParseCache(tmp_path)
    first = parse_cached(items, spacy_parser, cache=cache)
    fresh_parser = SpacyParser()
    assert parse_cached(items, fresh_parser, cache=cache) == first
    assert fresh_parser._nlp is None and cache.last_stats.hits == 2
    assert parse_cached(items[1:], SpacyParser(), cache=cache) == spacy_parser.parse_words(items[1:])
