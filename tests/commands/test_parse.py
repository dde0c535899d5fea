"""``structattn parse`` with a tiny saved parser (no pretrained encoder): pre-tokenised and raw input, files and
stdin/stdout, tags, bad lines. The command is not registered in cli.py here: tests build its argparse parser."""
from __future__ import annotations

import argparse
import io
import re

import pytest
import torch

import sys
from pathlib import Path

from structattn.bna.model import ChartParser
from structattn.commands import parse as parse_command
from structattn.errors import UserError
from structattn.tasks.ptb import parse_trees

sys.path.insert(0, str(Path(__file__).parent.parent / "bna"))
from tiny_parser import needs_pipeline, save_tiny  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("parser")
    save_tiny(folder, max_words=8)
    return folder


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="structattn")
    parse_command.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["parse", *argv])
    return args.func(args)


def test_pretokenized_file_to_file_without_spacy(model_dir, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("The cat sat .\n( It ) purred\n", encoding="utf-8")
    out = tmp_path / "out.trees"
    assert run(["--model", str(model_dir), "--input", str(src), "--output", str(out), "--pretokenized",
                "--tags", "none", "--batch-size", "1"]) == 0
    trees = parse_trees(out.read_text(encoding="utf-8"))
    assert [t.leaves() for t in trees] == [["The", "cat", "sat", "."], ["-LRB-", "It", "-RRB-", "purred"]]
    assert [t.tags() for t in trees] == [["XX"] * 4, ["XX"] * 4]
    assert len(out.read_text().splitlines()) == 2
    assert "2 sentence(s) parsed" in capsys.readouterr().err
    # the same through the library
    direct = ChartParser.from_pretrained(model_dir).parse([["The", "cat", "sat", "."]])[0].to_string()
    assert out.read_text().splitlines()[0] == direct


def test_pretokenized_blank_line_gives_an_empty_output_line(model_dir, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("The cat sat .\n   \n\nIt purred\n", encoding="utf-8")
    out = tmp_path / "out.trees"
    assert run(["--model", str(model_dir), "--input", str(src), "--output", str(out), "--pretokenized",
                "--tags", "none"]) == 0
    lines = out.read_text(encoding="utf-8").split("\n")
    assert lines[1:3] == ["", ""] and lines[4:] == [""]  # line N of the output belongs to line N of the input
    assert [t.leaves() for t in parse_trees(lines[0] + lines[3])] == [["The", "cat", "sat", "."], ["It", "purred"]]
    assert "2 blank line(s)" in capsys.readouterr().err


def test_control_character_is_refused_with_its_line(model_dir, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("The cat sat .\nIt\x00 purred\n", encoding="utf-8")
    with pytest.raises(UserError, match=rf"{src}:2: control character U\+0000 \(NUL\) at column 3"):
        run(["--model", str(model_dir), "--input", str(src), "--pretokenized", "--tags", "none"])


def test_long_line_is_named(model_dir, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("a b\na b c d e f g h i\n", encoding="utf-8")
    with pytest.raises(UserError, match=rf"{src}:2: 9 words, more than the parser's max_words=8"):
        run(["--model", str(model_dir), "--input", str(src), "--pretokenized", "--tags", "none"])


def test_bad_arguments(model_dir, tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        run(["--model", str(model_dir), "--input", str(tmp_path / "missing.txt")])
    with pytest.raises(UserError, match="is not a saved parser"):
        run(["--model", str(tmp_path)])
    with pytest.raises(UserError, match="--batch-size 0 must be positive"):
        run(["--model", str(model_dir), "--batch-size", "0"])
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("caf\xe9\n".encode("latin-1"))
    with pytest.raises(UserError, match=rf"{re.escape(str(bad))}:1: not valid UTF-8"):
        run(["--model", str(model_dir), "--input", str(bad), "--pretokenized"])


def _bytes_stdin(monkeypatch, data: bytes) -> None:
    """Standard input as a terminal or a pipe gives it: bytes under a UTF-8 text layer."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


LATIN1_LINES = "The cat sat .\nIt caf\xe9 purred\n".encode("latin-1")


@pytest.mark.parametrize("mode", [[], ["--pretokenized", "--tags", "none"], ["--pretokenized"]])
def test_non_utf8_input_names_source_and_line_and_exits_2(model_dir, tmp_path, monkeypatch, capsys, mode):
    """Through the real CLI: one error line (no traceback) naming <stdin> or the file, the line and the fix; the
    bytes are refused before spaCy or the parser see them."""
    from structattn import cli

    _bytes_stdin(monkeypatch, LATIN1_LINES)
    assert cli.main(["parse", "--model", str(model_dir), *mode]) == 2
    err = capsys.readouterr().err
    assert err.startswith("structattn parse: error: <stdin>:2: not valid UTF-8 (byte 0xe9 at byte 7 of the line)")
    assert "re-save the file as UTF-8" in err and "Traceback" not in err
    src = tmp_path / "in.txt"
    src.write_bytes(LATIN1_LINES)
    assert cli.main(["parse", "--model", str(model_dir), "--input", str(src), *mode]) == 2
    assert capsys.readouterr().err.startswith(f"structattn parse: error: {src}:2: not valid UTF-8")


def test_byte_order_mark_is_not_part_of_the_first_word(model_dir, tmp_path, monkeypatch, capsys):
    _bytes_stdin(monkeypatch, b"\xef\xbb\xbfThe cat sat .\n")
    assert run(["--model", str(model_dir), "--pretokenized", "--tags", "none"]) == 0
    assert parse_trees(capsys.readouterr().out)[0].leaves() == ["The", "cat", "sat", "."]
    src = tmp_path / "bom.txt"
    src.write_bytes(b"\xef\xbb\xbfThe cat sat .\n")
    assert run(["--model", str(model_dir), "--input", str(src), "--pretokenized", "--tags", "none"]) == 0
    assert parse_trees(capsys.readouterr().out)[0].leaves() == ["The", "cat", "sat", "."]


@needs_pipeline
def test_byte_order_mark_before_raw_text(model_dir, monkeypatch, capsys):
    _bytes_stdin(monkeypatch, b"\xef\xbb\xbfThe cat sat.\n")
    assert run(["--model", str(model_dir)]) == 0
    tree = parse_trees(capsys.readouterr().out)[0]
    assert tree.leaves() == ["The", "cat", "sat", "."] and tree.tags()[0] == "DT"


@needs_pipeline
def test_raw_stdin_to_stdout_one_output_line_per_input_line(model_dir, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO("The cat (a tabby) sat. It purred.\n\n  \nHi there.\n"))
    assert run(["--model", str(model_dir)]) == 0
    captured = capsys.readouterr()
    trees = parse_trees(captured.out)
    assert [t.leaves() for t in trees] == [["The", "cat", "-LRB-", "a", "tabby", "-RRB-", "sat", "."],
                                           ["It", "purred", "."], ["Hi", "there", "."]]
    assert trees[0].tags() == ["DT", "NN", "-LRB-", "DT", "NN", "-RRB-", "VBD", "."]
    lines = captured.out.split("\n")
    assert len(lines) == 5 and lines[1:3] == ["", ""]  # both sentences of line 1 on output line 1
    assert [len(parse_trees(line)) for line in lines] == [2, 0, 0, 1, 0]
    assert "2 blank line(s) of <stdin>" in captured.err


@needs_pipeline
def test_raw_long_sentence_names_line_and_sentence(model_dir, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("Short one.\nOk. One two three four five six seven eight.\n"))
    with pytest.raises(UserError, match=r"<stdin>:2 \(sentence 2 of the line\): 9 words"):
        run(["--model", str(model_dir)])


@needs_pipeline
def test_pretokenized_with_spacy_tags(model_dir, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("-LRB- The cat -RRB- sat .\n", encoding="utf-8")
    assert run(["--model", str(model_dir), "--input", str(src), "--pretokenized"]) == 0
    tree = parse_trees(capsys.readouterr().out)[0]
    assert tree.leaves() == ["-LRB-", "The", "cat", "-RRB-", "sat", "."]
    assert tree.tags() == ["-LRB-", "DT", "NN", "-RRB-", "VBD", "."]
