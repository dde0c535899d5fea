"""Two trainers on one --output-dir: the second is refused with one line naming the first, which finishes."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fixtures import make_tiny_model, make_tiny_sst2
from structattn.train.output_lock import LOCK_NAME, _flock_holder, hold_output_dir

REPO_SRC = Path(__file__).resolve().parents[2] / "src"


def _start(out_dir, model, data, cache, seed):
    env = dict(os.environ, STRUCTATTN_DATA=str(data), STRUCTATTN_CACHE=str(cache), PYTHONHASHSEED="0",
               OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([str(REPO_SRC), os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "structattn.cli", "train", "--task", "sst2", "--model", str(model),
           "--mechanism", "wla", "--k", "2", "--output-dir", str(out_dir), "--epochs", "1", "--batch-size", "8",
           "--eval-every", "4", "--seed", str(seed), "--max-length", "32", "--no-progress"]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/locks").is_file(), reason="needs Linux's /proc/locks to see who holds the lock")
def test_second_trainer_on_one_output_dir_is_refused_and_the_first_finishes(tmp_path):
    model, data = make_tiny_model(tmp_path / "model"), make_tiny_sst2(tmp_path / "data")
    out = tmp_path / "run"
    runs = {seed: _start(out, model, data, tmp_path / "cache", seed) for seed in (42, 7)}  # started together
    # Whichever takes the lock first is paused while it holds it, so the other surely meets it (however fast
    # the tiny run is), then let go.
    holder, deadline = None, time.monotonic() + 240
    while holder is None and time.monotonic() < deadline:
        pid = _flock_holder(out / LOCK_NAME) if (out / LOCK_NAME).exists() else None
        holder = next((p for p in runs.values() if p.pid == pid), None)
        time.sleep(0.05)
    assert holder is not None, "no trainer took the output folder's lock"
    os.kill(holder.pid, signal.SIGSTOP)
    try:
        refused = next(p for p in runs.values() if p is not holder)
        _, err = refused.communicate(timeout=240)
    finally:
        os.kill(holder.pid, signal.SIGCONT)
    assert refused.returncode == 2, err[-3000:]
    assert f"is in use by a running trainer (pid {holder.pid}: " in err and "structattn.cli train" in err
    assert "Traceback" not in err and err.count("\n") == 1, err
    _, held_err = holder.communicate(timeout=300)
    assert holder.returncode == 0, held_err[-3000:]
    assert (out / "trainer_state.json").is_file()


def test_lock_is_released_with_its_holder_and_shared_inside_one_process(tmp_path):
    first = hold_output_dir(tmp_path / "run")
    assert hold_output_dir(tmp_path / "run") is first  # a second trainer in this process (resume) shares it
    probe = ("import sys\nfrom structattn.train.output_lock import hold_output_dir\n"
             "from structattn.errors import UserError\n"
             "try:\n    hold_output_dir(sys.argv[1])\nexcept UserError as e:\n    print(e)\nelse:\n    print('GOT')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO_SRC), os.environ.get("PYTHONPATH", "")]))
    other = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "run")], capture_output=True, text=True,
                           env=env, timeout=120)
    assert "is in use by a running trainer" in other.stdout and f"pid {os.getpid()}" in other.stdout
    first.release()
    other = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "run")], capture_output=True, text=True,
                           env=env, timeout=120)
    assert other.stdout.strip() == "GOT"



@pytest.mark.parametrize("argv", [["train", "--task", "sst2"], ["train-parsing"],
                                  ["train-translation", "--size", "micro", "--max-length", "64"]],
                         ids=["train", "train-parsing", "train-translation"])
def test_a_run_whose_data_is_missing_creates_nothing(tmp_path, argv):
    """The output folder is made once the data was read: a run refused for its data leaves no folder behind."""
    (tmp_path / "data").mkdir()
    env = dict(os.environ, STRUCTATTN_DATA=str(tmp_path / "data"), STRUCTATTN_CACHE=str(tmp_path / "cache"),
               OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-m", "structattn.cli", *argv, "--output-dir", str(tmp_path / "out" / "run")],
                          env=env, capture_output=True, text=True, timeout=300)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "not found" in lines[0], done.stderr[-2000:]
    assert not (tmp_path / "out").exists()
