"""``structattn train-parser``: one flag per ParserConfig field, --config read first, the summary printed."""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import pytest

from structattn.bna.model import PARSER_PRESETS, ParserConfig
from structattn.commands import train_parsing as command
from structattn.errors import UserError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bna"))
from test_parsing import write_fake_treebank  # noqa: E402


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="structattn")
    command.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["train-parser", *argv])


def test_every_field_is_a_flag(capsys):
    with pytest.raises(SystemExit):
        parse("--help")
    out = capsys.readouterr().out
    for f in dataclasses.fields(ParserConfig):  # spelled as the other commands spell it where that differs
        assert "--" + command.PARSER_FLAG_NAMES.get(f.name, f.name).replace("_", "-") in out, f.name


def test_no_flags_give_the_laptop_preset_and_full_gives_the_class_defaults():
    laptop = command.parser_config_from_args(parse())
    assert laptop == ParserConfig(**PARSER_PRESETS["laptop"])
    # the laptop preset is the shipped bna-minilm's configuration (experiments/make_models.sh)
    assert (laptop.fine_tune_encoder, laptop.d_model, laptop.heads, laptop.d_ff, laptop.label_hidden, laptop.pos,
            laptop.epochs, laptop.patience) == (False, 128, 4, 256, 128, "spacy", 12, 4)
    assert command.parser_config_from_args(parse("--preset", "full")) == ParserConfig()


def test_config_file_and_flags_override_the_preset(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"d_model": 64, "epochs": 3}))
    cfg = command.parser_config_from_args(parse("--config", str(path), "--epochs", "2"))
    assert (cfg.d_model, cfg.epochs, cfg.heads, cfg.pos) == (64, 2, 4, "spacy")  # heads and pos from the preset
    cfg = command.parser_config_from_args(parse("--preset", "full", "--config", str(path)))
    assert (cfg.d_model, cfg.epochs, cfg.heads, cfg.pos) == (64, 3, 8, "none")


def test_help_gives_the_presets_values(capsys):
    with pytest.raises(SystemExit):
        parse("--help")
    out = " ".join(capsys.readouterr().out.split())
    assert "--preset {laptop,full}" in out and "int (default 128)" in out  # --d-model under the laptop preset


def test_unknown_preset_is_refused(capsys):
    with pytest.raises(SystemExit) as exc:
        parse("--preset", "paper")
    assert exc.value.code == 2 and "invalid choice: 'paper'" in capsys.readouterr().err


def test_flags_are_typed_and_lists_comma_separated():
    cfg = command.parser_config_from_args(parse(
        "--layers", "bimsa, nsa", "--d-model", "64", "--learning-rate", "2e-3", "--fine-tune-encoder", "false",
        "--model", "none", "--output-dir", "runs/x"))
    assert cfg.layers == ["bimsa", "nsa"] and cfg.d_model == 64 and cfg.learning_rate == 2e-3
    assert cfg.fine_tune_encoder is False and cfg.encoder == "none" and cfg.output_dir == "runs/x"
    assert command.parser_config_from_args(parse("--layers", "none")).layers is None


def test_config_file_is_read_first_and_flags_override_it(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"variant": "sa", "d_model": 32, "layers": ["sa", "nsa"], "seed": 7}))
    cfg = command.parser_config_from_args(parse("--config", str(path), "--seed", "8"))
    assert (cfg.variant, cfg.d_model, cfg.layers, cfg.seed) == ("sa", 32, ["sa", "nsa"], 8)


@pytest.mark.parametrize("argv, message", [
    (["--d-model", "big"], "d_model='big' is not a valid"),
    (["--fine-tune-encoder", "maybe"], "fine_tune_encoder='maybe'"),
])
def test_bad_values_name_the_field(argv, message):
    with pytest.raises(UserError, match=message):
        command.parser_config_from_args(parse(*argv))


def test_bad_config_file_is_a_user_error(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"d_modle": 32}))
    with pytest.raises(UserError, match=r"unknown key\(s\) d_modle"):
        command.parser_config_from_args(parse("--config", str(path)))


def test_run_trains_and_prints_the_summary(tmp_path, monkeypatch, capsys):
    import torch

    torch.set_num_threads(1)
    monkeypatch.setenv("STRUCTATTN_DATA", str(write_fake_treebank(tmp_path / "data")))
    monkeypatch.setenv("STRUCTATTN_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "run"
    args = parse("--model", "none", "--d-model", "16", "--heads", "2", "--d-head", "8", "--d-ff", "32",
                 "--num-layers", "2", "--label-hidden", "16", "--char-dim", "8", "--word-dim", "16",
                 "--epochs", "1", "--batch-size", "4", "--max-train-examples", "8", "--max-eval-examples", "4", "--pos", "none",
                 "--output-dir", str(out), "--no-progress")
    args.argv = ["train-parser", "--output-dir", str(out)]
    assert command.run(args) == 0
    printed = capsys.readouterr().out
    summary = json.loads(printed[printed.index("{\n"):])
    assert summary["config"]["d_model"] == 16 and summary["command"] == args.argv
    assert summary["test"]["trees"] == 4 and (out / "test.trees").is_file() and (out / "best").is_dir()
    assert "history" not in summary and "history" in json.loads((out / "summary.json").read_text())


TINY_FLAGS = ["--model", "none", "--d-model", "16", "--heads", "2", "--d-head", "8", "--d-ff", "32",
              "--num-layers", "2", "--label-hidden", "16", "--char-dim", "8", "--word-dim", "16", "--epochs", "1",
              "--batch-size", "2", "--pos", "none", "--no-progress"]


def test_own_train_and_dev_files(tmp_path, monkeypatch, capsys):
    """--train/--dev: the tiny-treebank example of docs/parsing.md; the sample is not needed (STRUCTATTN_DATA is empty)."""
    import torch

    torch.set_num_threads(1)
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("STRUCTATTN_DATA", str(tmp_path / "empty"))
    monkeypatch.setenv("STRUCTATTN_CACHE", str(tmp_path / "cache"))
    train, dev = tmp_path / "train.txt", tmp_path / "dev.txt"
    train.write_text("(S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .))\n(S (NP (PRP It)) (VP (VBD purred)) (. .))\n"
                     "(S (NP (DT A) (NN dog)) (VP (VBD ran) (PP (IN to) (NP (DT the) (NN mat)))) (. .))\n")
    dev.write_text("(S (NP (DT The) (NN dog)) (VP (VBD sat)) (. .))\n")
    out = tmp_path / "run"
    args = parse("--train", str(train), "--dev", str(dev), "--output-dir", str(out), *TINY_FLAGS)
    assert command.run(args) == 0
    printed = capsys.readouterr().out
    assert "train: using 3 of 3 trees" in printed and "dev: using 1 of 1 trees" in printed
    summary = json.loads(printed[printed.index("{\n"):])
    assert summary["test"] is None and summary["steps"] == 2
    assert summary["data"]["train"]["path"] == str(train.resolve()) and set(summary["data"]) == {"train", "dev"}
    assert (out / "dev.trees").is_file() and not (out / "test.trees").exists()


def test_test_file_without_train_is_refused_through_the_cli(tmp_path, capsys):
    from structattn import cli

    assert cli.main(["train-parser", "--test", str(tmp_path / "t.txt"), "--output-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "give --train FILE and --dev FILE (and optionally --test FILE)" in err and "Traceback" not in err
