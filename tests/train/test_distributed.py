"""Two CPU processes (gloo, launched with torchrun) give the same gradients as one process on the same batch."""
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fixtures import make_tiny_model

pytestmark = pytest.mark.slow
HERE = Path(__file__).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(cmd, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               MASTER_ADDR="127.0.0.1", OMP_NUM_THREADS="1")
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-4000:]


def test_two_processes_match_one(tmp_path):
    model = make_tiny_model(tmp_path / "model")
    script = str(HERE / "ddp_grads.py")
    _run([sys.executable, script, str(model), str(tmp_path / "one.pt")], tmp_path)
    # torchrun sets RANK/WORLD_SIZE; Accelerator(cpu=True) then joins a gloo process group.
    _run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(_free_port()),
          script, str(model), str(tmp_path / "two.pt")], tmp_path)
    one, two = torch.load(tmp_path / "one.pt"), torch.load(tmp_path / "two.pt")
    assert one["world"] == 1 and two["world"] == 2
    assert one["grads"].keys() == two["grads"].keys()
    gate_keys = [k for k in one["grads"] if "structattn_gate" in k]
    assert gate_keys, "the SLA gates should receive gradients"
    for key, g1 in one["grads"].items():
        g2 = two["grads"][key]
        assert torch.allclose(g1, g2, rtol=1e-4, atol=1e-6), f"{key}: max diff {(g1 - g2).abs().max().item()}"
