"""RunningMean: the training loss between evaluations in every trainer's history."""
import pytest
import torch

from structattn.train.running_mean import RunningMean


def test_weighted_mean_then_reset():
    losses = RunningMean()
    assert losses.take() is None  # nothing added
    losses.add(2.0, 3)  # a per-token loss of 2 over 3 tokens
    losses.add(4.0, 1)
    assert losses.take() == pytest.approx((2.0 * 3 + 4.0) / 4)
    assert losses.take() is None  # taking resets
    losses.add(1.0)
    losses.add(2.0)
    assert losses.take() == pytest.approx(1.5)


def test_tensor_values_stay_tensors_until_read():
    losses = RunningMean()
    losses.add(torch.tensor(1.0))
    losses.add(torch.tensor(3.0))
    mean = losses.take()
    assert isinstance(mean, torch.Tensor) and mean.item() == pytest.approx(2.0)
