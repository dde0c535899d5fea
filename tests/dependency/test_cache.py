"""Parse cache: content-addressed per item (subsets and supersets reuse it), damaged entries and databases parsed
again with a warning, two writer processes keeping every entry, format 2 migrated once, info and prune."""
from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import sqlite3
import sys
import time
from pathlib import Path

import pytest

from structattn.dependency import Parse, ParseCache, parse_cached
from structattn.dependency import cache as cache_mod
from structattn.dependency.cache import cache_info, prune

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


def sql(cache: ParseCache, statement: str, *params):
    """Run one statement on the cache's database (to damage or age it as time and faults would)."""
    conn = sqlite3.connect(cache.path, isolation_level=None)
    try:
        return conn.execute(statement, params).fetchall()
    finally:
        conn.close()


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


def test_damaged_entry_is_parsed_again_with_a_warning(cache, caplog):
    first = cache.get_or_parse(ITEMS, FakeParser(), FP, "words")
    sql(cache, "UPDATE entries SET payload = ? WHERE key = ?", b'[[1,"",["w3"', cache.key(ITEMS[3], FP, "words"))
    parser = FakeParser()
    with caplog.at_level(logging.WARNING, logger="structattn.dependency.cache"):
        again = cache.get_or_parse(ITEMS, parser, FP, "words")
    assert again == first and parser.parsed == [3]  # only the damaged item
    assert cache.last_stats.rebuilt == 1 and cache.last_stats.hits == 9
    assert "1 entries are not valid JSON" in caplog.text
    cache.get_or_parse(ITEMS, FakeParser(), FP, "words")  # and it was replaced: a third run is all hits
    assert cache.last_stats.hits == 10


def test_damaged_entry_among_many_costs_only_that_item(tmp_path, caplog):
    cache = ParseCache(tmp_path)
    items = [[f"x{i}"] for i in range(600)]  # more than one SELECT chunk
    cache.get_or_parse(items, FakeParser(), FP, "words")
    sql(cache, "UPDATE entries SET payload = CAST(REPLACE(CAST(payload AS TEXT), '\"X\"', '\"X') AS BLOB) "
               "WHERE key = ?", cache.key(items[1], FP, "words"))
    parser = FakeParser()
    with caplog.at_level(logging.WARNING, logger="structattn.dependency.cache"):
        out = cache.get_or_parse(items, parser, FP, "words")
    assert parser.parsed == [1] and out == fresh(items)


def test_entry_with_valid_json_but_malformed_content_is_parsed_again(cache, caplog):
    first = cache.get_or_parse(ITEMS, FakeParser(), FP, "words")
    payload = b'[[1,"",["w3"],[0,0],["root"],["X"]]]'  # two heads for one word
    sql(cache, "UPDATE entries SET payload = ? WHERE key = ?", payload, cache.key(ITEMS[3], FP, "words"))
    parser = FakeParser()
    with caplog.at_level(logging.WARNING, logger="structattn.dependency.cache"):
        assert cache.get_or_parse(ITEMS, parser, FP, "words") == first
    assert parser.parsed == [3] and cache.last_stats.rebuilt == 1 and "malformed" in caplog.text


def test_unreadable_database_is_set_aside_and_everything_parsed_again(cache, caplog):
    first = cache.get_or_parse(ITEMS, FakeParser(), FP, "words")
    cache.path.write_bytes(b"\x00\xff not a database" * 100)
    parser = FakeParser()
    with caplog.at_level(logging.WARNING, logger="structattn.dependency.cache"):
        assert cache.get_or_parse(ITEMS, parser, FP, "words") == first
    assert parser.parsed == list(range(10)) and "is unusable" in caplog.text
    aside = [p.name for p in cache.directory.iterdir() if ".corrupt-" in p.name]
    assert len(aside) == 1 and [o.path.name for o in cache_info(cache.directory).others] == aside
    cache.get_or_parse(ITEMS, FakeParser(), FP, "words")
    assert cache.last_stats.hits == 10


def test_deleted_entry_is_parsed(cache):
    cache.get_or_parse(ITEMS, FakeParser(), FP, "words")
    sql(cache, "DELETE FROM entries WHERE key = ?", cache.key(ITEMS[8], FP, "words"))
    parser = FakeParser()
    cache.get_or_parse(ITEMS, parser, FP, "words")
    assert parser.parsed == [8] and cache.last_stats.misses == 1


def test_the_database_is_in_wal_mode(cache):
    cache.get_or_parse(ITEMS, FakeParser(), FP, "words")
    assert sql(cache, "PRAGMA journal_mode") == [("wal",)]


def test_two_writer_processes_keep_every_entry(tmp_path):
    # Two processes add 400 new items each into one cache, in calls of 100 written every 7 items, so their
    # transactions interleave many times; every entry must be there afterwards.
    sys.path.insert(0, str(Path(__file__).parent))
    from cache_writers import add_items, chain_parse, writer_items

    directory, count = tmp_path / "cache", 400
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        results = pool.starmap(add_items, [(str(directory), w, count, 7, 100) for w in (0, 1)])
    assert results == [(count, 0), (count, 0)]  # each saw all its items as new and every write succeeded
    everything = writer_items(0, count) + writer_items(1, count)
    cache, parser = ParseCache(directory), FakeParser()
    out = cache.get_or_parse(everything, parser, "fake-parser v1", "words")
    assert parser.calls == [] and cache.last_stats.hits == 2 * count
    assert out == [list(p) for p in chain_parse(everything, list(range(2 * count)))]


def test_two_processes_creating_the_cache_at_once_both_open_it(tmp_path):
    # Two processes switching a new database to WAL at the same moment: SQLite refuses one of them at once
    # ("database is locked", without waiting), which must be waited out, not reported. Many rounds, since
    # the race is won or lost by microseconds.
    sys.path.insert(0, str(Path(__file__).parent))
    from cache_writers import open_at

    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        pool.starmap(open_at, [(str(tmp_path / "warm-up"), 0.0)] * 2)  # both workers started and imported
        for round_ in range(40):
            start = time.time() + 0.02
            outcomes = pool.starmap(open_at, [(str(tmp_path / f"cache{round_}"), start)] * 2)
            assert outcomes == ["ok", "ok"], f"round {round_}: {outcomes}"


def _write_format_2(directory: Path, fingerprint: str, kind: str, entries: dict[str, bytes], damaged: str) -> Path:
    """A format-2 namespace folder as earlier versions wrote it: namespace.json and checksummed bucket files
    (``damaged``: the key of one entry written with a wrong check)."""
    ns = cache_mod.Namespace(fingerprint, kind, {})
    folder = directory / "v2" / ns.id
    folder.mkdir(parents=True)
    (folder / "namespace.json").write_text(json.dumps({"format": "structattn-parses", "version": 2, "namespace": ns.id,
                                                       "fingerprint": fingerprint, "kind": kind, "options": {}}))
    for bucket in sorted({key[0] for key in entries}):
        header = {"format": "structattn-parses", "version": 2, "namespace": ns.id, "fingerprint": fingerprint,
                  "kind": kind, "bucket": bucket}
        lines = [json.dumps(header, separators=(",", ":")).encode()]
        for key, payload in entries.items():
            if key[0] == bucket:
                check = hashlib.sha256(key.encode() + b" " + payload).hexdigest()[:16].encode()
                lines.append(key.encode() + b" " + (b"0" * 16 if key == damaged else check) + b" " + payload)
        (folder / f"{bucket}.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return folder


def test_format_2_is_migrated_once_with_the_same_keys(tmp_path, caplog):
    directory = tmp_path / "cache"
    ns = cache_mod.Namespace(FP, "words", {})
    entries = {ns.key(item): json.dumps(cache_mod._rows(passage, i), separators=(",", ":")).encode()
               for i, (item, passage) in enumerate(zip(ITEMS, fresh(ITEMS)))}
    _write_format_2(directory, FP, "words", entries, damaged=ns.key(ITEMS[4]))
    cache, parser = ParseCache(directory), FakeParser()
    with caplog.at_level(logging.WARNING, logger="structattn.dependency.cache"):
        out = cache.get_or_parse(ITEMS, parser, FP, "words")
    assert out == fresh(ITEMS) and parser.parsed == [4]  # 9 entries found under their old keys; 1 failed its check
    assert "moved 9 entries of 1 parser namespaces" in caplog.text and "1 damaged entries skipped" in caplog.text
    assert not (directory / "v2").exists() and (directory / "v2.migrated").is_dir()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="structattn.dependency.cache"):
        cache.get_or_parse(ITEMS, FakeParser(), FP, "words")
    assert cache.last_stats.hits == 10 and "moved" not in caplog.text  # once
    assert [o.path.name for o in cache_info(directory).others] == ["v2.migrated"]
    prune(directory)
    assert not (directory / "v2.migrated").exists() and cache.get_or_parse(ITEMS, FakeParser(), FP, "words")


def test_format_2_written_again_after_a_migration_is_migrated_beside_it(tmp_path, caplog):
    """An older structattn sharing the cache writes format 2 again: the next migration moves it to v2.migrated.2
    quietly (once), instead of failing to rename onto v2.migrated and reading it again in every process."""
    directory = tmp_path / "cache"
    ns = cache_mod.Namespace(FP, "words", {})
    entries = {ns.key(item): json.dumps(cache_mod._rows(passage, i), separators=(",", ":")).encode()
               for i, (item, passage) in enumerate(zip(ITEMS, fresh(ITEMS)))}
    _write_format_2(directory, FP, "words", entries, damaged="")
    ParseCache(directory).get_or_parse(ITEMS[:2], FakeParser(), FP, "words")
    _write_format_2(directory, FP, "words", entries, damaged="")
    with caplog.at_level(logging.WARNING, logger="structattn.dependency.cache"):
        out = ParseCache(directory).get_or_parse(ITEMS, FakeParser(), FP, "words")
    assert out == fresh(ITEMS) and "could not rename" not in caplog.text
    assert not (directory / "v2").exists()
    assert sorted(o.path.name for o in cache_info(directory).others) == ["v2.migrated", "v2.migrated.2"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="structattn.dependency.cache"):
        ParseCache(directory).get_or_parse(ITEMS, FakeParser(), FP, "words")
    assert "moved" not in caplog.text
    prune(directory)
    assert not any(directory.glob("v2*"))


def test_crash_mid_parse_keeps_written_entries_and_resumes(cache):
    with pytest.raises(RuntimeError, match="boom at 9"):
        cache.get_or_parse(ITEMS, FakeParser(fail_at=9), FP, "words")
    assert not any(p.name.endswith(".tmp") for p in all_files(cache))  # no temporary file left
    parser = FakeParser()
    cache.get_or_parse(ITEMS, parser, FP, "words")
    assert parser.parsed == [8, 9] and cache.last_stats.hits == 8  # written every 4 items


def test_unwritable_cache_still_returns_results(tmp_path, caplog):
    (tmp_path / "cache").write_text("a file where the cache folder should be")
    cache = ParseCache(tmp_path / "cache")
    with caplog.at_level(logging.WARNING, logger="structattn.dependency.cache"):
        out = cache.get_or_parse(ITEMS, FakeParser(), FP, "words")
    assert out == fresh(ITEMS) and cache.last_stats.write_errors > 0
    assert "parsing without the cache" in caplog.text


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
    from structattn.dependency import ParseError

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
    assert [r.what for r in removed] == [str(old)] and not old.exists()
    parser = FakeParser()
    cache.get_or_parse(ITEMS, parser, FP, "words")
    assert parser.parsed == []


def test_prune_keep_fingerprints_days_and_all(cache):
    cache.get_or_parse(ITEMS, FakeParser(), FP, "words")
    cache.get_or_parse(ITEMS, FakeParser(fingerprint="old parser"), "old parser", "words")
    removed = prune(cache.directory, keep_fingerprints=[FP])
    assert [(r.entries, "old parser" in r.reason) for r in removed] == [(10, True)]
    assert [n.fingerprint for n in cache_info(cache.directory).namespaces] == [FP]

    in_ten_days = time.time() + 10 * 86400
    assert prune(cache.directory, days=11, now=in_ten_days) == []
    assert [r.entries for r in prune(cache.directory, days=9, now=in_ten_days)] == [10]

    cache.get_or_parse(ITEMS, FakeParser(), FP, "words")
    assert len(prune(cache.directory, remove_all=True)) == 1 and cache_info(cache.directory).namespaces == []


def test_use_refreshes_the_last_used_time(cache):
    cache.get_or_parse(ITEMS, FakeParser(), FP, "words")
    sql(cache, "UPDATE namespaces SET last_used = 0")
    cache.get_or_parse(ITEMS[:2], FakeParser(), FP, "words")  # all hits: still a use
    assert prune(cache.directory, days=1) == []


def test_spacy_parser_cached_rerun_does_not_load_the_model(tmp_path, spacy_parser):
    from structattn.dependency.spacy_backend import SpacyParser

    items = [["The", "film", "works", "."], ["do", "n't", "miss", "it", "!"]]
    cache = ParseCache(tmp_path)
    first = parse_cached(items, spacy_parser, cache=cache)
    fresh_parser = SpacyParser()
    assert parse_cached(items, fresh_parser, cache=cache) == first
    assert fresh_parser._nlp is None and cache.last_stats.hits == 2
    assert parse_cached(items[1:], SpacyParser(), cache=cache) == spacy_parser.parse_words(items[1:])


def test_an_empty_database_file_is_said_and_started_again(cache, caplog):
    cache.directory.mkdir(parents=True)
    cache.path.write_bytes(b"")
    parser = FakeParser()
    with caplog.at_level(logging.WARNING, logger="structattn.dependency.cache"):
        assert cache.get_or_parse(ITEMS, parser, FP, "words") == fresh(ITEMS)
    assert parser.parsed == list(range(10)) and "is an empty file" in caplog.text


@pytest.fixture
def read_only_cache(tmp_path):
    """A cache holding ITEMS[:6] on a tmpfs remounted read-only (root refused too); skipped where mount is."""
    import subprocess

    folder = tmp_path / "ro"
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(folder)], capture_output=True).returncode:
        pytest.skip("mount is refused here (needs root): no read-only file system to test on")
    try:
        cache = ParseCache(folder / "cache", flush_items=4)
        cache.get_or_parse(ITEMS[:6], FakeParser(), FP, "words")
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        yield cache
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def test_a_read_only_cache_serves_its_entries_and_skips_writes_with_one_note(read_only_cache, caplog):
    parser = FakeParser()
    with caplog.at_level(logging.WARNING, logger="structattn.dependency.cache"):
        assert read_only_cache.get_or_parse(ITEMS, parser, FP, "words") == fresh(ITEMS)
    stats = read_only_cache.last_stats
    assert parser.parsed == list(range(6, 10)) and stats.hits == 6  # the cached items are not parsed again
    assert stats.read_only and stats.skipped_writes == 4 and stats.write_errors == 0
    notes = [r.getMessage() for r in caplog.records]
    assert len(notes) == 1 and "cannot be written, read it only: 6 of 10 items from it, 4 new parses" in notes[0]
    info = cache_info(read_only_cache.directory)
    assert [ns.entries for ns in info.namespaces] == [6]
    from structattn.errors import UserError
    with pytest.raises(UserError, match=r"is read-only: nothing was removed"):
        prune(read_only_cache.directory, remove_all=True)
    assert [ns.entries for ns in cache_info(read_only_cache.directory).namespaces] == [6]
