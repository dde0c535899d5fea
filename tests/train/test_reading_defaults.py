"""The reading tasks' defaults (what learns with the default encoder) apply where neither a flag nor --config
sets a field; the sentence tasks keep the field defaults."""
from __future__ import annotations

import argparse
import json

import pytest

from structattn.errors import UserError
from structattn.run_config import RunConfig
from structattn.train.config import READING_DEFAULTS, add_config_arguments, config_from_args


def _args(argv):
    p = argparse.ArgumentParser()
    add_config_arguments(p, RunConfig)
    return p.parse_args(argv)


@pytest.mark.parametrize("task, family", [("squad2", "span_qa"), ("squad11", "span_qa"), ("race", "multiple_choice"),
                                          ("mctest500", "multiple_choice")])
def test_reading_tasks_get_their_family_defaults(task, family):
    cfg = config_from_args(_args(["--task", task]), RunConfig)
    for name, value in READING_DEFAULTS[family].items():
        assert getattr(cfg, name) == value
    assert cfg == RunConfig.for_task(task)


def test_the_defaults_learn_with_the_default_encoder():
    span, mc = READING_DEFAULTS["span_qa"], READING_DEFAULTS["multiple_choice"]
    assert (span["max_length"], span["stride"], span["learning_rate"]) == (384, 128, 1e-4)
    assert (mc["max_length"], mc["pool"], mc["learning_rate"]) == (384, "option", 1e-4)


def test_reading_updates_keep_32_examples_in_passes_of_4_sequences():
    span, mc = READING_DEFAULTS["span_qa"], READING_DEFAULTS["multiple_choice"]
    assert span["batch_size"] * span["grad_accum"] == 32 and span["batch_size"] == 4
    assert mc["batch_size"] * mc["grad_accum"] == 32 and mc["batch_size"] * 4 == 4   # 4 options per question
    cfg = config_from_args(_args(["--task", "squad2"]), RunConfig)
    assert (cfg.batch_size, cfg.grad_accum, cfg.eval_batch_size) == (4, 8, 16)


@pytest.mark.parametrize("flags, want", [(["--batch-size", "16"], (16, 1)), (["--grad-accum", "2"], (32, 2)),
                                         (["--batch-size", "8", "--grad-accum", "4"], (8, 4))])
def test_a_given_batch_flag_keeps_the_update_size_recorded_commands_meant(flags, want):
    """`--batch-size 16` alone (as the recorded reading commands give it) is still 16 examples per update, not the
    family's 16 x 4: the batch fields take the family defaults together or not at all."""
    cfg = config_from_args(_args(["--task", "squad2", *flags]), RunConfig)
    assert (cfg.batch_size, cfg.grad_accum) == want
    assert cfg.eval_batch_size == 16                      # result-neutral, not a batch field
    assert (RunConfig.for_task("race_m", batch_size=4).batch_size, RunConfig.for_task("race_m", batch_size=4)
            .grad_accum) == (4, 1)


def test_flags_and_config_file_win_over_the_family_defaults(tmp_path):
    cfg = config_from_args(_args(["--task", "squad2", "--max-length", "256", "--learning-rate", "3e-5"]), RunConfig)
    assert (cfg.max_length, cfg.learning_rate, cfg.stride) == (256, 3e-5, 128)
    (tmp_path / "c.json").write_text(json.dumps({"task": "race_m", "pool": "first"}))
    cfg = config_from_args(_args(["--config", str(tmp_path / "c.json")]), RunConfig)
    assert (cfg.pool, cfg.max_length) == ("first", 384)
    assert RunConfig.for_task("race_m", pool="mean").pool == "mean"


def test_sentence_tasks_keep_the_field_defaults():
    assert config_from_args(_args(["--task", "cola"]), RunConfig) == RunConfig(task="cola")
    assert config_from_args(_args([]), RunConfig) == RunConfig()


def test_an_unknown_task_still_fails_naming_the_valid_ones():
    with pytest.raises(UserError, match="unknown task 'squad3'"):
        config_from_args(_args(["--task", "squad3"]), RunConfig)


def test_help_names_each_family_default(capsys):
    p = argparse.ArgumentParser()
    add_config_arguments(p, RunConfig)
    text = " ".join(p.format_help().split())
    assert "--max-length MAX_LENGTH longest input in sub-word tokens" in text
    assert "int (default 128; span QA 384; multiple choice 384)" in text
    assert "(default 'first'; multiple choice 'option')" in text and "docs/reading.md" in text
