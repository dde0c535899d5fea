"""Run by test_distributed.py: gradients of one batch split over processes (Accelerate, CPU, gloo).

usage: ddp_grads.py MODEL_DIR OUT_FILE   (under `accelerate launch`, or plain python for one process)
"""
import sys

import torch
from accelerate import Accelerator

from structattn.models.encoder import from_pretrained


def fixed_batch(n=8, T=12, vocab=1000, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1000, 1000 + vocab, (n, T), generator=g)
    att = torch.ones(n, T, dtype=torch.long)
    att[::3, -3:] = 0  # some padding
    idx = torch.arange(T)
    window = (idx[:, None] - idx[None, :]).abs() <= 2
    structure = window.expand(n, T, T).clone() | (torch.rand(n, T, T, generator=g) < 0.2)
    labels = torch.randint(0, 2, (n,), generator=g)
    return {"input_ids": ids, "attention_mask": att, "structure_mask": structure, "labels": labels}


def gradients(model, batch):
    out = model(**batch)
    return out.loss


def main(model_dir, out_file):
    acc = Accelerator(cpu=True)
    torch.manual_seed(0)
    model = from_pretrained(model_dir, task="sequence-classification", mechanism="sla", num_labels=2,
                            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = acc.prepare(model)
    model.train()
    batch = fixed_batch()
    n = batch["input_ids"].shape[0]
    per = n // acc.num_processes
    shard = {k: v[acc.process_index * per:(acc.process_index + 1) * per] for k, v in batch.items()}
    loss = model(**shard).loss
    acc.backward(loss)
    if acc.is_main_process:
        grads = {name: p.grad.detach().clone() for name, p in acc.unwrap_model(model).named_parameters()
                 if p.grad is not None}
        torch.save({"grads": grads, "world": acc.num_processes}, out_file)
    acc.wait_for_everyone()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
