"""The command list: every name has its module and shows in --help; no dead names."""
from __future__ import annotations

import importlib.util

import pytest

from structattn import cli


@pytest.mark.parametrize("name", cli.COMMANDS)
def test_every_command_name_has_a_module(name):
    assert importlib.util.find_spec(f"structattn.commands.{name}") is not None, name


def test_help_lists_exactly_the_commands(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert all(name.replace("_", "-") in out for name in cli.COMMANDS)  # train_parser -> train-parser
    assert "bench" not in out  # benchmarks are scripts (make bench), not a command


@pytest.mark.parametrize("command", ["train-nmt", "train-parser"])
def test_fp16_on_a_cpu_is_one_clear_line(command, tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("fp16 is allowed on a CUDA machine")
    out = tmp_path / "run"
    assert cli.main([command, "--precision", "fp16", "--output-dir", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"structattn {command}: error: --precision fp16 needs a CUDA GPU") and "bf16" in err
    assert not out.exists()
