"""Probing a frozen translation encoder (Xu et al. 2019, section 5.1; Conneau et al. 2018's protocol).

The sentence vector is the mean of the last encoder layer over the sentence's pieces (``</s>`` included, padding
excluded), computed once with the encoder frozen; a one-hidden-layer MLP (50 units, ReLU, dropout 0.1, Adam 1e-3,
batches of 64) is trained on it, early-stopped on dev accuracy (patience 5 epochs, at most 100), and its test
accuracy at the best dev epoch is reported. Features are standardised with the training split's mean and std.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch


@torch.no_grad()
def sentence_vectors(translator, texts: Sequence[str], max_tokens: int = 4096) -> np.ndarray:
    """[N, d] float32: mean of the last encoder layer over each text's pieces (the encoder in eval mode)."""
    from ..heads.translation import TranslationCollator, build_source_structure, token_batches

    model, tokenizer = translator.model.eval(), translator.tokenizer
    ids = translator.encode(texts)
    structure = None
    if translator.needs_structure:
        from ..models.encoder import mechanism_of

        mech = mechanism_of(model)
        structure = build_source_structure(tokenizer, texts, mech.relation, translator.parser_name,
                                           **mech.relation_options())
    collate = TranslationCollator(tokenizer.pad_token_id)
    lengths = [len(x) for x in ids]
    out = np.zeros((len(texts), model.config.d_model), dtype=np.float32)
    for batch_idx in token_batches(lengths, lengths, max_tokens, seed=None):
        batch = collate([ids[i] for i in batch_idx], None, structure, batch_idx if structure is not None else None)
        hidden = model.get_encoder()(**batch).last_hidden_state  # [b, S, d]
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        mean = (hidden * mask).sum(1) / mask.sum(1)
        out[batch_idx] = mean.float().numpy()
    return out


def train_probe(x_train: np.ndarray, y_train: Sequence[str], x_dev: np.ndarray, y_dev: Sequence[str],
                x_test: np.ndarray, y_test: Sequence[str], classes: Sequence[str], seed: int = 0, hidden: int = 50,
                max_epochs: int = 100, patience: int = 5, batch_size: int = 64, lr: float = 1e-3) -> dict:
    """Train the MLP probe; ``{"dev_accuracy", "test_accuracy", "best_epoch", "majority_test_accuracy"}``."""
    index = {c: i for i, c in enumerate(classes)}
    ys = [torch.tensor([index[y] for y in ys_], dtype=torch.long) for ys_ in (y_train, y_dev, y_test)]
    mean, std = x_train.mean(0), x_train.std(0) + 1e-6
    xs = [torch.from_numpy((x - mean) / std).float() for x in (x_train, x_dev, x_test)]
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    probe = torch.nn.Sequential(torch.nn.Linear(xs[0].shape[1], hidden), torch.nn.ReLU(), torch.nn.Dropout(0.1),
                                torch.nn.Linear(hidden, len(classes)))
    optim = torch.optim.Adam(probe.parameters(), lr=lr)

    def accuracy(x, y) -> float:
        probe.eval()
        with torch.no_grad():
            return float((probe(x).argmax(-1) == y).float().mean())

    best = (-1.0, 0.0, -1)
    waited = 0
    for epoch in range(max_epochs):
        probe.train()
        order = torch.randperm(len(ys[0]), generator=gen)
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            loss = torch.nn.functional.cross_entropy(probe(xs[0][idx]), ys[0][idx])
            optim.zero_grad()
            loss.backward()
            optim.step()
        dev = accuracy(xs[1], ys[1])
        if dev > best[0]:
            best, waited = (dev, accuracy(xs[2], ys[2]), epoch + 1), 0
        else:
            waited += 1
            if waited >= patience:
                break
    majority = max(set(y_train), key=list(y_train).count)
    return {"dev_accuracy": 100 * best[0], "test_accuracy": 100 * best[1], "best_epoch": best[2],
            "majority_test_accuracy": 100 * float(np.mean([y == majority for y in y_test]))}


def probe_model(translator, tasks, seed: int = 0, progress=None) -> dict:
    """Every task of ``tasks`` (:class:`~structattn.tasks.probing.ProbingTask`) on one model: {task: result}."""
    results = {}
    for task in tasks:
        vectors = {split: sentence_vectors(translator, task.texts[split]) for split in ("train", "dev", "test")}
        results[task.name] = {**train_probe(vectors["train"], task.labels["train"], vectors["dev"], task.labels["dev"],
                                            vectors["test"], task.labels["test"], task.classes, seed=seed),
                              "classes": len(task.classes),
                              "sizes": {s: len(task.texts[s]) for s in ("train", "dev", "test")}}
        if progress is not None:
            progress(task.name, results[task.name])
    return results
