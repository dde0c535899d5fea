"""MixedPrecision, the update step of the translation and parsing trainers: fp32 is the plain step, bf16 computes
in bfloat16 with float32 weights, fp16's loss scaling (run here on the CPU, which the trainers refuse) unscales
before clipping, skips an overflowed step and round-trips its state."""
from __future__ import annotations

import pytest
import torch

from structattn.errors import UserError
from structattn.train import precision as precision_module
from structattn.train.precision import MixedPrecision, recorded_precision

CPU = torch.device("cpu")


def _model_and_batch(seed: int = 0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    return model, torch.randn(4, 8), torch.randn(4, 1)


def _loss(model, x, y):
    return torch.nn.functional.mse_loss(model(x).float(), y)


def test_fp32_is_the_plain_update_bit_for_bit():
    plain, x, y = _model_and_batch()
    mixed, _, _ = _model_and_batch()
    opt_plain, opt_mixed = (torch.optim.Adam(m.parameters(), lr=1e-2) for m in (plain, mixed))
    amp = MixedPrecision("fp32", CPU)
    for _ in range(3):
        opt_plain.zero_grad()
        _loss(plain, x, y).backward()
        torch.nn.utils.clip_grad_norm_(plain.parameters(), 0.5)
        opt_plain.step()
        opt_mixed.zero_grad()
        with amp.autocast():
            loss = _loss(mixed, x, y)
        amp.step(loss, opt_mixed, mixed.parameters(), 0.5)
    assert all(torch.equal(a, b) for a, b in zip(plain.parameters(), mixed.parameters()))
    assert amp.state_dict() == {}


def test_bf16_computes_in_bfloat16_and_keeps_float32_weights():
    model, x, y = _model_and_batch()
    amp = MixedPrecision("bf16", CPU)
    with amp.autocast():
        assert model(x).dtype == torch.bfloat16
        loss = _loss(model, x, y)
    before = [p.detach().clone() for p in model.parameters()]
    amp.step(loss, torch.optim.SGD(model.parameters(), lr=0.1), model.parameters(), 0.0)
    assert all(p.dtype == torch.float32 and p.grad.dtype == torch.float32 for p in model.parameters())
    assert not all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


@pytest.fixture
def fp16_on_cpu(monkeypatch):
    """fp16 with a CPU GradScaler: the trainers refuse it (check_precision), the scaling logic is the same."""
    monkeypatch.setattr(precision_module, "check_precision", lambda precision, on_cuda: None)
    return MixedPrecision("fp16", CPU)


def test_fp16_clips_the_unscaled_gradients(fp16_on_cpu):
    model, x, y = _model_and_batch()
    opt = torch.optim.SGD(model.parameters(), lr=0.0)  # lr 0: only the gradients are looked at
    with fp16_on_cpu.autocast():
        loss = _loss(model, x, y) * 1e-2  # scaled by 65536, its gradients stay within float16's range
    fp16_on_cpu.step(loss, opt, model.parameters(), 1e-4)
    norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()]))
    assert fp16_on_cpu.state_dict()["scale"] == 65536.0  # the loss was scaled, no overflow ...
    assert norm == pytest.approx(1e-4, rel=1e-3)  # ... and the clipped norm is that of the true gradients


def test_fp16_skips_an_overflowed_step_lowers_the_scale_and_round_trips_it(fp16_on_cpu, monkeypatch):
    model, x, y = _model_and_batch()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = [p.detach().clone() for p in model.parameters()]
    scale = fp16_on_cpu.state_dict()["scale"]
    with fp16_on_cpu.autocast():
        loss = _loss(model, x, y) * float("inf")
    fp16_on_cpu.step(loss, opt, model.parameters(), 0.0)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))  # skipped
    saved = fp16_on_cpu.state_dict()
    assert saved["scale"] == scale * 0.5
    again = MixedPrecision("fp16", CPU)
    again.load_state_dict(saved)
    assert again.state_dict() == saved


def test_unknown_precision_and_fp16_on_cpu_are_user_errors():
    with pytest.raises(UserError, match="unknown precision 'fp8'; valid: fp32, bf16, fp16"):
        MixedPrecision("fp8", CPU)
    with pytest.raises(UserError, match="needs a CUDA GPU"):
        MixedPrecision("fp16", CPU)


def test_runs_saved_before_the_field_count_as_fp32():
    assert recorded_precision({"seed": 1}) == {"precision": "fp32", "seed": 1}
    assert recorded_precision({"precision": "bf16"}) == {"precision": "bf16"}
