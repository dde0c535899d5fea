"""Pieces of the training engine that need no run: how batches are dealt to processes, the settings check."""
import json
from types import SimpleNamespace

import pytest

from structattn.errors import UserError
from structattn.train.engine import Engine, settings_differences


def _engine(processes: int, rank: int, grad_accum: int = 1) -> Engine:
    engine = Engine.__new__(Engine)  # no Accelerator: only the process count and rank are read
    engine.acc = SimpleNamespace(num_processes=processes, process_index=rank)
    engine.grad_accum = grad_accum
    return engine


def test_each_process_takes_every_nth_batch_and_the_last_round_is_completed():
    batches = [[0, 1], [2, 3], [4, 5], [6, 7], [8]]
    assert _engine(1, 0).local_batches(batches) == batches
    assert _engine(2, 0).local_batches(batches) == [[0, 1], [4, 5], [8]]
    assert _engine(2, 1).local_batches(batches) == [[2, 3], [6, 7], [0, 1]]  # completed from the start
    assert _engine(3, 2).local_batches(batches) == [[4, 5], [0, 1]]
    assert [_engine(n, 0, a).steps_per_epoch(5) for n, a in ((1, 1), (2, 1), (3, 1), (1, 2), (2, 2))] == \
        [5, 3, 2, 3, 2]


def test_settings_differences_name_each_key_and_absent_ones():
    assert settings_differences({"seed": 1, "lr": 0.1}, {"seed": 1, "lr": 0.1}) == []
    assert settings_differences({"seed": 1, "old": True}, {"seed": 2, "new": (1, 2)}) == [
        "new: '<absent>' -> [1, 2]", "old: True -> '<absent>'", "seed: 1 -> 2"]


def test_a_setting_added_since_the_run_began_is_no_difference_at_its_default():
    saved = {"seed": 1}  # written before "loss" existed
    assert settings_differences(saved, {"seed": 1, "loss": "margin"}, {"loss": "margin"}) == []
    assert settings_differences(saved, {"seed": 1, "loss": "crf"}, {"loss": "margin"}) == [
        "loss: '<absent>' -> 'crf'"]
    assert settings_differences(saved, {"seed": 1, "loss": "margin"}) == ["loss: '<absent>' -> 'margin'"]
    # a saved value is compared as it is, whatever the default
    assert settings_differences({"seed": 1, "loss": "crf"}, {"seed": 1, "loss": "margin"}, {"loss": "margin"}) == [
        "loss: 'crf' -> 'margin'"]


def test_a_run_started_before_a_parser_setting_existed_resumes(tmp_path):
    from structattn.bna.config import ParserConfig
    from structattn.bna.trainer import settings
    from structattn.train.engine import config_defaults

    config = ParserConfig(output_dir=str(tmp_path / "run"))
    now = settings(config, {"treebank": "t"})
    old = {k: v for k, v in now.items() if k != "loss"}
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "settings.json").write_text(json.dumps(old))
    Engine(tmp_path / "run", seed=0, show_progress=False).begin(now, config_defaults(config))
    config.loss = "crf"
    with pytest.raises(UserError, match=r"loss: '<absent>' -> 'crf'"):
        Engine(tmp_path / "run", seed=0, show_progress=False).begin(settings(config, {"treebank": "t"}),
                                                                     config_defaults(config))


def test_a_folder_with_other_settings_is_refused_before_anything_runs(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "settings.json").write_text('{"seed": 1}')
    with pytest.raises(UserError, match=r"holds a run with other settings \(seed: 1 -> 0\).*--output-dir"):
        Engine(tmp_path / "run", seed=0, show_progress=False).begin({"seed": 0})


def test_resume_settings_leave_out_each_familys_result_neutral_fields():
    """One set of result-neutral fields serves every configuration: what each family's settings.json recorded
    before stays what it records (a run resumes under the new code)."""
    import dataclasses

    from structattn.bna.model import ParserConfig
    from structattn.run_config import RunConfig
    from structattn.train.engine import resume_settings
    from structattn.translation.trainer import NMTConfig

    def left_out(config):
        return set(dataclasses.asdict(config)) - set(resume_settings(config))

    assert left_out(NMTConfig()) == {"output_dir", "threads", "checkpoint_every"}
    assert left_out(ParserConfig()) == {"output_dir"}
    assert left_out(RunConfig()) == {"output_dir", "eval_batch_size", "save_checkpoints",
                                       "checkpoint_every", "keep_best_model", "extra", "n_best", "preprocess_workers"}
