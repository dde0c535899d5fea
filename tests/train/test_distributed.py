"""Several CPU processes (gloo, launched with torchrun): gradients, and the whole trainer.

The trainer tests run ``structattn train`` under ``torch.distributed.run`` with 2 processes on the tiny
model and data of :mod:`fixtures`; every launch has a time-out, so a hang (ranks stopping at different
steps) fails the test instead of blocking the suite.
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fixtures import make_tiny_model, make_tiny_sst2

pytestmark = pytest.mark.slow
HERE = Path(__file__).parent
LAUNCH_TIMEOUT_S = 240


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun(nproc: int) -> list:
    return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc),
            "--master_port", str(_free_port())]


def _launch(cmd, cwd, env=None) -> subprocess.CompletedProcess:
    """Run ``cmd`` in its own process group; on time-out kill the whole group and fail."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("STRUCTATTN_KILL")}  # faults: only when asked
    full.update(PYTHONPATH=str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", ""), MASTER_ADDR="127.0.0.1",
                OMP_NUM_THREADS="1", **(env or {}))
    proc = subprocess.Popen(cmd, env=full, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=LAUNCH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"hung for {LAUNCH_TIMEOUT_S}s (processes out of step?)\n{out[-2000:]}\n{err[-4000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _run(cmd, tmp_path):
    res = _launch(cmd, tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-4000:]


def test_two_processes_match_one(tmp_path):
    model = make_tiny_model(tmp_path / "model")
    script = str(HERE / "ddp_grads.py")
    _run([sys.executable, script, str(model), str(tmp_path / "one.pt")], tmp_path)
    # torchrun sets RANK/WORLD_SIZE; Accelerator(cpu=True) then joins a gloo process group.
    _run(_torchrun(2) + [script, str(model), str(tmp_path / "two.pt")], tmp_path)
    one, two = torch.load(tmp_path / "one.pt"), torch.load(tmp_path / "two.pt")
    assert one["world"] == 1 and two["world"] == 2
    assert one["grads"].keys() == two["grads"].keys()
    gate_keys = [k for k in one["grads"] if "structattn_gate" in k]
    assert gate_keys, "the SLA gates should receive gradients"
    for key, g1 in one["grads"].items():
        g2 = two["grads"][key]
        assert torch.allclose(g1, g2, rtol=1e-4, atol=1e-6), f"{key}: max diff {(g1 - g2).abs().max().item()}"


# ---------------------------------------------------------------------------------------------- whole trainer

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    return {"model": make_tiny_model(root / "model"), "data": make_tiny_sst2(root / "data"), "cache": root / "cache"}


def _train(tiny, out_dir, nproc=2, kill_at=None, extra=()):
    env = {"STRUCTATTN_DATA": str(tiny["data"]), "STRUCTATTN_CACHE": str(tiny["cache"]), "PYTHONHASHSEED": "0"}
    if kill_at is not None:
        env["STRUCTATTN_KILL_AT_STEP"] = str(kill_at)
    train = ["-m", "structattn.cli", "train", "--task", "sst2", "--model", str(tiny["model"]), "--mechanism", "wla",
             "--k", "2", "--output-dir", str(out_dir), "--batch-size", "8", "--seed", "3", "--learning-rate", "1e-3",
             "--deterministic", "true", "--max-length", "32", "--stride", "8", *extra]
    launcher = _torchrun(nproc) if nproc > 1 else [sys.executable]
    return _launch(launcher + train, out_dir.parent, env)


def _summaries(stdout: str) -> list[dict]:
    """The JSON summaries printed on stdout (the main process prints one at the end of `structattn train`)."""
    decoder, found, pos = json.JSONDecoder(), [], 0
    while (start := stdout.find("{\n", pos)) >= 0:
        obj, pos = decoder.raw_decode(stdout, start)
        found.append(obj)
    return found


def test_two_processes_stop_early_at_the_same_step(tiny, tmp_path):
    # patience 1: the first evaluation without improvement stops the run. Before the fix only the main
    # process evaluated; the other counted "no improvement", stopped at the first evaluation, and the
    # main process waited for it forever.
    res = _train(tiny, tmp_path / "run", extra=("--epochs", "10", "--eval-every", "2", "--patience", "1"))
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-4000:]
    summaries = _summaries(res.stdout)
    assert len(summaries) == 1  # the main process prints the run's summary once
    state = json.loads((tmp_path / "run" / "trainer_state.json").read_text())
    # 64 examples, batch 8 per process, 2 processes: 4 steps per epoch, 40 in 10 epochs.
    assert state["finished"] and state["evals_without_improvement"] == 1 and state["step"] < 40
    summary = summaries[0]
    assert (summary["steps"], summary["best_step"], summary["best"]) == \
        (state["step"], state["best_step"], state["best"])
    # every other process ends at the same step with the same best
    other = re.findall(r"process 1 of 2: stopped at step (\d+), best step (-?\d+), best (\S+)", res.stderr)
    assert other == [(str(state["step"]), str(state["best_step"]), str(state["best"]))]
    ckpt = tmp_path / "run" / "checkpoint"
    assert json.loads((ckpt / "state.json").read_text())["step"] == state["step"]
    assert (ckpt / "rng-0.json").is_file() and (ckpt / "rng-1.json").is_file()
    assert not list(ckpt.glob("*.pkl"))


def test_two_processes_sigkill_then_resume_matches_uninterrupted(tiny, tmp_path):
    extra = ("--epochs", "3", "--eval-every", "5")
    straight = _train(tiny, tmp_path / "a", extra=extra)
    assert straight.returncode == 0, straight.stdout[-2000:] + straight.stderr[-4000:]

    # 4 steps per epoch per process: step 7 is mid-epoch 2, after the checkpoint of step 5. Every
    # process SIGKILLs itself there (torchrun then reports the failure).
    killed = _train(tiny, tmp_path / "b", kill_at=7, extra=extra)
    assert killed.returncode != 0, killed.stderr[-3000:]
    ckpt = tmp_path / "b" / "checkpoint"
    assert json.loads((ckpt / "state.json").read_text())["step"] == 5
    assert (ckpt / "rng-0.json").is_file() and (ckpt / "rng-1.json").is_file()
    assert not (tmp_path / "b" / "trainer_state.json").exists()

    # One process cannot resume a 2-process checkpoint exactly: a clear error, no traceback.
    alone = _train(tiny, tmp_path / "b", nproc=1, extra=extra)
    assert alone.returncode == 2 and "written by 2 process(es)" in alone.stderr, alone.stderr[-3000:]
    assert "Traceback" not in alone.stderr

    resumed = _train(tiny, tmp_path / "b", extra=extra)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-4000:]

    a = json.loads((tmp_path / "a" / "trainer_state.json").read_text())
    b = json.loads((tmp_path / "b" / "trainer_state.json").read_text())
    assert a["step"] == b["step"] == 12
    assert [h["step"] for h in a["history"]] == [h["step"] for h in b["history"]] == [5, 10, 12]
    assert [h["accuracy"] for h in a["history"]] == [h["accuracy"] for h in b["history"]]

    # Same final weights. Exactly: the same batches, dropout masks (every process's RNG restored) and
    # gloo's fixed two-process reduction order give bit-identical arithmetic.
    from safetensors.torch import load_file
    wa = load_file(str(tmp_path / "a" / "checkpoint" / "model.safetensors"))
    wb = load_file(str(tmp_path / "b" / "checkpoint" / "model.safetensors"))
    assert wa.keys() == wb.keys()
    for key in wa:
        assert torch.equal(wa[key], wb[key]), f"{key}: max diff {(wa[key] - wb[key]).abs().max().item()}"
