"""A run folder or model folder an earlier structattn wrote is refused in one line naming that version and what to
do, by every loader; this version's folders and stock models load. The earlier layouts are made here from fresh
folders, by editing their files the way the earlier version wrote them."""
from __future__ import annotations

import json

import pytest
import torch
from transformers import BertConfig, BertModel

import structattn
from structattn.errors import UserError
from structattn.models.saved_type import BASE_TYPE_KEY, MODEL_TYPE
from structattn.models.saved_version import check_saved_version
from structattn.train.engine import Engine

EARLIER = r"written by structattn 0\.2\.0 or earlier|saved by structattn 0\.2\.0 or earlier"
TODO = r"structattn==0\.2\.0"


# ---------------------------------------------------------------------------------------------- run folders
@pytest.fixture
def run_folder(tmp_path):
    """A run folder with a checkpoint of this version's engine."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    engine = Engine(tmp_path / "run", seed=0, show_progress=False)
    engine.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1))
    engine.open_output()
    engine.save_checkpoint()
    return tmp_path / "run"


def _begin(out):
    Engine(out, seed=0, show_progress=False).begin({})


def test_a_run_folder_of_this_version_resumes(run_folder):
    _begin(run_folder)  # no refusal


def test_a_checkpoint_without_a_manifest_is_refused_naming_the_version(run_folder):
    (run_folder / "checkpoint" / "manifest.json").unlink()  # 0.2.0's engine wrote none
    with pytest.raises(UserError, match=EARLIER) as exc:
        _begin(run_folder)
    message = str(exc.value)
    assert "\n" not in message and "train the run again" in message and "--output-dir" in message
    assert "structattn==0.2.0" in message


def test_a_checkpoint_that_lost_its_manifest_beside_one_that_has_it_is_this_versions(run_folder):
    engine = Engine(run_folder, seed=0, show_progress=False)
    model = torch.nn.Linear(4, 2)
    engine.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1))
    engine.open_output()
    engine.save_checkpoint()  # a second checkpoint: the first becomes previous-checkpoint/
    assert (run_folder / "previous-checkpoint" / "manifest.json").is_file()
    (run_folder / "checkpoint" / "manifest.json").unlink()  # damage: the engine form-checks its files instead
    _begin(run_folder)


def test_an_accelerate_checkpoint_is_refused_as_older_than_0_1_0(tmp_path):
    old = tmp_path / "run" / "checkpoint-10"  # the sentence trainer's save_state folder before the engine
    old.mkdir(parents=True)
    (old / "trainer_state.json").write_text(json.dumps({"global_step": 10}))
    with pytest.raises(UserError, match=r"a structattn before 0\.1\.0.*" + TODO):
        _begin(tmp_path / "run")


# ---------------------------------------------------------------------------------------------- model folders
@pytest.fixture
def model_folder(tmp_path):
    """A BERT with SLA saved by this version (``model_type: structattn``)."""
    config = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                        vocab_size=100, max_position_embeddings=64)
    model = structattn.apply_mechanism(BertModel(config), "sla")
    model.save_pretrained(tmp_path / "model")
    return tmp_path / "model"


def _as_0_2_0(folder):
    """Rewrite ``config.json`` as 0.2.0 saved it: the encoder's own ``model_type``, the mechanism beside it."""
    path = folder / "config.json"
    config = json.loads(path.read_text())
    assert config["model_type"] == MODEL_TYPE
    config["model_type"] = config.pop(BASE_TYPE_KEY)
    path.write_text(json.dumps(config, indent=2))


def test_a_model_folder_of_this_version_loads(model_folder):
    model = structattn.from_pretrained(str(model_folder))
    assert structattn.mechanism_of(model).name == "sla"


def test_a_model_folder_of_0_2_0_is_refused_by_every_loader(model_folder):
    from structattn.models.encoder import load_as_saved
    from structattn.models.trained import resolve
    from structattn.run_config import RunConfig
    from structattn.train.config import TrainConfig, saved_run_config

    _as_0_2_0(model_folder)
    TrainConfig().save(model_folder / "train_config.json")  # what `structattn evaluate` reads first
    loaders = [lambda: structattn.from_pretrained(str(model_folder)), lambda: load_as_saved(str(model_folder)),
               lambda: resolve(model_folder, "reader"), lambda: saved_run_config(model_folder, RunConfig)]
    for load in loaders:
        with pytest.raises(UserError, match=EARLIER) as exc:
            load()
        assert "\n" not in str(exc.value) and "train it again" in str(exc.value) and "structattn==0.2.0" in str(exc.value)


def test_the_command_line_says_it_in_one_line(model_folder, capsys):
    from structattn.cli import main

    _as_0_2_0(model_folder)
    assert main(["evaluate", "--model", str(model_folder)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "saved by structattn 0.2.0 or earlier" in err
    assert "Traceback" not in err


def test_an_sgnet_config_of_0_2_0_is_refused_and_its_baseline_and_stock_models_pass(tmp_path):
    def folder(name, config):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps(config))
        return tmp_path / name

    with pytest.raises(UserError, match=EARLIER):
        check_saved_version(folder("sg", {"model_type": "bert", "structattn_sgnet": {"aggregation": "dual"}}))
    check_saved_version(folder("baseline", {"model_type": "bert", "structattn_sgnet": {"aggregation": "none"}}))
    check_saved_version(folder("stock", {"model_type": "bert"}))
    check_saved_version(tmp_path / "missing")  # not a folder: the loader's own error applies


def test_the_shipped_models_are_of_this_version():
    from structattn.models.trained import TRAINED_DIR

    for folder in sorted(TRAINED_DIR.iterdir()):
        check_saved_version(folder)
