"""A whole translation run on a toy parallel corpus (micro model): outputs, resume after a kill, bad settings."""
from __future__ import annotations

import json
import random

import pytest

from structattn.errors import UserError
from structattn.train.translation import NMTConfig, train_translation

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
                eval_every=3, patience=10, average_last=2, beam=2, learning_rate=3e-3, threads=1)
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
    assert saved["seed"] == 1


def test_own_data_needs_all_four_files(corpus, tmp_path):
    with pytest.raises(UserError, match="needs all four"):
        train_translation(NMTConfig(output_dir=str(tmp_path / "x"), train_source=str(corpus / "train.en")),
                          show_progress=False)


def test_unknown_variant_lists_the_valid_ones(corpus, tmp_path):
    with pytest.raises(UserError, match="valid variants: transformer, local, hybrid_gate"):
        train_translation(_config(corpus, tmp_path / "y", variant="hybrid"), show_progress=False)
