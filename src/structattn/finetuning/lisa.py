"""LISA-style parent supervision (Strubell et al. 2018, as the SLA paper applies it).

One attention head per layer (the last one) is trained to put its attention on
each word's syntactic parent. The head's attention logits are recomputed from
the layer's input with the layer's own query/key projections, so the loss
trains exactly the weights that head uses; nothing in the forward pass changes.

Loss: mean over supervised layers of the cross-entropy between
softmax(q_t · k / sqrt(d)) over the non-padding keys and the parent position
(``parent_targets`` ``[b, T]``, -100 = no supervision).
"""
from __future__ import annotations

from contextlib import contextmanager

import torch
import torch.nn.functional as F

from ..errors import UserError


def _projections(module):
    """(query linear, key linear, number of heads) of a self-attention module, or None."""
    if hasattr(module, "query") and hasattr(module, "key") and hasattr(module, "num_attention_heads"):
        return module.query, module.key, module.num_attention_heads
    if hasattr(module, "q_lin") and hasattr(module, "k_lin") and hasattr(module, "n_heads"):
        return module.q_lin, module.k_lin, module.n_heads
    return None


class LisaSupervision:
    """Hooks on every self-attention module that record the last head's attention logits.

    Use::

        lisa = LisaSupervision(model)
        with lisa.capture(parent_targets, attention_mask):
            out = model(**batch)
        loss = out.loss + weight * lisa.loss()
    """

    def __init__(self, model, head: int = -1):
        self.modules = [m for m in model.modules() if _projections(m) is not None]
        if not self.modules:
            raise UserError(f"LISA supervision needs self-attention modules with query/key projections "
                            f"(BERT, RoBERTa, ELECTRA, XLM-R, ALBERT, DistilBERT); {type(model).__name__} has none")
        self.head = head
        self._targets = None
        self._pad = None
        self._losses: list[torch.Tensor] = []
        self._count, self._hits, self._total = False, 0, 0
        for m in self.modules:
            m.register_forward_pre_hook(self._hook, with_kwargs=True)

    def _hook(self, module, args, kwargs):
        if self._targets is None:
            return None
        hidden = args[0] if args else kwargs.get("hidden_states", kwargs.get("query"))
        q_lin, k_lin, n_heads = _projections(module)
        d = q_lin.out_features // n_heads
        h = self.head % n_heads
        q = F.linear(hidden, q_lin.weight[h * d:(h + 1) * d], q_lin.bias[h * d:(h + 1) * d])  # [b, T, d]
        k = F.linear(hidden, k_lin.weight[h * d:(h + 1) * d], k_lin.bias[h * d:(h + 1) * d])
        logits = q @ k.transpose(1, 2) / d ** 0.5  # [b, T, T]
        logits = logits.masked_fill(~self._pad[:, None, :], torch.finfo(logits.dtype).min)
        self._losses.append(F.cross_entropy(logits.flatten(0, 1).float(), self._targets.flatten(), ignore_index=-100))
        if self._count:
            with torch.no_grad():
                valid = self._targets != -100
                self._hits += int(((logits.argmax(-1) == self._targets) & valid).sum())
                self._total += int(valid.sum())
        return None

    @contextmanager
    def capture(self, parent_targets: torch.Tensor, attention_mask: torch.Tensor, count_hits: bool = False):
        """Record losses during one forward pass. ``parent_targets`` ``[b, T]``, ``attention_mask`` ``[b, T]``.

        ``count_hits``: also count how often the supervised head's strongest key is the parent
        (summed over layers and passes until
        [`parent_accuracy`][structattn.finetuning.lisa.LisaSupervision.parent_accuracy] is read)."""
        self._targets = parent_targets.to(attention_mask.device)
        self._pad = attention_mask.bool()
        self._losses = []
        self._count = count_hits
        try:
            yield self
        finally:
            self._targets, self._count = None, False

    def parent_accuracy(self) -> float | None:
        """Fraction of supervised tokens whose supervised head attends most to the parent (all layers),
        counted since the last call; None when nothing was counted."""
        acc = self._hits / self._total if self._total else None
        self._hits = self._total = 0
        return acc

    def loss(self) -> torch.Tensor:
        if not self._losses:
            raise RuntimeError("no LISA loss was recorded; call the model inside lisa.capture(...)")
        losses = [l for l in self._losses if torch.isfinite(l)]  # a batch with no target gives NaN
        out = torch.stack(losses).mean() if losses else self._losses[0].new_zeros(())
        self._losses = []
        return out
