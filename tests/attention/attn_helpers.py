"""Helpers for the attention tests: tiny random encoders (hidden 32, 2 layers, 4 heads) and masks."""
from __future__ import annotations

import warnings

import torch

HIDDEN, LAYERS, HEADS = 32, 2, 4

COMMON = dict(vocab_size=100, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
              intermediate_size=64, max_position_embeddings=64)


def tiny_config(model_type: str = "bert", **overrides):
    """A tiny random config (hidden 32, 2 layers, 4 heads) of one of the supported architectures."""
    import transformers as T

    if model_type == "bert":
        cfg = T.BertConfig(**COMMON)
    elif model_type == "roberta":
        cfg = T.RobertaConfig(**COMMON, pad_token_id=1)
    elif model_type == "xlm-roberta":
        cfg = T.XLMRobertaConfig(**COMMON, pad_token_id=1)
    elif model_type == "electra":
        cfg = T.ElectraConfig(**COMMON, embedding_size=16)
    elif model_type == "distilbert":
        cfg = T.DistilBertConfig(vocab_size=100, dim=HIDDEN, n_layers=LAYERS, n_heads=HEADS, hidden_dim=64,
                                 max_position_embeddings=64)
    elif model_type == "albert":
        cfg = T.AlbertConfig(**COMMON, embedding_size=16)
    elif model_type == "modernbert":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cfg = T.ModernBertConfig(vocab_size=100, hidden_size=HIDDEN, num_hidden_layers=3, num_attention_heads=HEADS,
                                     intermediate_size=64, max_position_embeddings=64, local_attention=4,
                                     global_attn_every_n_layers=2, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                     cls_token_id=1, sep_token_id=2)
    else:
        raise ValueError(model_type)
    for key, value in overrides.items():
        setattr(cfg, key, value)
    return cfg


def tiny_model(model_type: str = "bert", base: str = "sdpa", task: str = "base", seed: int = 0, **overrides):
    """A tiny random model in eval mode with the stock attention ``base``."""
    import transformers as T

    torch.manual_seed(seed)
    cfg = tiny_config(model_type, **overrides)
    auto = {"base": T.AutoModel, "sequence-classification": T.AutoModelForSequenceClassification,
            "token-classification": T.AutoModelForTokenClassification,
            "question-answering": T.AutoModelForQuestionAnswering,
            "multiple-choice": T.AutoModelForMultipleChoice}[task]
    return auto.from_config(cfg, attn_implementation=base).eval()


def random_batch(b: int = 3, t: int = 12, seed: int = 0, pad: bool = True):
    """input_ids / attention_mask [b, t] (example 1 padded from position t-4) and a random structure mask
    [b, t, t] (diagonal True)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, 100, (b, t), generator=g)
    att = torch.ones(b, t, dtype=torch.long)
    if pad:
        att[1, t - 4:] = 0
    mask = torch.rand(b, t, t, generator=g) < 0.35
    mask |= torch.eye(t, dtype=torch.bool)
    return ids, att, mask


def window_mask(b: int, t: int, k: int) -> torch.Tensor:
    """|i - j| <= k as [b, t, t] bool."""
    i = torch.arange(t)
    return ((i[:, None] - i[None, :]).abs() <= k).expand(b, t, t).clone()



def require_fused() -> None:
    """Skip the calling test, with the reason, when the native fused kernel is unavailable here
    (no compiler, no ninja, ``STRUCTATTN_NO_NATIVE=1``, ...)."""
    import pytest

    from structattn.attention import kernels

    if not kernels.fused_available():
        pytest.skip(f"the fused native kernel is unavailable: {kernels.native.failure()}")


def kernel_inputs(b=3, h=4, n=11, m=None, d=8, gate_heads=1, seed=0, scale_qk=1.0, layout="bhnd", mask_heads=1):
    """q, k, v [b, h, n|m, d] (as transposed views of [b, n, h, d] when layout='bnhd', like HF),
    local [b, mask_heads, n, m], base [b, 1, n, m] (example 1 padded, example 2 fully padded), gate [b, G, n]."""
    m = n if m is None else m
    g = torch.Generator().manual_seed(seed)

    def rnd(rows, s=1.0):
        if layout == "bnhd":
            return (torch.randn(b, rows, h, d, generator=g) * s).transpose(1, 2)
        return torch.randn(b, h, rows, d, generator=g) * s

    q, k, v = rnd(n, scale_qk), rnd(m, scale_qk), rnd(m)
    local = torch.rand(b, mask_heads, n, m, generator=g) < 0.3
    base = torch.ones(b, 1, n, m, dtype=torch.bool)
    base[1, :, :, m - 3:] = False
    if b > 2:
        base[2] = False
    gate = torch.rand(b, gate_heads, n, generator=g)
    return q, k, v, local, base, gate


def kernel_grads(fn, q, k, v, local, gate, base, seed=1):
    """(out, dq, dk, dv, dgate) of ``fn(q, k, v, local, gate, base)`` under a fixed random output weighting."""
    q, k, v, gate = (t.detach().clone().requires_grad_() for t in (q, k, v, gate))
    out = fn(q, k, v, local, gate, base)
    w = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed)).to(out.device)
    (out * w).sum().backward()
    return out.detach(), q.grad, k.grad, v.grad, gate.grad
