"""The engine's update step in each precision: fp32 is the plain step, bf16 computes in bfloat16 with float32
weights, fp16's loss scaling (run here on the CPU with a CPU scaler, which the trainers refuse) unscales before
clipping, skips an overflowed step and its scale survives a checkpoint."""
from __future__ import annotations

import pytest
import torch

from structattn.errors import UserError
from structattn.train.engine import Engine


def _model_and_batch(seed: int = 0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    return model, torch.randn(4, 8), torch.randn(4, 1)


def _loss(model, x, y):
    return torch.nn.functional.mse_loss(model(x).float(), y)


def _engine(tmp_path, model, optimizer, precision="fp32", clip=0.0, schedule=lambda step: 1.0):
    engine = Engine(tmp_path / "run", seed=0, precision=precision, clip_norm=clip, show_progress=False)
    engine.prepare(model, optimizer, schedule)
    return engine


def _update(engine, model, x, y):
    with engine.autocast():
        loss = _loss(model, x, y)
    engine._backward(loss)
    engine._step()
    engine.state.step += 1


def test_fp32_is_the_plain_update_bit_for_bit_with_clipping_and_the_schedule(tmp_path):
    plain, x, y = _model_and_batch()
    mixed, _, _ = _model_and_batch()
    opt_plain, opt_mixed = (torch.optim.Adam(m.parameters(), lr=1e-2) for m in (plain, mixed))
    sched = torch.optim.lr_scheduler.LambdaLR(opt_plain, lambda s: (s + 1) / 3)
    engine = _engine(tmp_path, mixed, opt_mixed, clip=0.5, schedule=lambda s: (s + 1) / 3)
    for _ in range(3):
        opt_plain.zero_grad()
        _loss(plain, x, y).backward()
        torch.nn.utils.clip_grad_norm_(plain.parameters(), 0.5)
        opt_plain.step()
        sched.step()
        _update(engine, mixed, x, y)
    assert all(torch.equal(a, b) for a, b in zip(plain.parameters(), mixed.parameters()))


def test_bf16_computes_in_bfloat16_and_keeps_float32_weights(tmp_path):
    model, x, y = _model_and_batch()
    engine = _engine(tmp_path, model, torch.optim.SGD(model.parameters(), lr=0.1), precision="bf16")
    with engine.autocast():
        assert model(x).dtype == torch.bfloat16
    before = [p.detach().clone() for p in model.parameters()]
    _update(engine, model, x, y)
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert not all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


@pytest.fixture
def fp16_on_cpu(tmp_path):
    """The engine with a CPU GradScaler: the trainers refuse fp16 off CUDA, the scaling logic is the same."""
    def make(model, optimizer, clip=0.0):
        engine = _engine(tmp_path, model, optimizer, clip=clip)
        engine.scaler = torch.amp.GradScaler("cpu", enabled=True)
        return engine
    return make


def test_fp16_clips_the_unscaled_gradients(fp16_on_cpu):
    model, x, y = _model_and_batch()
    opt = torch.optim.SGD(model.parameters(), lr=0.0)  # lr 0: only the gradients are looked at
    engine = fp16_on_cpu(model, opt, clip=1e-4)
    engine._backward(_loss(model, x, y) * 1e-2)  # scaled by 65536, its gradients stay within float16's range
    grads = [p.grad for p in model.parameters()]
    engine.scaler.unscale_(opt)
    torch.nn.utils.clip_grad_norm_(list(model.parameters()), 1e-4)
    norm = torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))
    assert engine.scaler.get_scale() == 65536.0 and norm == pytest.approx(1e-4, rel=1e-3)


def test_fp16_skips_an_overflowed_step_and_the_scale_survives_a_checkpoint(fp16_on_cpu, tmp_path):
    model, x, y = _model_and_batch()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    engine = fp16_on_cpu(model, opt)
    engine.begin({"seed": 0})
    before = [p.detach().clone() for p in model.parameters()]
    engine._backward(_loss(model, x, y) * float("inf"))
    engine._step()
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))  # skipped
    assert engine.scaler.get_scale() == 65536.0 * 0.5
    engine.save_checkpoint()
    other = _model_and_batch(1)[0]
    again = fp16_on_cpu(other, torch.optim.SGD(other.parameters(), lr=0.1))
    again._load_checkpoint()
    assert again.scaler.get_scale() == 65536.0 * 0.5


def test_unknown_precision_and_fp16_on_cpu_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="unknown precision 'fp8'; valid: fp32, bf16, fp16"):
        Engine(tmp_path, seed=0, precision="fp8")
    if not torch.cuda.is_available():
        with pytest.raises(UserError, match="needs a CUDA GPU"):
            Engine(tmp_path, seed=0, precision="fp16")


@pytest.mark.parametrize("avx512_bf16, amx, says", [(False, False, True), (True, False, False), (False, True, False)])
def test_bf16_on_a_cpu_without_bfloat16_instructions_says_it_is_emulated(tmp_path, monkeypatch, capsys, avx512_bf16,
                                                                           amx, says):
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    Engine(tmp_path / "bf16", seed=0, precision="bf16", show_progress=False)
    Engine(tmp_path / "fp32", seed=0, precision="fp32", show_progress=False)
    err = capsys.readouterr().err
    assert ("--precision bf16 on this CPU (no avx512_bf16 or AMX instructions) is emulated" in err) == says
    assert err.count("emulated") == (1 if says else 0)   # one line, and none for fp32
