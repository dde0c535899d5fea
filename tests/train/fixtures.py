"""A tiny random BERT (with the default encoder's WordPiece vocabulary) and a tiny SST-2-like data folder."""
from __future__ import annotations

import random
from pathlib import Path

POS = ["good", "great", "fine", "lovely", "superb", "fun"]
NEG = ["bad", "awful", "dull", "boring", "poor", "weak"]
FILL = ["the", "film", "is", "a", "story", "very", "quite", "and", "plot", "acting"]


def make_tiny_model(folder: Path) -> Path:
    from transformers import AutoTokenizer, BertConfig, BertModel

    from structattn.settings import default_encoder

    tok = AutoTokenizer.from_pretrained(default_encoder())
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=128)
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
