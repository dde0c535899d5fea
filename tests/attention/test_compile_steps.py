"""Compiled steps of an SLA model: no recompile after the first step (CPU), and, where CUDA is present,
``torch.compile(mode="reduce-overhead")`` capturing a whole train step and an inference step in CUDA graphs and
replaying them with the ``triton`` kernel."""
from __future__ import annotations

import pytest
import torch
from attn_helpers import random_batch, tiny_model

from torch._dynamo.utils import counters

from structattn.models.encoder import apply_mechanism
from structattn.train.provenance import kernels_used


@pytest.mark.parametrize("train", [False, True])
def test_a_compiled_sla_model_compiles_once(train):
    """Three steps, one graph: nothing the first step writes (such as the resolved kernel) fails a guard
    on the second; the kernel the traced step resolved is still reported."""
    ids, att, mask = random_batch()
    model = apply_mechanism(tiny_model(task="sequence-classification", attention_probs_dropout_prob=0.1), "sla",
                            kernel="auto").train(train)
    model.config.problem_type = "single_label_classification"   # else transformers sets it in the first step
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(model, backend="eager")
    for _ in range(3):
        if train:
            loss = compiled(input_ids=ids, attention_mask=att, structure_mask=mask, labels=torch.tensor([0, 1, 0])).loss
            loss.backward()
        else:
            with torch.inference_mode():
                compiled(input_ids=ids, attention_mask=att, structure_mask=mask)
    assert counters["stats"]["unique_graphs"] == 1
    assert kernels_used(model) == [model._structattn_rt.kernel_for(torch.device("cpu"))]
    torch._dynamo.reset()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA GPU")
def test_reduce_overhead_captures_an_sla_train_step_and_inference():
    """A small BERT with SLA on the triton kernel, bf16 autocast: dropout-free train steps (forward + backward) and
    inference, compiled with CUDA graphs, are captured (no cudagraph skip) and replayed; the replayed inference
    equals eager. (With attention dropout a replay would reuse the captured step's seed: the op takes its seed as a
    CPU scalar, which a CUDA graph does not redraw.)"""
    from structattn.attention.kernels import triton_available

    if not triton_available(torch.device("cuda")):
        pytest.skip("the triton kernel is not available on this GPU")
    device = torch.device("cuda")
    ids, att, mask = (t.to(device) for t in random_batch(b=4, t=32))
    model = apply_mechanism(tiny_model(task="sequence-classification", attention_probs_dropout_prob=0.0),
                            "sla", kernel="triton").to(device)
    model.config.problem_type = "single_label_classification"
    labels = torch.arange(4, device=device) % 2
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(model, mode="reduce-overhead")
    inputs = dict(input_ids=ids, attention_mask=att, structure_mask=mask)
    model.train()
    for _ in range(4):   # warm-up, record, replays
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = compiled(**inputs, labels=labels).loss
        loss.backward()
        model.zero_grad(set_to_none=True)
    assert torch.isfinite(loss).all()
    model.eval()
    with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
        for _ in range(4):
            got = compiled(**inputs).logits.clone()
        want = model(**inputs).logits
    assert not any(k.startswith("cudagraph_skips") and v for k, v in counters["inductor"].items())
    assert torch.allclose(got.float(), want.float(), atol=2e-2, rtol=2e-2)
    torch._dynamo.reset()


@pytest.mark.slow
def test_compile_benchmark_smoke_run(tmp_path):
    """benchmarks/compile.py --smoke (tiny model, backend eager) runs its fresh processes with their own caches and
    writes the table: both models' first steps with an empty and a warm cache, and the steady step's ratio."""
    import subprocess
    import sys
    from pathlib import Path

    from attn_helpers import require_fused

    require_fused()
    repo = Path(__file__).resolve().parents[2]
    out = tmp_path / "compile.md"
    res = subprocess.run([sys.executable, str(repo / "benchmarks" / "compile.py"), "--smoke", "--workloads", "infer",
                          "--out", str(out), "--json", str(tmp_path / "compile.json")], cwd=repo, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = [line.split(" | ") for line in out.read_text().splitlines() if line.startswith("| inference |")]
    assert [r[1] for r in rows] == ["stock", "sla"]
    assert all(" s (**" in cell for cell in rows[1][2:4]) and " ms (**" in rows[1][4]
    assert rows[1][5] == "1 / 0"   # one graph, no break
    assert "Graph breaks: none" in out.read_text()
