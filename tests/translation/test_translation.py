"""A whole translation run on a toy parallel corpus (micro model): outputs, resume after a kill, bad settings."""
from __future__ import annotations

import json
import random
import shutil

import pytest

from structattn.errors import UserError
from structattn.translation.trainer import NMTConfig, train_translation

WORDS = {"a": "ein", "dog": "Hund", "cat": "Katze", "runs": "läuft", "sleeps": "schläft", "big": "großer",
         "small": "kleiner", "here": "hier", "now": "jetzt"}


def _corpus(path, name: str, n: int, seed: int):
    rng = random.Random(seed)
    src, tgt = [], []
    keys = list(WORDS)
    for _ in range(n):
        words = [rng.choice(keys) for _ in range(rng.randint(2, 6))]
        src.append(" ".join(words) + ".")
        tgt.append(" ".join(WORDS[w] for w in words) + ".")
    (path / f"{name}.en").write_text("\n".join(src) + "\n", encoding="utf-8")
    (path / f"{name}.de").write_text("\n".join(tgt) + "\n", encoding="utf-8")


@pytest.fixture
def corpus(tmp_path):
    _corpus(tmp_path, "train", 120, 0)
    _corpus(tmp_path, "dev", 12, 1)
    _corpus(tmp_path, "test", 10, 2)
    return tmp_path


def _config(corpus, out, **extra) -> NMTConfig:
    base = dict(output_dir=str(out), size="micro", train_source=str(corpus / "train.en"),
                train_target=str(corpus / "train.de"), dev_source=str(corpus / "dev.en"),
                dev_target=str(corpus / "dev.de"), test_source=str(corpus / "test.en"),
                test_target=str(corpus / "test.de"), vocab_size=200, max_tokens=256, warmup=4, max_updates=9,
                eval_every=3, patience=10, average_last=2, beam=2, learning_rate=3e-3, threads=1,
                max_length=64)  # micro's positions
    base.update(extra)
    return NMTConfig(**base)


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["hybrid_gate", "yang"])
def test_a_run_writes_its_outputs_and_resumes_to_the_same_result(corpus, tmp_path, variant):
    whole = train_translation(_config(corpus, tmp_path / "whole", variant=variant), show_progress=False)
    out = tmp_path / "whole"
    for name in ("final/config.json", "final/tokenizer.json", "best/model.safetensors", "summary.json",
                 "hypotheses/test.de", "tokenizer/tokenizer.json"):
        assert (out / name).is_file(), name
    assert len(list((out / "recent").glob("*.safetensors"))) == 2
    hyps = (out / "hypotheses/test.de").read_text(encoding="utf-8").split("\n")[:-1]
    assert len(hyps) == 10
    assert whole["tests"]["test"]["hypotheses"].endswith("hypotheses/test.de")
    assert [h["step"] for h in whole["history"]] == [3, 6, 9]
    assert all(0 < h["train_loss"] < 20 for h in whole["history"])
    assert whole["final_model"] in whole["dev_bleu_beam"]

    killed = _config(corpus, tmp_path / "killed", variant=variant)
    assert train_translation(killed, show_progress=False, stop_after_updates=5) == {"stopped_at_update": 5}
    resumed = train_translation(killed, show_progress=False)
    def scores(summary):  # the timings differ; the dev BLEU and the training loss since the previous
        # evaluation (the resume starts at one) must not
        return [(h["step"], h["epoch"], h["dev_bleu"], h["train_loss"]) for h in summary["history"]]

    assert scores(resumed) == scores(whole)
    assert resumed["tests"]["test"]["bleu"] == whole["tests"]["test"]["bleu"]
    assert (tmp_path / "killed/hypotheses/test.de").read_text() == (out / "hypotheses/test.de").read_text()


def test_other_settings_in_the_same_folder_are_refused(corpus, tmp_path):
    cfg = _config(corpus, tmp_path / "run", max_updates=3, average_last=0)
    train_translation(cfg, show_progress=False, stop_after_updates=1)
    with pytest.raises(UserError, match="holds a run with other settings.*seed"):
        train_translation(_config(corpus, tmp_path / "run", max_updates=3, average_last=0, seed=2),
                          show_progress=False)
    saved = json.loads((tmp_path / "run/run_config.json").read_text())
    assert saved["seed"] == cfg.seed  # the first run's settings are kept


def test_own_data_needs_all_four_files(corpus, tmp_path):
    with pytest.raises(UserError, match="needs all four"):
        train_translation(NMTConfig(output_dir=str(tmp_path / "x"), train_source=str(corpus / "train.en")),
                          show_progress=False)


def test_dropped_training_pairs_are_a_note_on_stderr_with_file_and_line(corpus, tmp_path, capsys):
    lines = (corpus / "train.en").read_text(encoding="utf-8").splitlines()
    lines[2] = ""
    (corpus / "train.en").write_text("\n".join(lines) + "\n", encoding="utf-8")
    train_translation(_config(corpus, tmp_path / "run", max_updates=2, eval_every=2, test_source=None,
                              test_target=None), show_progress=False)
    err = capsys.readouterr().err
    assert (f"note: {corpus / 'train.en'}: train: kept 119 pairs, dropped 1 with an empty side (e.g. line 3 "
            "(empty source))") in err


def test_unknown_variant_lists_the_valid_ones(corpus, tmp_path):
    with pytest.raises(UserError, match="valid variants: transformer, local, hybrid_gate"):
        train_translation(_config(corpus, tmp_path / "y", variant="hybrid"), show_progress=False)


def test_pairs_longer_than_the_sizes_positions_are_a_clear_error_before_anything_is_written(corpus, tmp_path):
    # micro has 64 positions: the default --max-length 100 used to end in an IndexError on a long batch
    with pytest.raises(UserError, match="--max-length 100: size 'micro' has 64 positions.*--max-length 64 or less"):
        train_translation(_config(corpus, tmp_path / "run", size="micro", max_length=100), show_progress=False)
    assert not (tmp_path / "run").exists()


# ---------------------------------------------------------------------------------------------- no pickle
def _to_old_layout(ckpt, layout: str, extra: dict | None = None) -> None:
    """Turn the engine's checkpoint into a layout earlier versions wrote: ``tensors`` (model.safetensors,
    tensors.pt with optimizer and torch RNG, state.json with the trainer state and Python/NumPy RNG states) or
    ``trainer`` (trainer.pt: optimizer, torch and Python RNG states in one torch.save; no NumPy state); no
    settings.json (run_config.json was the record). ``extra`` adds entries to trainer.pt."""
    import torch

    state = json.loads((ckpt / "state.json").read_text())
    rng = json.loads((ckpt / "rng-0.json").read_text())
    tensors = torch.load(ckpt / "tensors.pt", weights_only=True)
    torch_rng = torch.tensor(rng["torch"], dtype=torch.uint8)
    old = {"step": state["step"], "epoch": state["epoch"], "batch_in_epoch": state["step_in_epoch"],
           "best_bleu": state["best"], "best_step": state["best_step"],
           "evals_without_improvement": state["evals_without_improvement"], "history": state["history"],
           "recent": state["extra"].get("recent", []), "train_seconds": state["train_seconds"],
           "target_tokens": state["extra"]["target_tokens"], "elapsed_seconds": state["elapsed_seconds"],
           "finished": state["finished"]}
    if layout == "tensors":
        old.update(python_rng=rng["python"], numpy_rng=rng["numpy"])
        torch.save({"optimizer": tensors["optimizer"], "rng": {"torch": torch_rng}, "scaler": {}}, ckpt / "tensors.pt")
    else:
        python_rng = rng["python"]
        torch.save({"optimizer": tensors["optimizer"], "torch_rng": torch_rng,
                    "python_rng": (python_rng[0], tuple(python_rng[1]), python_rng[2]), **(extra or {})},
                   ckpt / "trainer.pt")
        (ckpt / "tensors.pt").unlink()
    (ckpt / "rng-0.json").unlink()
    (ckpt / "manifest.json").unlink(missing_ok=True)  # earlier versions wrote no manifest
    (ckpt / "state.json").write_text(json.dumps(old))
    (ckpt.parent / "settings.json").unlink()
    shutil.rmtree(ckpt.parent / "previous-checkpoint", ignore_errors=True)  # nor kept the one before


class _RunsCode:
    """Unpickling this touches ``path``: what a hostile checkpoint could do with any code."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        from pathlib import Path

        return Path.touch, (Path(self.path),)


@pytest.mark.parametrize("layout", ["tensors", "trainer"])
def test_a_checkpoint_in_an_earlier_layout_is_refused_naming_the_version_without_reading_it(corpus, tmp_path,
                                                                                          layout):
    cfg = _config(corpus, tmp_path / "run", max_updates=3, eval_every=1, average_last=0)
    train_translation(cfg, show_progress=False, stop_after_updates=2)
    marker = tmp_path / "code-ran"
    _to_old_layout(tmp_path / "run" / "checkpoint", layout, {"hook": _RunsCode(marker)})
    with pytest.raises(UserError, match=r"written by structattn 0\.2\.0 or earlier.*structattn==0\.2\.0"):
        train_translation(cfg, show_progress=False)
    assert not marker.exists()


# ---------------------------------------------------------------------------------------------- precision
def test_bf16_trains_in_bfloat16_gives_finite_scores_and_a_resume_must_match_it(corpus, tmp_path, monkeypatch):
    import math

    import torch

    from structattn.translation import model as models

    dtypes, build = set(), models.build_model

    def recording(*args, **kwargs):  # the dtype every linear layer computes in while training
        model = build(*args, **kwargs)
        for module in model.modules():
            if isinstance(module, torch.nn.Linear):
                module.register_forward_hook(lambda m, i, out: dtypes.add(out.dtype) if m.training else None)
        return model

    monkeypatch.setattr(models, "build_model", recording)
    cfg = dict(max_updates=4, eval_every=2, average_last=0)
    summary = train_translation(_config(corpus, tmp_path / "run", precision="bf16", **cfg), show_progress=False)
    assert dtypes == {torch.bfloat16}
    assert all(math.isfinite(h["train_loss"]) and math.isfinite(h["dev_bleu"]) for h in summary["history"])
    assert math.isfinite(summary["tests"]["test"]["bleu"]) and summary["config"]["precision"] == "bf16"
    assert json.loads((tmp_path / "run/run_config.json").read_text())["precision"] == "bf16"
    with pytest.raises(UserError, match="other settings \\(precision: 'bf16' -> 'fp32'\\)"):
        train_translation(_config(corpus, tmp_path / "run", **cfg), show_progress=False)


def test_fp16_on_a_cpu_is_a_clear_error_before_anything_is_written(corpus, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("fp16 is allowed on a CUDA machine")
    with pytest.raises(UserError, match="--precision fp16 needs a CUDA GPU.*use --precision bf16"):
        train_translation(_config(corpus, tmp_path / "run", precision="fp16"), show_progress=False)
    assert not (tmp_path / "run").exists()
