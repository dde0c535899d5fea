"""A run SIGKILLed mid-epoch resumes from its last checkpoint and ends as the uninterrupted run does."""
import json
import os
import re
import subprocess
import sys

import pytest
import torch

from fixtures import make_tiny_model, make_tiny_sst2

pytestmark = pytest.mark.slow


def _train(out_dir, model, data, cache, kill_at=None, extra=(), env=None):
    env = dict(os.environ, STRUCTATTN_DATA=str(data), STRUCTATTN_CACHE=str(cache), PYTHONHASHSEED="0", **(env or {}))
    env.pop("STRUCTATTN_KILL_AT_STEP", None)
    if kill_at is not None:
        env["STRUCTATTN_KILL_AT_STEP"] = str(kill_at)
    cmd = [sys.executable, "-m", "structattn.cli", "train", "--task", "sst2", "--model", str(model),
           "--mechanism", "wla", "--k", "2", "--output-dir", str(out_dir), "--epochs", "3", "--batch-size", "8",
           "--eval-every", "5", "--seed", "3", "--learning-rate", "1e-3", "--deterministic", "true",
           "--max-length", "32", "--stride", "8", *extra]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


def _final(out_dir):
    state = json.loads((out_dir / "trainer_state.json").read_text())
    return state


@pytest.mark.parametrize("extra", [(), ("--group-by-length", "true")], ids=["shuffled", "length-grouped"])
def test_sigkill_mid_epoch_then_resume_matches_uninterrupted(tmp_path, extra):
    model = make_tiny_model(tmp_path / "model")
    data = make_tiny_sst2(tmp_path / "data")
    cache = tmp_path / "cache"

    straight = _train(tmp_path / "a", model, data, cache, extra=(*extra, "--no-progress"))
    assert straight.returncode == 0, straight.stderr[-3000:]
    # without progress bars, one line per evaluation (steps 5, 10, 15, 20, 24) with the dev score and the best
    lines = re.findall(r"sst2 wla step ([\d,]+): dev accuracy \S+ \(best \S+ at step", straight.stderr)
    assert lines == ["5", "10", "15", "20", "24"] and "it/s" not in straight.stderr

    # 64 examples / batch 8 = 8 steps per epoch; step 13 is mid-epoch 2, after the checkpoint of step 10.
    killed = _train(tmp_path / "b", model, data, cache, kill_at=13, extra=extra)
    assert killed.returncode == -9, killed.stderr[-3000:]
    assert json.loads((tmp_path / "b" / "checkpoint" / "state.json").read_text())["step"] == 10
    assert not (tmp_path / "b" / "trainer_state.json").exists()

    resumed = _train(tmp_path / "b", model, data, cache, extra=extra)
    assert resumed.returncode == 0, resumed.stderr[-3000:]

    a, b = _final(tmp_path / "a"), _final(tmp_path / "b")
    assert a["step"] == b["step"] == 24
    assert [h["step"] for h in a["history"]] == [h["step"] for h in b["history"]]
    for ha, hb in zip(a["history"], b["history"]):
        assert ha["accuracy"] == pytest.approx(hb["accuracy"], abs=1e-9)
        # the mean training loss since the previous evaluation: the resume starts at an evaluation, so the
        # resumed run averages the same batches (a sum not reset at evaluations, or reset at the resume
        # only, would differ here)
        assert 0 < ha["train_loss"] < 10 and ha["train_loss"] == pytest.approx(hb["train_loss"], abs=2e-4)
    assert a["best"] == pytest.approx(b["best"], abs=1e-9)

    # the weights of the final checkpoints agree too
    from safetensors.torch import load_file
    wa = load_file(str(tmp_path / "a" / "checkpoint" / "model.safetensors"))
    wb = load_file(str(tmp_path / "b" / "checkpoint" / "model.safetensors"))
    assert wa.keys() == wb.keys()
    for key in wa:
        assert torch.equal(wa[key], wb[key]), key


def test_sigkill_between_best_renames_then_restart_recovers_best(tmp_path):
    """Replacing best/ takes two renames; a run killed between them leaves no best/ until the next start."""
    model = make_tiny_model(tmp_path / "model")
    data = make_tiny_sst2(tmp_path / "data")
    cache = tmp_path / "cache"
    out = tmp_path / "run"
    # No checkpoints: every start trains from step 0, so its first evaluation (step 2) always writes best/,
    # replacing the one an earlier start left (the tiny model's accuracy does not improve after step 2).
    extra = ("--epochs", "1", "--eval-every", "2", "--save-checkpoints", "false")

    first = _train(out, model, data, cache, kill_at=3, extra=extra)  # leaves best/ of step 2
    assert first.returncode == -9 and (out / "best" / "metrics.json").is_file(), first.stderr[-3000:]
    # The next start replaces best/ at step 2 and is SIGKILLed after the old one was moved aside.
    killed = _train(out, model, data, cache, extra=extra, env={"STRUCTATTN_KILL_BETWEEN_RENAMES": "best"})
    assert killed.returncode == -9, killed.stderr[-3000:]
    assert not (out / "best").exists()
    assert [p.name.split("-")[0] for p in out.glob(".best.old-*")] == [".best.old"]

    done = _train(out, model, data, cache, extra=extra)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "restored" in done.stderr
    state = _final(out)
    metrics = json.loads((out / "best" / "metrics.json").read_text())
    assert metrics["accuracy"] == state["best"]  # best/ is the model the run names as its best
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]  # no leftovers


def _to_accelerate_layout(out, hostile=None):
    """The engine's checkpoint as the earlier trainer wrote it: ``checkpoint-<step>/`` with Accelerate's save_state
    files (torch.save: optimizer.bin, random_states_0.pkl with NumPy's state as an array) and trainer_state.json."""
    import shutil

    import numpy as np

    ckpt = out / "checkpoint"
    state = json.loads((ckpt / "state.json").read_text())
    rng = json.loads((ckpt / "rng-0.json").read_text())
    old = out / f"checkpoint-{state['step']}"
    old.mkdir()
    shutil.copy(ckpt / "model.safetensors", old / "model.safetensors")
    torch.save(torch.load(ckpt / "tensors.pt", weights_only=True)["optimizer"], old / "optimizer.bin")
    py, npy = rng["python"], rng["numpy"]
    torch.save({"step": 0, "random_state": (py[0], tuple(py[1]), py[2]),
                "numpy_random_seed": (npy[0], np.asarray(npy[1], dtype=np.uint32), *npy[2:]),
                "torch_manual_seed": torch.tensor(rng["torch"], dtype=torch.uint8),
                **({"hook": hostile} if hostile is not None else {})}, old / "random_states_0.pkl")
    (old / "trainer_state.json").write_text(json.dumps({
        "global_step": state["step"], "epoch": state["epoch"], "step_in_epoch": state["step_in_epoch"],
        "best_metric": state["best"], "best_step": state["best_step"], "history": state["history"],
        "evals_without_improvement": state["evals_without_improvement"], "finished": False, "num_processes": 1,
        "kernels": state["extra"].get("kernels", [])}))
    return old


class _RunsCode:
    """Unpickling this touches ``path``: what a hostile checkpoint could do with any code."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        from pathlib import Path

        return Path.touch, (Path(self.path),)


def test_a_checkpoint_of_the_accelerate_loop_is_read_without_pickle_and_resumes_exactly(tmp_path):
    """Checkpoints of the earlier loop (Accelerate's save_state, pickled RNG files) are read with weights_only=True
    (NumPy arrays allowed, nothing else), rewritten in the engine's layout and resume exactly; a hostile
    random_states file is refused with a message, its code never run."""
    import shutil

    model = make_tiny_model(tmp_path / "model")
    data = make_tiny_sst2(tmp_path / "data")
    cache = tmp_path / "cache"
    straight = _train(tmp_path / "a", model, data, cache)
    assert straight.returncode == 0, straight.stderr[-3000:]
    killed = _train(tmp_path / "b", model, data, cache, kill_at=13)
    assert killed.returncode == -9, killed.stderr[-3000:]
    engine_ckpt = tmp_path / "b" / "checkpoint"
    shutil.copytree(engine_ckpt, tmp_path / "saved")

    marker = tmp_path / "code-ran"
    _to_accelerate_layout(tmp_path / "b", hostile=_RunsCode(marker))
    shutil.rmtree(engine_ckpt)
    (tmp_path / "b" / "settings.json").unlink()
    refused = _train(tmp_path / "b", model, data, cache)
    assert refused.returncode == 2 and "not unpickled" in refused.stderr and "Traceback" not in refused.stderr
    assert not marker.exists()

    shutil.rmtree(tmp_path / "b" / "checkpoint-10")
    shutil.copytree(tmp_path / "saved", engine_ckpt)
    old = _to_accelerate_layout(tmp_path / "b")
    shutil.rmtree(engine_ckpt)
    resumed = _train(tmp_path / "b", model, data, cache)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert not old.exists() and (engine_ckpt / "rng-0.json").is_file()
    a, b = _final(tmp_path / "a"), _final(tmp_path / "b")
    assert [(h["step"], h["accuracy"]) for h in a["history"]] == [(h["step"], h["accuracy"]) for h in b["history"]]
    from safetensors.torch import load_file
    wa = load_file(str(tmp_path / "a" / "checkpoint" / "model.safetensors"))
    wb = load_file(str(engine_ckpt / "model.safetensors"))
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
