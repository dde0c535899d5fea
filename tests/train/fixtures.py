"""A tiny random BERT (with the default encoder's WordPiece vocabulary) and tiny data folders: SST-2-like,
SQuAD 1.1-like and RACE-like."""
from __future__ import annotations

import json
import random
from pathlib import Path

POS = ["good", "great", "fine", "lovely", "superb", "fun"]
NEG = ["bad", "awful", "dull", "boring", "poor", "weak"]
FILL = ["the", "film", "is", "a", "story", "very", "quite", "and", "plot", "acting"]


def point_at(tiny: dict, monkeypatch) -> dict:
    """Point the library at a module's tiny data folder and parse cache (``tiny["data"]``, ``tiny["cache"]``) for
    one test; returns ``tiny``."""
    monkeypatch.setenv("STRUCTATTN_DATA", str(tiny["data"]))
    monkeypatch.setenv("STRUCTATTN_CACHE", str(tiny["cache"]))
    return tiny


def make_tiny_model(folder: Path, dropout: float = 0.1) -> Path:
    """A tiny random BERT saved in ``folder`` (``dropout``: its hidden and attention dropout, BERT's 0.1 unless
    told; the overfitting tests take 0)."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    from structattn.settings import default_encoder

    tok = AutoTokenizer.from_pretrained(default_encoder())
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=128, hidden_dropout_prob=dropout,
                     attention_probs_dropout_prob=dropout)
    import torch
    torch.manual_seed(0)
    BertModel(cfg).save_pretrained(folder)  # a bare encoder, like a pretrained checkpoint
    tok.save_pretrained(folder)
    return folder


def make_tiny_sst2(root: Path, n_train: int = 64, n_dev: int = 32, seed: int = 0) -> Path:
    rng = random.Random(seed)

    def rows(n):
        out = []
        for _ in range(n):
            label = rng.randint(0, 1)
            words = [rng.choice(FILL) for _ in range(rng.randint(2, 6))]
            words.insert(rng.randint(0, len(words)), rng.choice(POS if label else NEG))
            out.append(f"{' '.join(words)}\t{label}")
        return out

    (root / "sst2").mkdir(parents=True, exist_ok=True)
    (root / "sst2" / "train.tsv").write_text("sentence\tlabel\n" + "\n".join(rows(n_train)) + "\n", encoding="utf-8")
    (root / "sst2" / "dev.tsv").write_text("sentence\tlabel\n" + "\n".join(rows(n_dev)) + "\n", encoding="utf-8")
    return root


WORDS = ["the", "river", "flows", "north", "past", "a", "city", "built", "by", "Romans", "in", "century",
         "merchants", "traded", "salt", "and", "wine", "there"]


def tiny_squad11(root: Path, seed: int = 0) -> Path:
    """squad11/{train,dev} files: 6 paragraphs each, 3 questions per paragraph, answers inside the context."""
    rng = random.Random(seed)

    def split(n_par, tag):
        paragraphs = []
        for p in range(n_par):
            sentences = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 9))) + " ." for _ in range(3)]
            context = " ".join(sentences)
            qas = []
            for k in range(3):
                words = context.split()
                i = rng.randrange(len(words) - 3)
                text = " ".join(words[i:i + rng.randint(1, 3)])
                start = len(" ".join(words[:i])) + (1 if i else 0)
                assert context[start:start + len(text)] == text
                qas.append({"id": f"{tag}{p}-{k}", "question": f"what {words[i + 1]} {rng.choice(WORDS)} ?",
                            "answers": [{"text": text, "answer_start": start}]})
            paragraphs.append({"context": context, "qas": qas})
        return {"version": "1.1", "data": [{"title": f"{tag}-article", "paragraphs": paragraphs}]}

    folder = root / "squad11"
    folder.mkdir(parents=True, exist_ok=True)
    from structattn.tasks.squad import SQUAD11_DEV_FILE, SQUAD11_TRAIN_FILE

    (root / SQUAD11_TRAIN_FILE).write_text(json.dumps(split(6, "t")), encoding="utf-8")
    (root / SQUAD11_DEV_FILE).write_text(json.dumps(split(4, "d")), encoding="utf-8")
    return root


def tiny_race(root: Path, seed: int = 0) -> Path:
    """race/{train,dev,test}/middle: 4 passages each, 2 questions with 4 options."""
    rng = random.Random(seed)
    for split in ("train", "dev", "test"):
        folder = root / "race" / split / "middle"
        folder.mkdir(parents=True, exist_ok=True)
        for n in range(4):
            article = " ".join(" ".join(rng.choice(WORDS) for _ in range(8)) + "." for _ in range(3))
            doc = {"article": article, "questions": ["Where does the river flow?", "Who built _ ?"],
                   "options": [[rng.choice(WORDS) for _ in range(4)] for _ in range(2)],
                   "answers": [rng.choice("ABCD") for _ in range(2)], "id": f"middle{n}.txt"}
            (folder / f"{n}.txt").write_text(json.dumps(doc), encoding="utf-8")
    return root


def label_logits(features, value: float = 10.0):
    """Start and end logits that read span-QA labels back: per window ``[T]`` arrays, ``value`` at the labelled
    start (end) position and 0 elsewhere (so a window labelled null scores ``2 * value`` for no answer)."""
    import numpy as np

    starts, ends = [], []
    for f in features:
        st, en = np.zeros(len(f["input_ids"])), np.zeros(len(f["input_ids"]))
        st[f["start_positions"]] = en[f["end_positions"]] = value
        starts.append(st)
        ends.append(en)
    return starts, ends


def train_tiny_reader(root: Path, run_dir: Path) -> Path:
    """A tiny SG-Net (dual) span-QA reader trained through the real trainer (3 updates, windows of 64 tokens sharing
    at most 16) on :func:`tiny_squad11` data written to ``root/data``, with its run folder ``run_dir`` and its parse
    cache under ``root/cache``. Returns the data folder (``STRUCTATTN_DATA`` for what reads the run)."""
    import os

    from structattn.run_config import RunConfig
    from structattn.trainers import trainer_for

    data = root / "data"
    tiny_squad11(data)
    saved = {k: os.environ.get(k) for k in ("STRUCTATTN_DATA", "STRUCTATTN_CACHE")}
    os.environ.update(STRUCTATTN_DATA=str(data), STRUCTATTN_CACHE=str(root / "cache"))
    try:
        cfg = RunConfig(task="squad11", model=str(make_tiny_model(root / "model")), sgnet="dual", max_length=64,
                          stride=16, batch_size=4, eval_batch_size=8, max_steps=3, eval_every=0, learning_rate=1e-3,
                          output_dir=str(run_dir))
        trainer_for(cfg, show_progress=False).train()
    finally:
        for key, value in saved.items():
            if value is None:
                del os.environ[key]
            else:
                os.environ[key] = value
    return data
