"""Every results line (the Trainer's summary: printed by `structattn train`, appended by `structattn sweep`)
records the package version, the git commit and the attention kernel that actually ran."""
import subprocess
from importlib import metadata
from pathlib import Path

import pytest

from fixtures import make_tiny_model, make_tiny_sst2
from structattn.run_config import RunConfig
from structattn.finetuning.trainer import Trainer

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def test_summary_records_version_commit_and_resolved_kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("STRUCTATTN_DATA", str(make_tiny_sst2(tmp_path / "data", n_train=16, n_dev=8)))
    monkeypatch.setenv("STRUCTATTN_CACHE", str(tmp_path / "cache"))
    cfg = RunConfig(task="sst2", model=str(make_tiny_model(tmp_path / "model")), mechanism="wla", k=2,
                      output_dir=str(tmp_path / "run"), epochs=1, batch_size=8, eval_every=2, max_length=32,
                      stride=8)
    summary = Trainer(cfg, show_progress=False).train()

    assert summary["structattn_version"] == metadata.version("structattn")
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:
        assert summary["git_commit"] in (head.stdout.strip(), head.stdout.strip() + "-dirty")
    else:
        assert summary["git_commit"] is None
    # The mechanism's kernel is "auto": the record names what it resolved to.
    assert summary["kernel"] in ("fused", "exact")

    # A finished run asked again (nothing runs) still reports the kernel its training used.
    again = Trainer(cfg, show_progress=False).train()
    assert again["kernel"] == summary["kernel"]
    assert again["git_commit"] == summary["git_commit"]
