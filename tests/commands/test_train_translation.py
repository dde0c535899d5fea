"""``structattn train-translation``: the laptop preset by default, ``--preset full`` for the full recipe, and
``--config`` and flags over either."""
from __future__ import annotations

import argparse
import json

import pytest

from structattn.commands import train_translation as command
from structattn.config_io import dataclass_from_args
from structattn.translation.trainer import NMT_PRESETS, NMTConfig


def config(*argv: str) -> NMTConfig:
    parser = argparse.ArgumentParser(prog="structattn")
    command.add_parser(parser.add_subparsers(dest="command"))
    return dataclass_from_args(parser.parse_args(["train-translation", *argv]), NMTConfig, NMT_PRESETS)


def test_default_is_the_laptop_preset():
    cfg = config()
    assert (cfg.max_updates, cfg.warmup, cfg.lr_decay, cfg.eval_every, cfg.average_last) == (800, 400, "linear", 200, 2)
    assert (cfg.size, cfg.learning_rate, cfg.max_tokens) == ("tiny", 5e-3, 4096)  # the rest: the recipe's own


def test_full_preset_is_the_class_defaults():
    assert config("--preset", "full") == NMTConfig()
    assert NMTConfig().max_updates == 8000 and NMTConfig().warmup == 2000
    assert NMTConfig().lr_decay == "inverse_sqrt"


def test_config_file_then_flags_override_the_preset(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"max_updates": 300, "seed": 4}))
    cfg = config("--config", str(path), "--seed", "5")
    assert (cfg.max_updates, cfg.warmup, cfg.seed) == (300, 400, 5)


def test_unknown_preset_is_refused(capsys):
    with pytest.raises(SystemExit) as exc:
        config("--preset", "huge")
    assert exc.value.code == 2 and "invalid choice: 'huge'" in capsys.readouterr().err


def test_help_lists_what_each_preset_sets(capsys):
    with pytest.raises(SystemExit):
        config("--help")
    out = " ".join(capsys.readouterr().out.split())
    assert "laptop: max_updates=800, warmup=400, lr_decay='linear', eval_every=200, average_last=2" in out
    assert "full: max_updates=8000, warmup=2000, lr_decay='inverse_sqrt', eval_every=500, average_last=5" in out
    assert "--max-steps MAX_STEPS optimizer updates of the run: int (default 800)" in out
