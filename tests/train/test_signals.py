"""SIGTERM and SIGINT stop every trainer cleanly at several points, and the same command then ends as an
uninterrupted run does; signals never cut a write (structattn.stopping)."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from structattn import stopping
from structattn.io import atomic_write_text

from fixtures import make_tiny_model, make_tiny_sst2

TREES = [
    "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .)))",
    "(TOP (S (NP (PRP She)) (VP (VBZ likes) (NP (JJ green) (NNS apples))) (. .)))",
    "(TOP (S (NP (NNS Dogs)) (VP (VBP bark) (ADVP (RB loudly))) (. .)))",
    "(TOP (S (NP (DT A) (NN man)) (VP (VBD walked) (NP (DT the) (NN dog))) (. .)))",
    "(TOP (S (NP (PRP He)) (VP (VBD read) (NP (DT a) (NN book))) (. .)))",
    "(TOP (S (NP (DT The) (NNS children)) (VP (VBD played) (PP (IN in) (NP (DT the) (NN park)))) (. .)))",
]
WORDS = {"a": "ein", "dog": "Hund", "cat": "Katze", "runs": "läuft", "sleeps": "schläft", "big": "großer"}


# ---------------------------------------------------------------------------------------------- the mechanism
def test_a_signal_inside_a_deferred_block_is_raised_when_it_ends():
    with stopping.handling_signals():
        with pytest.raises(stopping.Stopped) as stopped:
            with stopping.deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                done = True  # the block runs to its end
        assert done and stopped.value.exit_status == 143 and stopping.pending() is None
        assert stopped.value.message() == "stopped by SIGTERM"
        with pytest.raises(stopping.Stopped):  # outside a block: at once
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):
                pass
        with stopping.deferred(raise_pending=False):
            os.kill(os.getpid(), signal.SIGINT)
        assert stopping.pending() == signal.SIGINT
        with pytest.raises(stopping.Stopped, match="SIGINT"):
            stopping.raise_if_pending()


def test_a_swallowed_signal_is_raised_again_at_the_next_safe_point():
    with stopping.handling_signals():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):
                pass
        except BaseException:  # a library's bare except around an optional import
            pass
        assert stopping.pending() == signal.SIGTERM
        with pytest.raises(stopping.Stopped, match="SIGTERM"):
            stopping.raise_if_pending()
    assert stopping.pending() is None


def test_an_atomic_write_finishes_before_the_signal_and_honours_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        with stopping.handling_signals(), pytest.raises(stopping.Stopped):
            with stopping.deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                atomic_write_text(tmp_path / "a.txt", "whole\n")
        assert (tmp_path / "a.txt").read_text() == "whole\n"
        assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o640
        os.umask(0o002)
        atomic_write_text(tmp_path / "b.txt", "x")
        assert (tmp_path / "b.txt").stat().st_mode & 0o777 == 0o664
    finally:
        os.umask(old)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt"]


# ---------------------------------------------------------------------------------------------- every trainer
def _sst2(tmp: Path) -> tuple[list[str], tuple[str, ...]]:
    model, data = make_tiny_model(tmp / "model"), make_tiny_sst2(tmp / "data", n_train=32, n_dev=16)
    os.environ["STRUCTATTN_DATA"] = str(data)  # the test's monkeypatch puts it back
    return (["train", "--task", "sst2", "--model", str(model), "--mechanism", "wla", "--k", "2", "--epochs", "2",
             "--batch-size", "8", "--eval-every", "3", "--seed", "3", "--learning-rate", "1e-3", "--deterministic",
             "true", "--max-length", "32", "--stride", "8", "--checkpoint-every", "1", "--no-progress"],
            ("checkpoint/model.safetensors", "best/model.safetensors"))


def _parser(tmp: Path) -> tuple[list[str], tuple[str, ...]]:
    trees = tmp / "t.trees"
    trees.write_text("\n".join(TREES) + "\n", encoding="utf-8")
    return (["train-parsing", "--train", str(trees), "--dev", str(trees), "--test", str(trees), "--model", "none",
             "--pos", "none", "--epochs", "3", "--batch-size", "2", "--checkpoint-every", "1", "--d-model", "16",
             "--num-layers", "1", "--heads", "2", "--d-head", "8", "--d-ff", "32", "--label-hidden", "16",
             "--char-dim", "8", "--word-dim", "16", "--no-progress"],
            ("checkpoint/model.safetensors", "best/model.safetensors", "test.trees"))


def _translation(tmp: Path) -> tuple[list[str], tuple[str, ...]]:
    rng = random.Random(0)
    pairs = [[rng.choice(list(WORDS)) for _ in range(rng.randint(2, 5))] for _ in range(40)]
    (tmp / "p.en").write_text("".join(" ".join(p) + ".\n" for p in pairs), encoding="utf-8")
    (tmp / "p.de").write_text("".join(" ".join(WORDS[w] for w in p) + ".\n" for p in pairs), encoding="utf-8")
    files = [str(tmp / "p.en"), str(tmp / "p.de")]
    return (["train-translation", "--size", "micro", "--max-length", "64", "--vocab-size", "120",
             "--train-source", files[0], "--train-target", files[1], "--dev-source", files[0], "--dev-target",
             files[1], "--test-source", files[0], "--test-target", files[1], "--max-steps", "4", "--eval-every",
             "2", "--warmup-steps", "2", "--max-tokens", "256", "--beam", "1", "--checkpoint-every", "1",
             "--no-progress"],
            ("checkpoint/model.safetensors", "best/model.safetensors", "final/model.safetensors"))


def _run(argv: list[str], out: Path, signal_at: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONHASHSEED="0", OMP_NUM_THREADS="1")
    env.pop(stopping.SIGNAL_AT_ENV, None)
    if signal_at:
        env[stopping.SIGNAL_AT_ENV] = signal_at
    return subprocess.run([sys.executable, "-m", "structattn.cli", *argv, "--output-dir", str(out)], env=env,
                          capture_output=True, text=True, timeout=600)


def _same_file(a: Path, b: Path) -> bool:
    if a.suffix != ".safetensors":
        return a.read_bytes() == b.read_bytes()
    from safetensors.torch import load_file

    wa, wb = load_file(str(a)), load_file(str(b))
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


CASES = {  # trainer -> (how to run it, the points a signal is sent at)
    "train": (_sst2, ["update:SIGTERM", "optimizer-save:SIGINT", "evaluation:SIGTERM"]),
    "train-parsing": (_parser, ["data:SIGTERM", "update:SIGINT", "optimizer-save:SIGTERM", "summary:SIGTERM"]),
    "train-translation": (_translation, ["optimizer-save:SIGTERM", "evaluation:SIGINT", "update:SIGTERM"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("trainer", list(CASES))
def test_a_signal_at_each_point_stops_in_one_line_and_the_rerun_ends_as_an_uninterrupted_one(
        tmp_path, monkeypatch, trainer):
    monkeypatch.setenv("STRUCTATTN_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("STRUCTATTN_DATA", os.environ.get("STRUCTATTN_DATA", ""))
    setup, points = CASES[trainer]
    argv, compared = setup(tmp_path)
    reference = _run(argv, tmp_path / "reference")
    assert reference.returncode == 0, reference.stderr[-3000:]
    for point in points:
        out = tmp_path / point.replace(":", "-")
        stopped = _run(argv, out, signal_at=point)
        name = point.partition(":")[2]
        assert stopped.returncode == 128 + signal.Signals[name], (point, stopped.stderr[-3000:])
        assert "Traceback" not in stopped.stderr, (point, stopped.stderr[-3000:])
        assert stopped.stderr.strip().splitlines()[-1] == f"stopped by {name}; resume with the same command"
        if point.startswith("data"):  # nothing was written before the data was read
            assert not out.exists()
        if point.startswith(("update", "optimizer-save")):  # a checkpoint of the update the signal came in
            assert (out / "checkpoint" / "manifest.json").is_file(), point
        assert not [p.name for p in out.glob(".*")] if out.exists() else True, point  # no temporary files
        again = _run(argv, out)
        assert again.returncode == 0, (point, again.stderr[-3000:])
        for name in compared:
            assert _same_file(out / name, tmp_path / "reference" / name), (point, name)
