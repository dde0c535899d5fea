"""Translation and parsing on several CPU processes (gloo, torchrun) and their command lines: what
test_distributed.py checks for the sentence tasks (same stop step on every process; SIGKILL then resume gives
``torch.equal`` weights; 1 process at batch 2b has the gradients of 2 processes at b), plus a single-process
kill -9 resume from a ``--checkpoint-every`` checkpoint and one printed line per evaluation with --no-progress."""
import json
import re
import sys
from pathlib import Path

import pytest
import torch

from test_distributed import HERE, _launch, _torchrun

# the parsing and translation training tests' tiny data, imported by name from their systems' folders
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bna"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "translation"))
from test_parsing import fake_sentence  # noqa: E402
from test_translation import _corpus  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    (root / "trees.mrg").write_text("\n".join(fake_sentence(k) for k in range(16)) + "\n", encoding="utf-8")
    (root / "dev.mrg").write_text("\n".join(fake_sentence(k * 7 + 3) for k in range(6)) + "\n", encoding="utf-8")
    for name, n, seed in (("train", 120, 0), ("dev", 12, 1), ("test", 10, 2)):
        _corpus(root, name, n, seed)
    return root


def _parser(data, out, nproc=2, kill_at=None, extra=()):
    cmd = ["-m", "structattn.cli", "train-parsing", "--train", str(data / "trees.mrg"), "--dev", str(data / "dev.mrg"),
           "--model", "none", "--mechanism", "bna", "--num-layers", "2", "--d-model", "16", "--heads", "2",
           "--d-head", "8", "--d-ff", "32", "--label-hidden", "16", "--char-dim", "8", "--word-dim", "16",
           "--ngram", "2", "--seed", "3", "--batch-size", "4", "--learning-rate", "1e-2", "--warmup-steps", "2",
           "--patience", "0", "--pos", "none", "--no-progress", "--output-dir", str(out), *extra]
    return _run(cmd, out, nproc, kill_at)


def _translation(data, out, nproc=2, kill_at=None, extra=()):
    cmd = ["-m", "structattn.cli", "train-nmt", "--size", "micro", "--max-length", "64", "--mechanism", "hybrid_gate",
           "--train-source", str(data / "train.en"), "--train-target", str(data / "train.de"),
           "--dev-source", str(data / "dev.en"), "--dev-target", str(data / "dev.de"),
           "--test-source", str(data / "test.en"), "--test-target", str(data / "test.de"), "--vocab-size", "200",
           "--max-tokens", "256", "--warmup-steps", "4", "--eval-every", "3", "--patience", "10", "--average-last", "2",
           "--beam", "2", "--learning-rate", "3e-3", "--threads", "1", "--no-progress", "--output-dir", str(out),
           *extra]
    return _run(cmd, out, nproc, kill_at)


def _run(cmd, out, nproc, kill_at):
    env = {"PYTHONHASHSEED": "0"}
    if kill_at is not None:
        env["STRUCTATTN_KILL_AT_STEP"] = str(kill_at)
    out.parent.mkdir(parents=True, exist_ok=True)
    launcher = _torchrun(nproc) if nproc > 1 else [sys.executable]
    return _launch(launcher + cmd, out.parent, env)


def _ok(res):
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-4000:]
    return res


def _state(out: Path) -> dict:
    return json.loads((out / "checkpoint" / "state.json").read_text())


def _weights(out: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(out / "checkpoint" / "model.safetensors"))


def _assert_same_weights(a: Path, b: Path) -> None:
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys()
    for key in wa:
        assert torch.equal(wa[key], wb[key]), f"{key}: max diff {(wa[key] - wb[key]).abs().max().item()}"


FAMILIES = {"parser": (_parser, "f1", ("--epochs", "3", "--eval-every", "2")),
            "translation": (_translation, "dev_bleu", ("--max-steps", "8", "--checkpoint-every", "2"))}


@pytest.mark.parametrize("family", ["parser", "translation"])
def test_two_processes_sigkill_then_resume_matches_uninterrupted(data, tmp_path, family):
    train, metric, extra = FAMILIES[family]
    straight = _ok(train(data, tmp_path / "a", extra=extra))
    a = _state(tmp_path / "a")
    assert a["num_processes"] == 2 and a["finished"]
    # the main process prints the summary once; the other says where it stopped: the same step, the same best
    other = re.findall(r"process 1: stopped at step (\d+), best step (-?\d+)", straight.stderr)
    assert other == [(str(a["step"]), str(a["best_step"]))]
    summary = json.loads(straight.stdout[straight.stdout.index("{\n"):])
    assert summary["processes"] == 2
    # one line per evaluation, from the main process only, although there is no progress bar
    assert len(re.findall(rf"step [\d,]+: dev {metric} ", straight.stderr)) == len(a["history"]) >= 2

    killed = train(data, tmp_path / "b", kill_at=5, extra=extra)
    assert killed.returncode != 0, killed.stderr[-3000:]
    # parser: the evaluation of step 4; translation: --checkpoint-every 2 wrote the checkpoint of step 4
    assert _state(tmp_path / "b")["step"] == 4 and not (tmp_path / "b" / "summary.json").exists()
    assert sorted(p.name for p in (tmp_path / "b" / "checkpoint").glob("rng-*.json")) == ["rng-0.json", "rng-1.json"]

    alone = train(data, tmp_path / "b", nproc=1, extra=extra)  # one process cannot resume it exactly
    assert alone.returncode == 2 and "written by 2 process(es)" in alone.stderr, alone.stderr[-3000:]
    assert "Traceback" not in alone.stderr

    _ok(train(data, tmp_path / "b", extra=extra))
    b = _state(tmp_path / "b")
    assert b["step"] == a["step"]
    assert [(h["step"], h[metric], h["train_loss"]) for h in b["history"]] == \
        [(h["step"], h[metric], h["train_loss"]) for h in a["history"]]
    _assert_same_weights(tmp_path / "a", tmp_path / "b")


@pytest.mark.parametrize("family", ["parser", "translation"])
def test_one_process_at_2b_has_the_gradients_of_two_at_b(data, tmp_path, family):
    script = str(HERE / "family_grads.py")
    _ok(_launch([sys.executable, script, family, str(data), str(tmp_path / "one.pt")], tmp_path))
    _ok(_launch(_torchrun(2) + [script, family, str(data), str(tmp_path / "two.pt")], tmp_path))
    one, two = torch.load(tmp_path / "one.pt"), torch.load(tmp_path / "two.pt")
    assert (one["world"], two["world"]) == (1, 2) and one["grads"].keys() == two["grads"].keys()
    if family == "translation":
        assert two["weight"] * 2 != one["weight"]  # unequal halves: the token weighting is what makes them agree
    for key, g1 in one["grads"].items():
        g2 = two["grads"][key]
        assert torch.allclose(g1, g2, rtol=1e-4, atol=1e-6), f"{key}: max diff {(g1 - g2).abs().max().item()}"


def test_parser_sigkill_resumes_from_a_checkpoint_every_n_updates(data, tmp_path):
    extra = ("--epochs", "2", "--checkpoint-every", "3")  # 4 steps per epoch, one evaluation per epoch
    _ok(_parser(data, tmp_path / "a", nproc=1, extra=extra))
    killed = _parser(data, tmp_path / "b", nproc=1, kill_at=7, extra=extra)
    assert killed.returncode == -9, killed.stderr[-3000:]
    state = _state(tmp_path / "b")
    assert (state["step"], state["epoch"], state["step_in_epoch"]) == (6, 1, 2)  # --checkpoint-every, mid-epoch
    resumed = _ok(_parser(data, tmp_path / "b", nproc=1, extra=extra))
    assert len(re.findall(r"train-parsing step [\d,]+: dev f1 ", resumed.stderr)) == 1  # the epoch-2 evaluation
    assert _state(tmp_path / "b")["history"] == _state(tmp_path / "a")["history"]
    _assert_same_weights(tmp_path / "a", tmp_path / "b")
