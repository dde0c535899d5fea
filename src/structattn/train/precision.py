"""Mixed precision for the trainers with a loop of their own (translation, parsing): autocast and loss scaling.

The Accelerate loop (:mod:`structattn.train.loop`) gets the same from ``Accelerator(mixed_precision=...)``; the
translation and parsing trainers write their own update step and use :class:`MixedPrecision`:

- ``fp32``: no autocast, no scaling: exactly the update of the runs recorded before the option existed.
- ``bf16``: forward and loss under ``torch.autocast(device.type, dtype=torch.bfloat16)``; weights, gradients and
  optimizer state stay float32. bfloat16 has float32's exponent range, so the loss is not scaled. Fast on CPUs
  with avx512_bf16 or AMX and on recent GPUs.
- ``fp16``: CUDA only (:func:`~structattn.train.config.check_precision` refuses it elsewhere): autocast float16 and
  a ``torch.amp.GradScaler`` that scales the loss so that small gradients survive float16, unscales them before
  clipping and skips an update whose gradients overflowed.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterable

import torch

from .config import LATER_FIELDS, check_precision

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


class MixedPrecision:
    """One run's precision on ``device``: :meth:`autocast` around forward and loss, :meth:`step` for the update.

    Raises :class:`~structattn.errors.UserError` for an unknown precision or fp16 off CUDA.
    """

    def __init__(self, precision: str, device: torch.device):
        check_precision(precision, on_cuda=device.type == "cuda")
        self.precision, self.device = precision, device
        # A disabled scaler passes everything through (scale(loss) is loss, step() is optimizer.step()).
        self.scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")

    def autocast(self) -> contextlib.AbstractContextManager:
        """The context to run forward passes and the loss in (a no-op in fp32)."""
        if self.precision == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=DTYPES[self.precision])

    def step(self, loss: torch.Tensor, optimizer: torch.optim.Optimizer, parameters: Iterable[torch.Tensor],
             clip_norm: float) -> None:
        """Backward from ``loss`` (a scalar), clip the true (unscaled) gradients to norm ``clip_norm`` (0 = no
        clipping) and take the optimizer step (in fp16 skipped when a gradient overflowed)."""
        self.scaler.scale(loss).backward()
        if clip_norm > 0:
            self.scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(parameters, clip_norm)
        self.scaler.step(optimizer)
        self.scaler.update()

    def state_dict(self) -> dict[str, Any]:
        """The loss scaler's state (floats and ints; empty unless fp16) for a checkpoint."""
        return self.scaler.state_dict() if self.scaler.is_enabled() else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.scaler.is_enabled() and state:
            self.scaler.load_state_dict(state)


def recorded_precision(saved: dict[str, Any]) -> dict[str, Any]:
    """A run's saved settings (JSON) with ``precision`` filled in where the run was recorded before the field
    existed: every such run trained in fp32 (:data:`~structattn.train.config.LATER_FIELDS`), so it resumes
    under the default and is refused under another precision."""
    return {"precision": LATER_FIELDS["precision"], **saved}
