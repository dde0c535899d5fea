"""``structattn translate``: input forms, documented edge cases, bad input, a parse-reading model."""
from __future__ import annotations

import io
import sys

import pytest

from structattn import cli
from structattn.translation.data import train_bpe_tokenizer
from structattn.translation.model import build_model

LINES = ["A dog runs here.", "Two cats sleep now.", "A big dog and a small cat."] * 20
GERMAN = ["Ein Hund läuft hier.", "Zwei Katzen schlafen jetzt.", "Ein großer Hund und eine kleine Katze."] * 20


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return _save(tmp_path_factory.mktemp("nmt") / "hybrid", "hybrid_gate")


def _save(folder, variant):
    tokenizer = train_bpe_tokenizer(LINES + GERMAN, vocab_size=150)
    model = build_model(tokenizer, "micro", variant, seed=0).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _run(args, stdin: str, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8")), encoding="utf-8"))
    code = cli.main(["translate", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_one_output_line_per_input_line_and_empty_lines_stay_empty(model_dir, monkeypatch, capsys):
    code, out, _ = _run(["--model", str(model_dir), "--beam", "2"], "A dog runs.\n\nTwo cats sleep.\n", monkeypatch,
                        capsys)
    assert code == 0
    lines = out.split("\n")
    assert len(lines) == 4 and lines[-1] == "" and lines[1] == ""


def test_empty_input_gives_empty_output(model_dir, monkeypatch, capsys, tmp_path):
    code, out, _ = _run(["--model", str(model_dir)], "", monkeypatch, capsys)
    assert (code, out) == (0, "")
    target = tmp_path / "out.de"
    code, _, _ = _run(["--model", str(model_dir), "--output", str(target)], "", monkeypatch, capsys)
    assert code == 0 and target.read_text() == ""


def test_a_line_over_the_position_limit_is_cut_and_counted(model_dir, monkeypatch, capsys, tmp_path):
    source = tmp_path / "in.en"
    source.write_text("A dog runs here. " * 40 + "\nA cat.\n", encoding="utf-8")
    code, out, err = _run(["--model", str(model_dir), "--input", str(source), "--beam", "1"], "", monkeypatch, capsys)
    assert code == 0 and len(out.split("\n")) == 3
    assert "1 line(s) longer than the model's 63 source pieces were cut" in err


@pytest.mark.parametrize("args, message", [
    (["--beam", "0"], "--beam must be at least 1"),
    (["--input", "/no/such/file.en"], "input file /no/such/file.en does not exist"),
])
def test_bad_arguments_say_what_is_wrong(model_dir, monkeypatch, capsys, args, message):
    code, _, err = _run(["--model", str(model_dir), *args], "x\n", monkeypatch, capsys)
    assert code == 2 and message in err and "Traceback" not in err


def test_a_folder_without_a_model_is_refused(tmp_path, monkeypatch, capsys):
    code, _, err = _run(["--model", str(tmp_path)], "A dog.\n", monkeypatch, capsys)
    assert code == 2 and "not a translation model folder" in err


class _UnreadableStdin:
    """Standard input that must not be read (a terminal or pipe that never ends)."""

    buffer = property(lambda self: self)

    def read(self, *args):
        raise AssertionError("standard input was read before the model was checked")


@pytest.mark.parametrize("stdin", ["empty", "unread"])
def test_a_missing_model_fails_before_the_input_is_read(tmp_path, monkeypatch, capsys, stdin):
    """``translate --model DOES_NOT_EXIST < /dev/null`` used to exit 0 without looking at the model."""
    missing = tmp_path / "DOES_NOT_EXIST"
    if stdin == "empty":
        code, out, err = _run(["--model", str(missing)], "", monkeypatch, capsys)
    else:
        monkeypatch.setattr(sys, "stdin", _UnreadableStdin())
        code = cli.main(["translate", "--model", str(missing)])
        out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.startswith(f"structattn translate: error: {missing}: no such model folder; give the final/")
    assert "Traceback" not in err


def test_non_utf8_input_names_source_and_line(model_dir, tmp_path, monkeypatch, capsys):
    data = "A dog runs.\nA caf\xe9.\n".encode("latin-1")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    assert cli.main(["translate", "--model", str(model_dir)]) == 2
    last = capsys.readouterr().err.splitlines()[-1]  # after the model's loading report
    assert last.startswith("structattn translate: error: <stdin>:2: not valid UTF-8 (byte 0xe9 at byte 6 of the line)")
    source = tmp_path / "in.en"
    source.write_bytes(data)
    assert cli.main(["translate", "--model", str(model_dir), "--input", str(source)]) == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith(f"structattn translate: error: {source}:2: not valid")


def test_byte_order_mark_is_dropped(model_dir, monkeypatch, capsys):
    code, with_bom, _ = _run(["--model", str(model_dir), "--beam", "1"], "\ufeffA dog runs.\n", monkeypatch, capsys)
    assert code == 0
    assert with_bom == _run(["--model", str(model_dir), "--beam", "1"], "A dog runs.\n", monkeypatch, capsys)[1]


def test_an_sla_model_parses_its_input(tmp_path, monkeypatch, capsys):
    folder = _save(tmp_path / "sla", "sla")
    code, out, _ = _run(["--model", str(folder), "--beam", "1"], "A dog runs here.\nTwo cats sleep now.\n", monkeypatch,
                        capsys)
    assert code == 0 and len(out.split("\n")) == 3
