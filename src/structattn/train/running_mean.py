"""The mean training loss between two evaluations, as every trainer's history records it (``train_loss``)."""
from __future__ import annotations

from typing import Any


class RunningMean:
    """A weighted mean of the values added since the last :meth:`take`.

    Values may be floats or 0-dim tensors: a tensor sum lets a GPU trainer add each step's loss without a
    device sync, and is read once per evaluation. Trainers write checkpoints only at evaluations, where the
    mean is taken and reset, so it never needs saving for a resume.
    """

    def __init__(self) -> None:
        self.total: Any = 0.0
        self.weight = 0

    def add(self, value: Any, weight: int = 1) -> None:
        """Add ``value`` counted ``weight`` times (e.g. a per-token loss and the batch's target tokens)."""
        self.total = self.total + value * weight
        self.weight += weight

    def take(self) -> Any:
        """The weighted mean since the last take (None if nothing was added), and start again."""
        mean = self.total / self.weight if self.weight else None
        self.total, self.weight = 0.0, 0
        return mean
