"""``structattn translate``: input forms, documented edge cases, bad input, a parse-reading model."""
from __future__ import annotations

import io
import sys

import pytest

from structattn import cli
from structattn.heads.translation import train_bpe_tokenizer
from structattn.models.translation import build_model

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
    (["--input", "/no/such/file.en"], "cannot read --input"),
])
def test_bad_arguments_say_what_is_wrong(model_dir, monkeypatch, capsys, args, message):
    code, _, err = _run(["--model", str(model_dir), *args], "x\n", monkeypatch, capsys)
    assert code == 2 and message in err and "Traceback" not in err


def test_a_folder_without_a_model_is_refused(tmp_path, monkeypatch, capsys):
    code, _, err = _run(["--model", str(tmp_path)], "A dog.\n", monkeypatch, capsys)
    assert code == 2 and "not a translation model folder" in err


def test_an_sla_model_parses_its_input(tmp_path, monkeypatch, capsys):
    folder = _save(tmp_path / "sla", "sla")
    code, out, _ = _run(["--model", str(folder), "--beam", "1"], "A dog runs here.\nTwo cats sleep now.\n", monkeypatch,
                        capsys)
    assert code == 0 and len(out.split("\n")) == 3
