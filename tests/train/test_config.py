import argparse
import json

import pytest

from structattn.errors import UserError
from structattn.run_config import RunConfig
from structattn.train.config import add_config_arguments, config_from_args


def _args(argv):
    p = argparse.ArgumentParser()
    add_config_arguments(p, RunConfig)
    return p.parse_args(argv)


def test_round_trip(tmp_path):
    cfg = RunConfig(task="cola", mechanism="sla", m=4, learning_rate=2e-5)
    cfg.save(tmp_path / "c.json")
    assert RunConfig.load(tmp_path / "c.json") == cfg


def test_unknown_key_names_it(tmp_path):
    (tmp_path / "c.json").write_text(json.dumps({"task": "sst2", "learnig_rate": 1e-5}))
    with pytest.raises(UserError, match=r"c.json: unknown key\(s\) learnig_rate"):
        RunConfig.load(tmp_path / "c.json")


def test_bad_value_names_key():
    with pytest.raises(UserError, match="epochs='three'"):
        RunConfig.from_dict({"epochs": "three"})


def test_invalid_json(tmp_path):
    (tmp_path / "c.json").write_text("{task: sst2")
    with pytest.raises(UserError, match="not valid JSON"):
        RunConfig.load(tmp_path / "c.json")


def test_flags_override_file(tmp_path):
    RunConfig(task="cola", seed=7).save(tmp_path / "c.json")
    cfg = config_from_args(_args(["--config", str(tmp_path / "c.json"), "--seed", "3", "--m", "4",
                                  "--deterministic", "true"]), RunConfig)
    assert (cfg.task, cfg.seed, cfg.m, cfg.deterministic) == ("cola", 3, 4, True)
    assert config_from_args(_args(["--m", "none"]), RunConfig).m is None


def test_precision_is_checked_and_part_of_the_key():
    from structattn.errors import UserError
    from structattn.train.config import check_precision, config_key, result_fields

    assert result_fields(RunConfig())["precision"] == "fp32"
    assert result_fields(RunConfig(precision="bf16"))["precision"] == "bf16"
    assert config_key(RunConfig(precision="bf16")) != config_key(RunConfig())
    check_precision("bf16", on_cuda=False)
    check_precision("fp16", on_cuda=True)
    with pytest.raises(UserError, match="unknown precision 'fp8'; valid: fp32, bf16, fp16"):
        check_precision("fp8", on_cuda=True)
    with pytest.raises(UserError, match="fp16 needs a CUDA GPU"):
        check_precision("fp16", on_cuda=False)


def test_a_saved_config_with_the_unread_log_every_key_still_loads(tmp_path):
    """``log_every`` is no field (nothing read it); the results lines that carry it in their config load."""
    from pathlib import Path

    results = Path(__file__).resolve().parents[2] / "results/cola.jsonl"
    configs = [line["config"] for line in map(json.loads, results.read_text(encoding="utf-8").splitlines())
               if "log_every" in line.get("config", {})]
    assert configs, "no results line of cola.jsonl records log_every any more: test another file"
    assert RunConfig.from_dict(configs[0]).task == "cola"
    assert RunConfig.from_dict({"task": "cola", "log_every": 10}) == RunConfig(task="cola")


def test_the_core_config_holds_no_systems_options_and_the_run_config_holds_them_all():
    """Each system's options live in its folder; the command line's configuration is the core's and all of them."""
    import dataclasses

    from structattn.finetuning.config import FinetuneConfig, LisaOptions
    from structattn.sgnet.config import SGNetOptions, SGNetTrainConfig
    from structattn.train.config import TrainConfig

    def names(cls):
        return {f.name for f in dataclasses.fields(cls)}

    core, lisa, sgnet = names(TrainConfig), names(LisaOptions), names(SGNetOptions)
    assert lisa == {"lisa_weight"} and {"sgnet", "sgnet_alpha", "sgnet_init", "model_parts"} <= sgnet
    assert not core & (lisa | sgnet)
    assert names(FinetuneConfig) == core | lisa and names(SGNetTrainConfig) == core | sgnet
    assert names(RunConfig) == core | lisa | sgnet


def test_a_config_is_narrowed_to_a_systems_own_and_an_option_it_does_not_read_is_refused():
    from structattn.finetuning.config import FinetuneConfig
    from structattn.sgnet.config import SGNetTrainConfig
    from structattn.train.config import TrainConfig, narrowed

    run = RunConfig(task="cola", mechanism="sla", m=4, lisa_weight=0.5, seed=3)
    mine = narrowed(run, FinetuneConfig)
    assert type(mine) is FinetuneConfig and (mine.task, mine.m, mine.lisa_weight, mine.seed) == ("cola", 4, 0.5, 3)
    assert narrowed(TrainConfig(task="cola"), SGNetTrainConfig).sgnet == "none"  # the system's defaults
    assert narrowed(mine, RunConfig) == run  # widening gives the other systems' defaults back
    with pytest.raises(UserError, match=r"--lisa-weight 0\.5: not an option of SG-Net .*leave it at its default"):
        narrowed(run, SGNetTrainConfig)
    with pytest.raises(UserError, match=r"--sgnet 'dual'.*not an option of the fine-tuning"):
        narrowed(RunConfig(sgnet="dual"), FinetuneConfig)


def test_a_run_key_is_the_same_whichever_configuration_class_records_it():
    """Results lines key runs over every system's options: a system's own config, widened, keys the same."""
    from structattn.sgnet.config import SGNetTrainConfig
    from structattn.train.config import config_key, narrowed

    run = RunConfig(task="squad2", sgnet="dual", max_length=384)
    assert config_key(narrowed(narrowed(run, SGNetTrainConfig), RunConfig)) == config_key(run)
    assert config_key(run) != config_key(RunConfig(task="squad2", sgnet="dual", max_length=384, lisa_weight=1.0))
