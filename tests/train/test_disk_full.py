"""A full disk while a trainer writes checkpoint/ or best/: one line naming the folder and the space it needs, no
temporary folder left, and the last committed checkpoint/ and best/ still load (ENOSPC simulated at os.write)."""
import errno
import json
import os
from pathlib import Path

import pytest
import torch

from fixtures import make_tiny_model, make_tiny_sst2
from structattn.cli import main
from structattn.io import DiskFull, atomic_write_text, is_disk_full

pytestmark = pytest.mark.slow
REAL_WRITE = os.write


def _fail_writes(monkeypatch, out: Path, folder: str):
    """os.write raises ENOSPC for files in ``out/.<folder>.tmp-*`` once ``out/<folder>`` exists (a disk that
    fills up after the first save). Counts the failures."""
    failures = []

    def write(fd, data):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = ""
        if Path(target).parent.name.startswith(f".{folder}.tmp-") and (out / folder).exists():
            failures.append(target)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return REAL_WRITE(fd, data)

    monkeypatch.setattr(os, "write", write)
    return failures


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("STRUCTATTN_DATA", str(make_tiny_sst2(tmp_path / "data", n_train=32, n_dev=16)))
    monkeypatch.setenv("STRUCTATTN_CACHE", str(tmp_path / "cache"))
    model = make_tiny_model(tmp_path / "model")
    out = tmp_path / "run"
    args = ["train", "--task", "sst2", "--model", str(model), "--output-dir", str(out), "--epochs", "1",
            "--batch-size", "8", "--eval-every", "2", "--max-length", "32", "--stride", "8", "--no-progress"]
    return out, args


def _one_disk_full_line(err: str, folder: Path) -> None:
    lines = [line for line in err.splitlines() if "no space left" in line]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert f"no space left on the device writing {folder}: it needs about " in lines[0]
    assert " MB free there" in lines[0] and f"the last saved {folder} is unchanged" in lines[0]


def _no_temporary_folders(out: Path) -> None:
    assert not [p.name for p in out.iterdir() if ".tmp-" in p.name or ".old-" in p.name]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="finds the written file through /proc/self/fd")
def test_full_disk_at_the_second_checkpoint(env, monkeypatch, capsys):
    from safetensors.torch import load_file

    out, args = env
    failures = _fail_writes(monkeypatch, out, "checkpoint")
    assert main(args) == 2
    assert failures, "the simulated full disk was never hit"
    _one_disk_full_line(capsys.readouterr().err, out / "checkpoint")
    _no_temporary_folders(out)
    state = json.loads((out / "checkpoint" / "state.json").read_text())
    assert state["step"] == 2  # the first checkpoint, committed before the disk filled
    assert load_file(str(out / "checkpoint" / "model.safetensors"))
    torch.load(out / "checkpoint" / "tensors.pt", weights_only=True)
    monkeypatch.setattr(os, "write", REAL_WRITE)  # space freed: the rerun resumes from it and finishes
    assert main(args) == 0
    assert "resuming" in capsys.readouterr().err


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="finds the written file through /proc/self/fd")
def test_full_disk_while_replacing_best(env, monkeypatch, capsys):
    out, args = env
    args = [*args, "--save-checkpoints", "false"]  # every start trains from step 0 and replaces best/ at step 2
    assert main(args) == 0
    before = (out / "best" / "metrics.json").read_text()
    capsys.readouterr()
    failures = _fail_writes(monkeypatch, out, "best")
    assert main(args) == 2 and failures
    _one_disk_full_line(capsys.readouterr().err, out / "best")
    _no_temporary_folders(out)
    assert (out / "best" / "metrics.json").read_text() == before
    monkeypatch.setattr(os, "write", REAL_WRITE)
    assert main(["evaluate", "--model", str(out / "best"), "--split", "dev"]) == 0  # the kept best/ loads


def test_disk_full_is_recognised_inside_other_libraries_errors(tmp_path, monkeypatch):
    # torch.save to a Python file raises RuntimeError("... unexpected pos ...") *during* the OSError
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError:
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64 vs 0")
    except RuntimeError as exc:
        assert is_disk_full(exc)
    assert is_disk_full(Exception("Error while serializing: IoError(Os { code: 28, kind: StorageFull })"))
    assert not is_disk_full(RuntimeError("unexpected pos 64 vs 0"))
    monkeypatch.setattr(os, "write", lambda fd, data: (_ for _ in ()).throw(OSError(errno.ENOSPC, "full")))
    with pytest.raises(DiskFull, match=r"writing .*settings.json: it needs about 0.0 MB"):
        atomic_write_text(tmp_path / "settings.json", "{}")
    assert list(tmp_path.iterdir()) == []
