"""Damaged checkpoints and model folders: one line naming the file, and a resume from the newest intact checkpoint
(saying which and how many updates are trained again) that ends as an uninterrupted run does."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from structattn.errors import UserError
from structattn.integrity import file_damage, folder_damage, write_manifest
from structattn.models.trained import TRAINED, resolve

from test_signals import _parser, _same_file, _sst2


def _safetensors(path: Path) -> Path:
    from safetensors.torch import save_file

    save_file({"w": torch.arange(64, dtype=torch.float32).reshape(8, 8)}, str(path))
    return path


def test_each_kind_of_damage_is_named(tmp_path):
    good = _safetensors(tmp_path / "model.safetensors")
    assert file_damage(good) is None
    data = good.read_bytes()
    for cut in (4, 40, len(data) - 1):
        (tmp_path / "cut.safetensors").write_bytes(data[:cut])
        assert "truncated" in file_damage(tmp_path / "cut.safetensors")
    (tmp_path / "empty.json").write_bytes(b"")
    assert file_damage(tmp_path / "empty.json").endswith("is empty")
    (tmp_path / "state.json").write_text('{"step": 3, "ep')
    assert "not valid JSON" in file_damage(tmp_path / "state.json")
    torch.save({"x": torch.ones(3)}, tmp_path / "t.pt")
    (tmp_path / "cut.pt").write_bytes((tmp_path / "t.pt").read_bytes()[:100])
    assert "not a complete torch archive" in file_damage(tmp_path / "cut.pt")


def test_the_manifest_catches_bytes_changed_in_place(tmp_path):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    _safetensors(folder / "model.safetensors")
    (folder / "state.json").write_text('{"step": 3}')
    write_manifest(folder, step=3)
    assert folder_damage(folder) is None
    data = bytearray((folder / "model.safetensors").read_bytes())
    data[-1] ^= 0xFF  # same size, same form: only the checksum tells
    (folder / "model.safetensors").write_bytes(bytes(data))
    assert file_damage(folder / "model.safetensors") is None
    assert "does not match the checksum" in folder_damage(folder)
    (folder / "state.json").unlink()
    assert folder_damage(folder, required=("state.json",)).endswith("state.json is missing")


def test_a_reader_folder_without_its_vocabulary_or_with_cut_weights_is_refused_in_one_line(tmp_path):
    shipped = TRAINED["sgnet-squad2"]
    if not shipped.shipped:
        pytest.skip("the sgnet-squad2 reader is not shipped in this install")
    assert resolve("sgnet-squad2", "reader") == shipped.folder
    copy = tmp_path / "reader"
    shutil.copytree(shipped.folder, copy)
    assert resolve(copy, "reader") == copy
    (copy / "vocab.txt").unlink()
    with pytest.raises(UserError, match=r"vocab.txt is missing .*the model folder .* is damaged; copy the folder"):
        resolve(copy, "reader")
    shutil.copy(shipped.folder / "vocab.txt", copy / "vocab.txt")
    weights = (copy / "model.safetensors").read_bytes()
    (copy / "model.safetensors").write_bytes(weights[:len(weights) // 2])
    with pytest.raises(UserError, match=r"model.safetensors is truncated"):
        resolve(copy, "reader")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    answered = subprocess.run([sys.executable, "-m", "structattn.cli", "answer", "--model", str(copy), "--question",
                               "Where is Paris?", "--context", "Paris is in France."], env=env, capture_output=True,
                              text=True, timeout=300)
    lines = answered.stderr.strip().splitlines()
    assert answered.returncode == 2 and len(lines) == 1 and "model.safetensors is truncated" in lines[0], \
        answered.stderr[-2000:]


# ---------------------------------------------------------------------------------------------- a resume
def _run(argv, out, kill_at=None):
    env = dict(os.environ, PYTHONHASHSEED="0", OMP_NUM_THREADS="1")
    env.pop("STRUCTATTN_KILL_AT_STEP", None)
    if kill_at:
        env["STRUCTATTN_KILL_AT_STEP"] = str(kill_at)
    return subprocess.run([sys.executable, "-m", "structattn.cli", *argv, "--output-dir", str(out)], env=env,
                          capture_output=True, text=True, timeout=600)


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])


def _garbage(path: Path) -> None:
    path.write_bytes(os.urandom(path.stat().st_size))


DAMAGE = {  # case -> (what is done to the killed run's folder, what the rerun must say)
    "weights-cut": (lambda out: _truncate(out / "checkpoint" / "model.safetensors"),
                    r"checkpoint/model.safetensors has [\d,]+ bytes where [\d,]+ were written.*; resuming from \S+previous-checkpoint at step 3 "
                    r"instead \(1 update is trained again\)"),
    "state-deleted": (lambda out: (out / "checkpoint" / "state.json").unlink(),
                      r"checkpoint/state.json is missing; resuming from \S+previous-checkpoint at step 3"),
    "both-damaged": (lambda out: (_garbage(out / "checkpoint" / "tensors.pt"),
                                  _truncate(out / "previous-checkpoint" / "rng-0.json")),
                     r"checkpoint/tensors.pt does not match the checksum.*no intact checkpoint is left: starting "
                     r"again from step 0 \(4 updates are trained again\)"),
    "best-cut": (lambda out: _truncate(out / "best" / "model.safetensors"),
                 r"best/model.safetensors has [\d,]+ bytes where.*starting again from step 0"),
}


@pytest.mark.slow
def test_a_damaged_checkpoint_falls_back_to_an_intact_one_and_ends_as_an_uninterrupted_run(tmp_path, monkeypatch):
    import re

    monkeypatch.setenv("STRUCTATTN_CACHE", str(tmp_path / "cache"))
    argv, compared = _parser(tmp_path)
    reference = _run(argv, tmp_path / "reference")
    assert reference.returncode == 0, reference.stderr[-3000:]
    for case, (damage, said) in DAMAGE.items():
        out = tmp_path / case
        killed = _run(argv, out, kill_at=5)  # 3 updates an epoch: checkpoint/ of step 4, previous-checkpoint/ of 3
        assert killed.returncode == -9, killed.stderr[-3000:]
        assert json.loads((out / "previous-checkpoint" / "state.json").read_text())["step"] == 3
        damage(out)
        leftovers = [out / ".settings.json.x1y2z3ab.tmp", out / ".test.trees.k9k9k9k9.tmp"]  # writes killed
        for p in leftovers:
            p.write_text("half")
        again = _run(argv, out)
        assert "removed 2 temporary file(s) of interrupted writes" in again.stderr and not any(
            p.exists() for p in leftovers)
        assert again.returncode == 0 and "Traceback" not in again.stderr, (case, again.stderr[-3000:])
        assert re.search(said, again.stderr), (case, again.stderr[-3000:])
        for name in compared:
            assert _same_file(out / name, tmp_path / "reference" / name), (case, name)
    out = tmp_path / "weights-cut"
    (out / "settings.json").write_text('{"seed": 3, "epo')
    refused = _run(argv, out)
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode == 2 and len(lines) == 1 and "settings.json is not valid JSON" in lines[0], lines


@pytest.mark.slow
def test_a_run_that_keeps_no_best_model_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    """No best/ is no damage: the run resumes from checkpoint/, not from step 0."""
    monkeypatch.setenv("STRUCTATTN_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("STRUCTATTN_DATA", os.environ.get("STRUCTATTN_DATA", ""))
    argv, _ = _sst2(tmp_path)
    argv = [*argv, "--keep-best-model", "false"]
    killed = _run(argv, tmp_path / "run", kill_at=5)
    assert killed.returncode == -9 and not (tmp_path / "run" / "best").exists(), killed.stderr[-3000:]
    again = _run(argv, tmp_path / "run")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "checkpoint at step 4" in again.stderr and "starting again" not in again.stderr, again.stderr[-3000:]
