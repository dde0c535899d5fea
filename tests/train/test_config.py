import argparse
import json

import pytest

from structattn.errors import UserError
from structattn.train.config import TrainConfig, add_config_arguments, config_from_args


def _args(argv):
    p = argparse.ArgumentParser()
    add_config_arguments(p)
    return p.parse_args(argv)


def test_round_trip(tmp_path):
    cfg = TrainConfig(task="cola", mechanism="sla", m=4, learning_rate=2e-5)
    cfg.save(tmp_path / "c.json")
    assert TrainConfig.load(tmp_path / "c.json") == cfg


def test_unknown_key_names_it(tmp_path):
    (tmp_path / "c.json").write_text(json.dumps({"task": "sst2", "learnig_rate": 1e-5}))
    with pytest.raises(UserError, match=r"c.json: unknown key\(s\) learnig_rate"):
        TrainConfig.load(tmp_path / "c.json")


def test_bad_value_names_key():
    with pytest.raises(UserError, match="epochs='three'"):
        TrainConfig.from_dict({"epochs": "three"})


def test_invalid_json(tmp_path):
    (tmp_path / "c.json").write_text("{task: sst2")
    with pytest.raises(UserError, match="not valid JSON"):
        TrainConfig.load(tmp_path / "c.json")


def test_flags_override_file(tmp_path):
    TrainConfig(task="cola", seed=7).save(tmp_path / "c.json")
    cfg = config_from_args(_args(["--config", str(tmp_path / "c.json"), "--seed", "3", "--m", "4",
                                  "--deterministic", "true"]))
    assert (cfg.task, cfg.seed, cfg.m, cfg.deterministic) == ("cola", 3, 4, True)
    assert config_from_args(_args(["--m", "none"])).m is None


def test_precision_is_checked_and_part_of_the_key():
    from structattn.errors import UserError
    from structattn.train.config import check_precision, config_key, result_fields

    assert result_fields(TrainConfig())["precision"] == "fp32"
    assert result_fields(TrainConfig(precision="bf16"))["precision"] == "bf16"
    assert config_key(TrainConfig(precision="bf16")) != config_key(TrainConfig())
    check_precision("bf16", on_cuda=False)
    check_precision("fp16", on_cuda=True)
    with pytest.raises(UserError, match="unknown precision 'fp8'; valid: fp32, bf16, fp16"):
        check_precision("fp8", on_cuda=True)
    with pytest.raises(UserError, match="fp16 needs a CUDA GPU"):
        check_precision("fp16", on_cuda=False)


def test_a_saved_config_with_the_unread_log_every_key_still_loads(tmp_path):
    """``log_every`` is no field (nothing read it); the train_config.json files and results lines that carry it load."""
    from pathlib import Path

    shipped = Path(__file__).resolve().parents[2] / "src/structattn/trained/sgnet-squad2/train_config.json"
    assert "log_every" in json.loads(shipped.read_text(encoding="utf-8"))
    assert TrainConfig.load(shipped).task == "squad2"
    assert TrainConfig.from_dict({"task": "cola", "log_every": 10}) == TrainConfig(task="cola")
