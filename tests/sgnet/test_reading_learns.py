"""Each reading head can learn: a tiny random BERT (hidden 32, 2 layers, no dropout) trained by the real trainers
(optimizer, schedule, clipping, loss, decoding, threshold) overfits a handful of questions, and is scored on those
same questions. Span QA: answerable and unanswerable SQuAD 2.0-style questions whose passages need several
windows (so some windows of answerable questions are labelled null). Multiple choice: every ``--pool``."""
from __future__ import annotations

import math
import random

import pytest
import torch

from fixtures import make_tiny_model
from structattn.tasks.multiple_choice import MCQuestion
from structattn.tasks.squad import read_squad
from structattn.run_config import RunConfig
from structattn.trainers import trainer_for

WORDS = ["the", "river", "flows", "north", "past", "a", "city", "built", "by", "Romans", "in", "century",
         "merchants", "traded", "salt", "and", "wine", "there", "king", "castle", "bridge", "old"]
NOUNS = ["apple", "horse", "green", "seven", "paper", "music", "winter", "doctor"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("learns")
    return {"model": make_tiny_model(root / "model", dropout=0.0), "root": root}


@pytest.fixture
def env(tiny, monkeypatch):
    monkeypatch.setenv("STRUCTATTN_CACHE", str(tiny["root"] / "cache"))
    return tiny


def squad2_like(n_answerable: int = 4, n_unanswerable: int = 4, sentences: int = 5, seed: int = 0) -> dict:
    """One paragraph per question; answers of 1-2 words anywhere in passages of ``sentences`` sentences."""
    rng = random.Random(seed)
    paragraphs = []
    for p in range(n_answerable + n_unanswerable):
        context = " ".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 10))) + " ."
                           for _ in range(sentences))
        words = context.split()
        qa = {"id": f"q{p}", "question": " ".join(rng.choice(WORDS) for _ in range(5)) + " ?", "answers": [],
              "is_impossible": True}
        if p < n_answerable:
            i = rng.randrange(len(words) - 3)
            i += words[i] == "."
            text = " ".join(words[i:i + rng.randint(1, 2)])
            start = len(" ".join(words[:i])) + (1 if i else 0)
            qa.update(answers=[{"text": text, "answer_start": start}], is_impossible=False)
        paragraphs.append({"context": context, "qas": [qa]})
    return {"version": "v2.0", "data": [{"title": "A", "paragraphs": paragraphs}]}


def mc_questions(n: int = 8, seed: int = 0) -> list[MCQuestion]:
    """Half cloze questions (the option fills the blank), half with the option after the question."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        passage = " ".join(" ".join(rng.choice(WORDS) for _ in range(8)) + "." for _ in range(3))
        out.append(MCQuestion(qid=f"p{i}:0", passage=passage, question="What is it?" if i % 2 else "It is _ .",
                              options=rng.sample(NOUNS, 4), label=rng.randrange(4), group="middle"))
    return out


def mean_loss(trainer, feats) -> float:
    """The training loss over ``feats`` in one batch, in eval mode (no dropout either way)."""
    model = trainer.model
    model.eval()
    with torch.no_grad():
        return float(model(**trainer.collator()(feats)).loss)


def overfit(trainer, data, feats) -> tuple[float, float, dict]:
    """Train ``trainer`` on ``feats`` and evaluate on the same questions: (loss before, loss after, last metrics)."""
    trainer.features = lambda split, limit=0, training=False: (data, feats)
    before = mean_loss(trainer, feats)
    summary = trainer.train()
    return before, mean_loss(trainer, feats), summary["history"][-1]


def config(tiny, task, name, max_steps: int, **kw) -> RunConfig:
    """Training on the questions themselves, one evaluation at the end, nothing written but the config."""
    base = dict(task=task, model=str(tiny["model"]), learning_rate=2e-3, max_steps=max_steps, eval_every=max_steps,
                eval_split="train", save_checkpoints=False, keep_best_model=False, output_dir=str(tiny["root"] / name))
    return RunConfig(**{**base, **kw})


@pytest.mark.parametrize("sgnet", ["none", "dual"])
def test_span_qa_overfits_answerable_and_unanswerable_questions(env, sgnet):
    dataset = squad2_like()
    cfg = config(env, "squad2", f"qa-{sgnet}", sgnet=sgnet, max_length=48, stride=16, batch_size=8, max_steps=120)
    trainer = trainer_for(cfg, show_progress=False)
    data, feats = trainer.features_of(read_squad(dataset), dataset, training=True)
    answerable = {f["example_index"] for f in feats if f["start_positions"] > 0}
    assert len(feats) > len(data.questions)  # passages need several windows ...
    assert any(f["example_index"] in answerable and f["start_positions"] == 0 for f in feats)  # ... not all hold it
    before, after, metrics = overfit(trainer, data, feats)
    print(f"span QA ({sgnet}): {len(feats)} windows; loss {before:.3f} -> {after:.3f}; F1 {metrics['f1']:.1f} "
          f"(HasAns {metrics['HasAns_f1']:.1f}, NoAns {metrics['NoAns_f1']:.1f})")
    assert after < 0.25 * before
    assert metrics["HasAns_f1"] >= 90 and metrics["NoAns_f1"] >= 90 and metrics["f1"] >= 90


@pytest.mark.parametrize("sgnet, pool", [("none", "first"), ("none", "mean"), ("none", "option"),
                                         ("dual", "option")])
def test_multiple_choice_overfits_with_every_pool(env, sgnet, pool):
    cfg = config(env, "race_m", f"mc-{sgnet}-{pool}", sgnet=sgnet, pool=pool, max_length=64, batch_size=4,
                 max_steps=80)
    trainer = trainer_for(cfg, show_progress=False)
    data, feats = trainer.features_of(mc_questions())
    before, after, metrics = overfit(trainer, data, feats)
    print(f"multiple choice ({sgnet}, pool {pool}): loss {before:.3f} -> {after:.3f}; accuracy "
          f"{metrics['accuracy']:.3f}")
    assert before == pytest.approx(math.log(4), abs=0.01)  # chance at the start
    assert after < 0.5 and metrics["accuracy"] >= 0.9
