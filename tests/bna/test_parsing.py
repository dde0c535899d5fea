"""train_parser end to end on tiny configurations: outputs, exact resume after a kill, refusal of another config,
the tag cache, the optimiser's parameter groups and warm-up, the batch order.

Most tests run on a hand-written treebank (199 small .mrg files in the layout of the NLTK sample, raw format with
function tags, traces and the outer empty bracket) pointed to by $STRUCTATTN_DATA; one runs on the real sample.
"""
from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tasks"))
from tasks_testutil import needs  # noqa: E402

from structattn.bna.model import ParserConfig  # noqa: E402
from structattn.errors import UserError  # noqa: E402
from structattn.train import engine as engine_module  # noqa: E402
from structattn.bna.trainer import (  # noqa: E402
    ParserFamily, TreebankFiles, cached_spacy_tags, chart_passes, learning_rate_factor, make_optimizer, train_parser,
    warmup_factor)

TEMPLATES = [
    "( (S (NP-SBJ (DT the) (NN {n})) (VP (VBD {v}) (PP-LOC (IN on) (NP (DT the) (NN {m})))) (. .)) )",
    "( (S (NP-SBJ-1 (NNP {p})) (VP (VBZ {v}) (S (NP-SBJ (-NONE- *-1)) (VP (TO to) (VP (VB {w}))))) (. .)) )",
    "( (S (NP-SBJ (DT a) (JJ {a}) (NN {n})) (VP (MD will) (VP (VB {w}) (NP (NNS {m}s)))) (. .)) )",
    "( (NP (NP (DT the) (NN {n})) (, ,) (NP (NNP {p})) (. .)) )",
    "( (S (S (NP-SBJ (PRP it)) (VP (VBD {v}))) (CC and) (S (NP-SBJ (PRP they)) (VP (VBD {v}) (ADVP (RB {r})))) (. .)) )",
]
NOUNS = ["cat", "dog", "market", "bank", "price", "stock", "report", "plan"]
VERBS = ["sat", "rose", "fell", "said", "likes", "sees"]
NAMES = ["John", "Mary", "Sony", "Boeing"]


def fake_sentence(k: int) -> str:
    return TEMPLATES[k % len(TEMPLATES)].format(
        n=NOUNS[k % 8], m=NOUNS[(k * 3 + 1) % 8], v=VERBS[k % 6], w=VERBS[(k + 2) % 6].rstrip("sd") or "go",
        p=NAMES[k % 4], a=["big", "small", "new"][k % 3], r=["fast", "again"][k % 2])


def write_fake_treebank(root: Path) -> Path:
    """wsj_0001..wsj_0199.mrg with one tree each (two in the test files 0160-0169): returns the data folder."""
    folder = root / "ptb_sample_nltk" / "treebank" / "combined"
    folder.mkdir(parents=True)
    for number in range(1, 200):
        trees = [fake_sentence(number)] + ([fake_sentence(number * 7)] if 160 <= number < 170 else [])
        (folder / f"wsj_{number:04d}.mrg").write_text("\n\n".join(trees) + "\n", encoding="utf-8")
    return root


@pytest.fixture
def treebank(tmp_path, monkeypatch):
    data = write_fake_treebank(tmp_path / "data")
    monkeypatch.setenv("STRUCTATTN_DATA", str(data))
    monkeypatch.setenv("STRUCTATTN_CACHE", str(tmp_path / "cache"))
    return data


def tiny(output_dir, **overrides) -> ParserConfig:
    """A parser that trains in about a second: no pretrained encoder, d_model 16, 2 layers."""
    base = dict(encoder="none", variant="bna", num_layers=2, d_model=16, heads=2, d_head=8, d_ff=32,
                label_hidden=16, char_dim=8, word_dim=16, ngram=2, seed=3, epochs=2, batch_size=4,
                learning_rate=1e-2, warmup_steps=2, max_train_trees=12, max_eval_trees=6, patience=0,
                output_dir=str(output_dir))
    base.update(overrides)
    return ParserConfig(**base)


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def weights(out: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(out / "checkpoint" / "model.safetensors"))


def without_times(history: list[dict]) -> list[dict]:
    return [{k: v for k, v in h.items() if "seconds" not in k} for h in history]


# ---------------------------------------------------------------------------------------------- end to end
def test_two_epochs_write_best_trees_and_summary(treebank, tmp_path):
    torch.set_num_threads(1)
    out = tmp_path / "run"
    summary = train_parser(tiny(out, max_eval_trees=0), show_progress=False)
    assert (out / "best").is_dir() and (out / "checkpoint").is_dir()
    assert len(lines(out / "test.trees")) == 50 and len(lines(out / "dev.trees")) == 20  # every tree, in order
    assert all(line.startswith("(") and line.endswith(")") for line in lines(out / "test.trees"))
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk == json.loads(json.dumps(summary))
    assert summary["steps"] == 6 and summary["epochs_completed"] == 2 and len(summary["history"]) == 2
    assert len(summary["train_seconds_per_epoch"]) == 2
    assert summary["config"]["d_model"] == 16 and summary["config"]["encoder"] == "none"
    for split, n in (("dev", 20), ("test", 50)):
        assert {"recall", "precision", "f1", "complete_match"} <= set(summary[split])
        assert summary[split]["trees"] == summary[split]["of_trees"] == n
    assert summary["best_dev_f1"] == max(h["f1"] for h in summary["history"])
    assert all(h["train_loss"] > 0 for h in summary["history"])  # mean training loss since the last evaluation
    assert summary["device"].startswith("cpu (") and summary["torch_threads"] == 1
    assert summary["parameters"] > 0 and {"structattn_version", "git_commit"} <= set(summary["provenance"])


def test_test_scores_are_those_of_the_raw_files(treebank, tmp_path):
    """The summary's test figures are what EVALB gives for test.trees against the raw treebank files."""
    from structattn.tasks.evalb import evalb_files
    from structattn.tasks.ptb import split_files

    out = tmp_path / "run"
    summary = train_parser(tiny(out, epochs=1, max_eval_trees=0), show_progress=False)
    again = evalb_files(split_files("test"), out / "test.trees").to_dict()
    assert all(summary["test"][k] == again[k] for k in ("recall", "precision", "f1", "complete_match"))


def test_limits_are_applied_and_printed(treebank, tmp_path, capsys):
    out = tmp_path / "run"
    summary = train_parser(tiny(out, epochs=1), show_progress=False)
    printed = capsys.readouterr().out
    assert "train: using 12 of 139 trees" in printed and "dev: using 6 of 20 trees" in printed
    assert len(lines(out / "test.trees")) == 6 and summary["test"]["of_trees"] == 50


@pytest.mark.data
@needs("ptb_sample_nltk/treebank/combined")
def test_real_treebank_sample(tmp_path, monkeypatch):
    monkeypatch.setenv("STRUCTATTN_CACHE", str(tmp_path / "cache"))
    torch.set_num_threads(1)
    out = tmp_path / "run"
    summary = train_parser(tiny(out, max_train_trees=8, max_eval_trees=4, batch_size=8), show_progress=False)
    assert len(lines(out / "test.trees")) == 4 and summary["test"]["of_trees"] == 518
    assert summary["dev"]["of_trees"] == 328 and (out / "best" / "config.json").is_file()


# ---------------------------------------------------------------------------------------------- resume
def test_resume_after_a_kill_ends_like_an_uninterrupted_run(treebank, tmp_path):
    torch.set_num_threads(1)
    whole = train_parser(tiny(tmp_path / "a", epochs=3), show_progress=False)
    config = tiny(tmp_path / "b", epochs=3)
    # 3 steps per epoch: killed in epoch 2, after its first step (lost: that step; kept: the epoch-1 checkpoint)
    assert train_parser(config, show_progress=False, stop_after_steps=4) == {"stopped_at_step": 4}
    saved = json.loads((tmp_path / "b" / "checkpoint" / "state.json").read_text())
    assert saved["step"] == 3 and saved["epoch"] == 1
    resumed = train_parser(config, show_progress=False)
    assert resumed["best_dev_f1"] == whole["best_dev_f1"] and resumed["best_epoch"] == whole["best_epoch"]
    assert all("train_loss" in h for h in whole["history"])  # the comparison below covers the training loss
    assert without_times(resumed["history"]) == without_times(whole["history"])
    assert lines(tmp_path / "b" / "test.trees") == lines(tmp_path / "a" / "test.trees")
    a, b = weights(tmp_path / "a"), weights(tmp_path / "b")
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)  # bit-identical weights


def test_resume_from_a_checkpoint_inside_an_epoch(treebank, tmp_path):
    """eval_every=2 with 3 steps per epoch: the checkpoint of step 4 sits one step into epoch 2."""
    torch.set_num_threads(1)
    whole = train_parser(tiny(tmp_path / "a", eval_every=2, max_eval_trees=3), show_progress=False)
    config = tiny(tmp_path / "b", eval_every=2, max_eval_trees=3)
    train_parser(config, show_progress=False, stop_after_steps=5)
    saved = json.loads((tmp_path / "b" / "checkpoint" / "state.json").read_text())
    assert (saved["step"], saved["epoch"], saved["step_in_epoch"]) == (4, 1, 1)
    resumed = train_parser(config, show_progress=False)
    assert without_times(resumed["history"]) == without_times(whole["history"])
    a, b = weights(tmp_path / "a"), weights(tmp_path / "b")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert lines(tmp_path / "b" / "test.trees") == lines(tmp_path / "a" / "test.trees")


def test_resume_without_restoring_rng_would_differ(treebank, tmp_path, monkeypatch):
    """The resume test can fail: with dropout masks drawn from a fresh RNG the weights differ."""
    torch.set_num_threads(1)
    train_parser(tiny(tmp_path / "a", epochs=2, max_eval_trees=2), show_progress=False)
    config = tiny(tmp_path / "b", epochs=2, max_eval_trees=2)
    train_parser(config, show_progress=False, stop_after_steps=4)
    monkeypatch.setattr(engine_module, "set_rng_json", lambda rng: None)
    train_parser(config, show_progress=False)
    a, b = weights(tmp_path / "a"), weights(tmp_path / "b")
    assert not all(torch.equal(a[k], b[k]) for k in a)


def test_a_finished_run_is_not_trained_again(treebank, tmp_path):
    config = tiny(tmp_path / "run", epochs=1)
    first = train_parser(config, show_progress=False)
    before = (tmp_path / "run" / "checkpoint" / "tensors.pt").stat().st_mtime_ns
    second = train_parser(config, show_progress=False)
    assert (tmp_path / "run" / "checkpoint" / "tensors.pt").stat().st_mtime_ns == before
    assert second["test"] == first["test"] and second["steps"] == first["steps"]


def test_resume_with_other_settings_is_refused(treebank, tmp_path):
    train_parser(tiny(tmp_path / "run", epochs=2), show_progress=False, stop_after_steps=4)
    with pytest.raises(UserError) as err:
        train_parser(tiny(tmp_path / "run", epochs=2, learning_rate=5e-3, d_model=32), show_progress=False)
    message = str(err.value)
    assert "learning_rate: 0.01 -> 0.005" in message and "d_model: 16 -> 32" in message
    assert "output-dir" in message and "seed" not in message


def to_old_layout(out: Path) -> None:
    """Turn the engine's checkpoint into the parser's own layout of earlier versions: tensors.pt (model, optimizer,
    scheduler, torch RNG), state.json (ParserTrainState), config.json, data.json; no settings.json."""
    from safetensors.torch import load_file

    ckpt = out / "checkpoint"
    state = json.loads((ckpt / "state.json").read_text())
    rng = json.loads((ckpt / "rng-0.json").read_text())
    tensors = torch.load(ckpt / "tensors.pt", weights_only=True)
    settings = json.loads((out / "settings.json").read_text())
    data = settings.pop("data")
    torch.save({"model": load_file(str(ckpt / "model.safetensors")), "optimizer": tensors["optimizer"],
                "scheduler": {}, "rng": {"torch": torch.tensor(rng["torch"], dtype=torch.uint8)}},
               ckpt / "tensors.pt")
    old = {"step": state["step"], "epoch": state["epoch"], "step_in_epoch": state["step_in_epoch"],
           "best_f1": state["best"], "best_epoch": state["extra"]["best_epoch"], "best_step": state["best_step"],
           "evals_without_improvement": state["evals_without_improvement"], "history": state["history"],
           "epoch_train_seconds": state["epoch_seconds"], "current_epoch_seconds": 0.0,
           "elapsed_seconds": state["elapsed_seconds"], "finished": state["finished"],
           "python_rng": rng["python"], "numpy_rng": rng["numpy"]}
    (ckpt / "state.json").write_text(json.dumps(old))
    (ckpt / "config.json").write_text(json.dumps({**settings, "output_dir": str(out)}))
    (ckpt / "data.json").write_text(json.dumps(data))
    for name in ("rng-0.json", "model.safetensors", "manifest.json"):  # earlier versions wrote no manifest
        (ckpt / name).unlink(missing_ok=True)
    (out / "settings.json").unlink()
    shutil.rmtree(out / "previous-checkpoint", ignore_errors=True)  # nor kept the one before


def test_a_checkpoint_of_the_earlier_layout_is_refused_naming_the_version(treebank, tmp_path):
    """A checkpoint of the parser's own loop (before the engine) is refused in one line, and left as it was."""
    torch.set_num_threads(1)
    config = tiny(tmp_path / "b", epochs=2)
    train_parser(config, show_progress=False, stop_after_steps=4)
    to_old_layout(tmp_path / "b")
    before = sorted(p.name for p in (tmp_path / "b" / "checkpoint").iterdir())
    with pytest.raises(UserError, match=r"written by structattn 0\.2\.0 or earlier.*structattn==0\.2\.0"):
        train_parser(config, show_progress=False)
    assert sorted(p.name for p in (tmp_path / "b" / "checkpoint").iterdir()) == before


# ---------------------------------------------------------------------------------------------- precision
def test_bf16_trains_in_bfloat16_gives_finite_scores_and_a_resume_must_match_it(treebank, tmp_path, monkeypatch):
    import math

    from structattn.bna.chart import SpanLabelScorer

    torch.set_num_threads(1)
    dtypes, forward = set(), SpanLabelScorer.forward

    def recording(self, h):  # the dtype the span scores come out in while training
        scores = forward(self, h)
        if self.training:
            dtypes.add(scores.dtype)
        return scores

    monkeypatch.setattr(SpanLabelScorer, "forward", recording)
    summary = train_parser(tiny(tmp_path / "run", precision="bf16"), show_progress=False)
    assert dtypes == {torch.bfloat16}
    assert all(math.isfinite(h["f1"]) and math.isfinite(h["train_loss"]) for h in summary["history"])
    assert math.isfinite(summary["test"]["f1"]) and summary["config"]["precision"] == "bf16"
    saved = json.loads((tmp_path / "run" / "settings.json").read_text())
    assert saved["precision"] == "bf16"
    with pytest.raises(UserError, match="precision: 'bf16' -> 'fp32'"):
        train_parser(tiny(tmp_path / "run"), show_progress=False)


def test_fp16_on_a_cpu_is_a_clear_error_before_anything_is_written(treebank, tmp_path):
    if torch.cuda.is_available():
        pytest.skip("fp16 is allowed on a CUDA machine")
    with pytest.raises(UserError, match="--precision fp16 needs a CUDA GPU.*use --precision bf16"):
        train_parser(tiny(tmp_path / "run", precision="fp16"), show_progress=False)
    assert not (tmp_path / "run").exists()


# 3 updates an epoch (12 trees, batch 4). Dev F1 never improves after the first evaluation: patience 1 stops after
# the second, unless that one is still within the warm-up (6 updates = 2 epochs), which does not count
@pytest.mark.parametrize("warmup, history", [(2, [50.0, 40.0]), (6, [50.0, 40.0, 30.0])])
def test_patience_stops_early_counting_after_the_warmup(treebank, tmp_path, monkeypatch, warmup, history):
    scores = iter([50.0, 40.0, 30.0, 20.0])

    class FixedResult:
        def __init__(self, f1):
            self.f1 = f1

        def to_dict(self):
            return {"recall": self.f1, "precision": self.f1, "f1": self.f1, "complete_match": 0.0}

    import structattn.tasks.evalb as evalb_module
    real = evalb_module.evalb
    calls = {"n": 0}

    def fake_evalb(gold, test):  # only the per-epoch dev evaluations are faked
        calls["n"] += 1
        return FixedResult(next(scores)) if calls["n"] <= len(history) else real(gold, test)

    monkeypatch.setattr(evalb_module, "evalb", fake_evalb)
    summary = train_parser(tiny(tmp_path / "run", epochs=4, patience=1, warmup_steps=warmup), show_progress=False)
    assert [h["f1"] for h in summary["history"]] == history
    assert summary["best_epoch"] == 1 and summary["epochs_completed"] == len(history)
    assert summary["best_dev_f1"] == 50.0


def test_eval_every_steps(treebank, tmp_path):
    summary = train_parser(tiny(tmp_path / "run", epochs=2, eval_every=2, max_eval_trees=2), show_progress=False)
    assert [h["step"] for h in summary["history"]] == [2, 4, 6]


# ---------------------------------------------------------------------------------------------- pieces
def test_warmup_is_linear_then_constant():
    assert [warmup_factor(s, 4) for s in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    assert warmup_factor(0, 0) == 1.0


def test_epoch_batches_are_seeded_permutations(tmp_path):
    def batches(seed: int, epoch: int) -> list[list[int]]:
        family = ParserFamily(ParserConfig(output_dir=str(tmp_path), seed=seed, batch_size=4, group_by_length=False),
                              TreebankFiles())
        family.train_trees, family.train_lengths = [None] * 10, list(range(10))
        return family.epoch_batches(epoch)

    a = batches(seed=1, epoch=0)
    assert [len(b) for b in a] == [4, 4, 2] and sorted(i for b in a for i in b) == list(range(10))
    assert a == batches(seed=1, epoch=0)
    assert a != batches(seed=1, epoch=1) and a != batches(seed=2, epoch=0)


def test_chart_passes_keep_each_pass_within_the_budget():
    """Every tree once, shares adding up to 1 in proportion to the trees, each pass within the budget unless a
    tree alone exceeds it, and as few passes as cutting the longest first allows (checked by brute force on the
    sorted order: no pass could take the next tree)."""
    import random

    rng = random.Random(0)
    for _ in range(200):
        lengths = [rng.randint(1, 60) for _ in range(rng.randint(1, 40))]
        batch = rng.sample(range(len(lengths)), rng.randint(1, len(lengths)))
        budget = rng.choice([0, 50, 500, 5000, 50000])
        passes = chart_passes(batch, lengths, budget)
        assert sorted(i for part, _ in passes for i in part) == sorted(batch)
        assert abs(sum(share for _, share in passes) - 1.0) < 1e-12
        assert all(share == len(part) / len(batch) for part, share in passes)
        cost = [len(part) * (max(lengths[i] for i in part) + 1) ** 2 for part, _ in passes]
        if budget == 0 or len(batch) * (max(lengths[i] for i in batch) + 1) ** 2 <= budget:
            assert passes == [(batch, 1.0)]
            continue
        assert all(c <= budget or len(part) == 1 for c, (part, _) in zip(cost, passes))
        for (part, _), (after, _) in zip(passes, passes[1:]):
            longest = max(lengths[i] for i in part)
            assert (len(part) + 1) * (longest + 1) ** 2 > budget  # the next tree did not fit
            assert min(lengths[i] for i in part) >= max(lengths[i] for i in after)  # longest first


def test_a_batch_in_passes_gives_the_update_of_one_pass(treebank, tmp_path, monkeypatch):
    """Without dropout, a run whose batches are cut into passes of one or two trees ends with the weights of the
    run in one pass per batch (up to float rounding: the sums run in another order); plain SGD stands in for Adam,
    whose first steps are about lr * sign(gradient) and so turn rounding in a near-zero gradient into a full step.
    Each run's settings record its budget."""
    torch.set_num_threads(1)
    no_dropout = dict(residual_dropout=0.0, ff_dropout=0.0, attn_dropout=0.0, char_dropout=0.0, epochs=1)
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    from structattn.bna.trainer import ParserFamily

    sizes = []
    real = ParserFamily.batch_loss

    def counted(self, batch):
        sizes.append(len(batch))
        return real(self, batch)

    monkeypatch.setattr(ParserFamily, "batch_loss", counted)
    monkeypatch.setattr(ParserFamily, "build_optimizer", lambda self, model: torch.optim.SGD(model.parameters(), 0.1))
    train_parser(tiny(whole, max_chart_cells=0, **no_dropout), show_progress=False)
    assert sizes == [4, 4, 4]  # 12 trees in batches of 4
    sizes.clear()
    train_parser(tiny(cut, max_chart_cells=100, **no_dropout), show_progress=False)  # trees of 5-9 words
    assert sum(sizes) == 12 and max(sizes) <= 2 and len(sizes) > 6  # every batch in passes of one or two trees
    a, b = weights(whole), weights(cut)
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-4, atol=1e-5, msg=name)
    settings = [json.loads((out / "settings.json").read_text()) for out in (whole, cut)]
    assert settings[0]["max_chart_cells"] == 0 and settings[1]["max_chart_cells"] == 100


def test_optimizer_groups_and_warmup_follow_the_config():
    """Two groups (the pretrained encoder, the rest) at their own rates, both scaled by the warm-up factor."""

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder, self.head = torch.nn.Linear(2, 2), torch.nn.Linear(2, 3)

        def parameter_groups(self, learning_rate, encoder_learning_rate):
            return [{"name": "encoder", "params": list(self.encoder.parameters()), "lr": encoder_learning_rate},
                    {"name": "parser", "params": list(self.head.parameters()), "lr": learning_rate}]

    optimizer = make_optimizer(Model(), ParserConfig(learning_rate=1e-3, encoder_learning_rate=5e-5))
    assert [(g["name"], g["lr"]) for g in optimizer.param_groups] == [("encoder", 5e-5), ("parser", 1e-3)]
    # the engine sets each group's rate to its initial rate times warmup_factor(step) before each step
    assert [warmup_factor(s, 4) for s in range(5)] == [0.25, 0.5, 0.75, 1.0, 1.0]
    assert [g["betas"] for g in optimizer.param_groups] == [(0.9, 0.999)] * 2
    supar = make_optimizer(Model(), ParserConfig(adam_beta2=0.9, adam_eps=1e-12))  # SuPar's Adam
    assert [(g["betas"], g["eps"]) for g in supar.param_groups] == [((0.9, 0.9), 1e-12)] * 2


def test_the_learning_rate_warms_up_then_decays_by_lr_decay_every_lr_decay_steps():
    config = ParserConfig(warmup_steps=2, lr_decay=0.5, lr_decay_steps=4)
    factors = [learning_rate_factor(s, config) for s in range(10)]
    # warm-up to 1 at step 1; then 0.5 ** (k / 4) for the k-th step after it: halved 4 steps later, again at 8
    want = [0.5, 1.0] + [0.5 ** (k / 4) for k in range(1, 9)]
    assert factors == pytest.approx(want, rel=1e-12)
    assert factors[5] == pytest.approx(0.5) and factors[9] == pytest.approx(0.25)
    constant = ParserConfig(warmup_steps=3)  # lr_decay 1 (the default): the warm-up alone
    assert [learning_rate_factor(s, constant) for s in range(6)] == [warmup_factor(s, 3) for s in range(6)]
    family = ParserFamily(config, TreebankFiles())
    assert [family.schedule(100)(s) for s in range(10)] == factors  # what the engine multiplies the rates by


def test_real_parser_has_one_group_without_pretrained_encoder(treebank):
    from structattn.bna.model import ChartParser
    from structattn.tasks.ptb import read_split

    model = ChartParser.build(tiny("unused"), read_split("train")[:5])
    optimizer = make_optimizer(model, tiny("unused", warmup_steps=0))
    assert [g["lr"] for g in optimizer.param_groups] == [1e-2]
    assert sum(len(g["params"]) for g in optimizer.param_groups) == len(list(model.parameters()))


def test_spacy_tags_are_cached_and_a_corrupt_cache_is_recomputed(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("STRUCTATTN_CACHE", str(tmp_path / "cache"))
    calls = []

    def tagger(words):
        calls.append(words)
        return [["T" + str(len(w))] * len(w) for w in words]

    words = [["a", "b"], ["c"]]
    assert cached_spacy_tags(words, tagger=tagger) == [["T2", "T2"], ["T1"]]
    assert cached_spacy_tags(words, tagger=tagger) == [["T2", "T2"], ["T1"]] and len(calls) == 1
    files = list((tmp_path / "cache" / "ptb_tags").glob("*.json"))
    assert len(files) == 1
    files[0].write_text("{not json", encoding="utf-8")
    assert cached_spacy_tags(words, tagger=tagger) == [["T2", "T2"], ["T1"]] and len(calls) == 2
    assert "unreadable" in capsys.readouterr().out
    files[0].write_text(json.dumps({"tags": [["X"]]}), encoding="utf-8")  # wrong shape
    assert cached_spacy_tags(words, tagger=tagger) == [["T2", "T2"], ["T1"]] and len(calls) == 3
    cached_spacy_tags([["a", "c"]], tagger=tagger)  # other words: another file
    cached_spacy_tags(words, tagger=tagger, model_name="other_pipeline")  # other pipeline: another file
    assert len(list((tmp_path / "cache" / "ptb_tags").glob("*.json"))) == 3 and len(calls) == 5


def test_gold_tags_reach_the_model(treebank, tmp_path, monkeypatch):
    from structattn.bna.model import ChartParser

    seen = []
    real_loss = ChartParser.loss

    def spy(self, trees, tags=None):
        seen.append((trees, tags))
        return real_loss(self, trees, tags)

    monkeypatch.setattr(ChartParser, "loss", spy)
    train_parser(tiny(tmp_path / "run", epochs=1, pos="gold", max_eval_trees=2), show_progress=False)
    assert seen and all(tags == [t.tags() for t in trees] for trees, tags in seen)


# ---------------------------------------------------------------------------------------------- own treebank files
OWN_TRAIN = """( (S (NP-SBJ (DT The) (NN cat))
     (VP (VBD sat)
       (PP-LOC (IN on) (NP (DT the) (NN mat))))
     (. .)) )
( (FRAG (NP (DT A) (NN dog)) (. !)) )
( (S (NP-SBJ-1 (NNP Mary)) (VP (VBZ likes) (S (NP-SBJ (-NONE- *-1)) (VP (TO to) (VP (VB run))))) (. .)) )
( (S (NP-SBJ (PRP It)) (VP (VBD purred)) (. .)) )
"""  # the PTB's multi-line layout, traces and function tags; FRAG occurs in no other test treebank
OWN_DEV = "(S (NP (DT The) (NN dog)) (VP (VBD ran)) (. .))\n(FRAG (NP (DT A) (NN cat)) (. !))\n"  # one per line
OWN_TEST = "(S (NP (PRP It)) (VP (VBD sat)) (. .))\n(S (NP (NNP Mary)) (VP (VBD purred)) (. .))\n" \
           "(S (NP (DT The) (NN mat)) (VP (VBZ likes) (NP (DT the) (NN cat))) (. .))\n"


@pytest.fixture
def own_files(tmp_path, monkeypatch):
    """Own train/dev/test files; $STRUCTATTN_DATA points at an empty folder, so the WSJ sample cannot be read."""
    (tmp_path / "no_data").mkdir()
    monkeypatch.setenv("STRUCTATTN_DATA", str(tmp_path / "no_data"))
    monkeypatch.setenv("STRUCTATTN_CACHE", str(tmp_path / "cache"))
    paths = {}
    for split, text in (("train", OWN_TRAIN), ("dev", OWN_DEV), ("test", OWN_TEST)):
        paths[split] = tmp_path / f"{split}.mrg"
        paths[split].write_text(text, encoding="utf-8")
    return paths


def own(**overrides) -> dict:
    return dict(max_train_trees=0, max_eval_trees=0, epochs=1, batch_size=2, **overrides)


def test_own_treebank_files_are_the_ones_trained_parsed_and_scored(own_files, tmp_path, capsys):
    from structattn.bna.model import ChartParser
    from structattn.tasks.evalb import evalb_files

    torch.set_num_threads(1)
    out = tmp_path / "run"
    data = TreebankFiles(**{k: str(v) for k, v in own_files.items()})
    summary = train_parser(tiny(out, **own()), show_progress=False, data=data)
    printed = capsys.readouterr().out
    assert "train: using 4 of 4 trees" in printed and "dev: using 2 of 2 trees" in printed
    assert summary["steps"] == 2  # 4 trees, batch 2, one epoch
    assert "FRAG" in ChartParser.from_pretrained(out / "best").labels  # learnt from the train file
    assert len(lines(out / "dev.trees")) == 2 and len(lines(out / "test.trees")) == 3
    assert summary["test"]["trees"] == summary["test"]["of_trees"] == 3
    again = evalb_files([own_files["test"]], out / "test.trees").to_dict()
    assert all(summary["test"][k] == again[k] for k in ("recall", "precision", "f1", "complete_match"))
    assert {split: entry["path"] for split, entry in summary["data"].items()} == {
        split: str(path.resolve()) for split, path in own_files.items()}
    assert json.loads((out / "settings.json").read_text())["data"] == summary["data"]


def test_without_a_test_file_there_is_no_test_parse(own_files, tmp_path):
    torch.set_num_threads(1)
    out = tmp_path / "run"
    data = TreebankFiles(train=str(own_files["train"]), dev=str(own_files["dev"]))
    summary = train_parser(tiny(out, **own()), show_progress=False, data=data)
    assert summary["test"] is None and not (out / "test.trees").exists()
    assert set(summary["data"]) == {"train", "dev"} and len(lines(out / "dev.trees")) == 2


def test_resume_on_other_files_is_refused(own_files, tmp_path):
    torch.set_num_threads(1)
    out = tmp_path / "run"
    data = TreebankFiles(train=str(own_files["train"]), dev=str(own_files["dev"]))
    train_parser(tiny(out, **own()), show_progress=False, data=data)
    own_files["train"].write_text(OWN_TRAIN.replace("Mary", "John"), encoding="utf-8")  # same path, other trees
    with pytest.raises(UserError, match=r"holds a run with other settings \(data: "):
        train_parser(tiny(out, **own()), show_progress=False, data=data)
    with pytest.raises(UserError, match=r"holds a run with other settings \(data: "):  # nor on the WSJ sample
        train_parser(tiny(out, **own()), show_progress=False)


@pytest.mark.parametrize("fields, message", [
    ({"train": "train"}, "give --train FILE and --dev FILE"),
    ({"dev": "dev"}, "give --train FILE and --dev FILE"),
    ({"dev": "dev", "test": "test"}, "give --train FILE and --dev FILE"),
])
def test_incomplete_file_sets_are_refused(own_files, fields, message):
    with pytest.raises(UserError, match=message):
        TreebankFiles(**{k: str(own_files[v]) for k, v in fields.items()})


def test_bad_files_give_the_reader_errors_before_training(own_files, tmp_path):
    out = tmp_path / "run"
    missing = tmp_path / "missing.mrg"
    with pytest.raises(UserError, match=rf"--test {re.escape(str(missing))}: not found; give a bracketed treebank"):
        train_parser(tiny(out, **own()), show_progress=False, data=TreebankFiles(
            train=str(own_files["train"]), dev=str(own_files["dev"]), test=str(missing)))
    own_files["dev"].write_text("(S (NP (DT The) (NN dog)) (VP (VBD ran)) (. .))\n(S (NP (DT a) (NN cat))\n")
    with pytest.raises(UserError, match=rf"^{re.escape(str(own_files['dev']))}:2: '\(' never closed"):
        train_parser(tiny(out, **own()), show_progress=False,
                     data=TreebankFiles(train=str(own_files["train"]), dev=str(own_files["dev"])))
    own_files["dev"].write_text("(S (-NONE- *T*-1))\n")
    with pytest.raises(UserError, match=rf"{re.escape(str(own_files['dev']))}:1: tree 1: tree has no words besides "
                                        "empty elements.*; remove that tree"):
        train_parser(tiny(out, **own()), show_progress=False,
                     data=TreebankFiles(train=str(own_files["train"]), dev=str(own_files["dev"])))
    assert not (out / "checkpoint").exists() and not (out / "best").exists()
