"""Compile time and compiled speed of structure-aware attention against the stock model (``torch.compile``).

For each workload (train step: forward + backward + AdamW, attention dropout 0.1 as all-MiniLM-L6-v2 ships;
inference: forward in ``torch.inference_mode``) and each model (stock HF ``sdpa``; SLA, m = 3, with the kernel
``--kernel``, default ``fused`` on CPU and ``triton`` on CUDA), every figure comes from a fresh Python process:

* **first step, empty cache**: ``TORCHINDUCTOR_CACHE_DIR`` is a new empty folder; the time of the first call of the
  compiled step (dynamo's tracing, AOT autograd, inductor's code generation and C++/Triton compilation, the step);
* **first step, warm cache**: a second process given the folder the first one filled (inductor's FX graph and AOT
  autograd caches hit; dynamo still traces);
* **steady step**: one more process that compiles both models from a merged copy of those folders, then times
  them interleaved (S V S V ..., ratio = median over repetitions of SLA / mean of the stock runs around it).

Each process also reports dynamo's counters (graphs, graph breaks and their reasons, frames compiled) and the
compile phases' times, so a slow compile can be traced to its phase. Processes run one after the other, the two
models alternating, so slow drift on a shared machine touches both.

Models: ``minilm`` = all-MiniLM-L6-v2 from the offline package (random weights of its size where the package is
missing: the report says which), ``bert-base`` (random weights), ``tiny`` (1 layer, hidden 32; for ``--smoke``), as
``BertForSequenceClassification``; masks from random projective trees (``attention.make_batch``). On CUDA every step
runs under bf16 autocast and ``--mode reduce-overhead`` compiles with CUDA graphs; peak memory per step is added.

    python benchmarks/compile.py --out results/bench_compile_cpu.md --json results/bench_compile_cpu.json
    python benchmarks/compile.py --batch 8 --seq 128 --reps 7              # the defaults
    python benchmarks/compile.py --device cuda --mode reduce-overhead --models minilm bert-base --batch 32
    python benchmarks/compile.py --smoke          # tiny model, backend 'eager': checks the script in seconds
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

MODELS = ("stock", "sla")
WORKLOADS = {"train": "train step (fwd + bwd + AdamW, attn dropout 0.1)", "infer": "inference"}
RESULT = "RESULT "   # prefix of the child process's one JSON line on stdout


# --------------------------------------------------------------------------------------------- one process


def _build(args, device):
    """{'stock', 'sla'}: (model on ``device``, forward kwargs) and the weights' description."""
    import torch
    from transformers import AutoModelForSequenceClassification

    from attention import make_batch, variant_model
    from attention_gpu import build_stock

    weights = "random"
    if args.model == "minilm":
        try:
            from structattn.settings import default_encoder

            encoder = default_encoder()
        except ImportError:
            encoder = None
        if encoder is not None:
            torch.manual_seed(0)
            stock = AutoModelForSequenceClassification.from_pretrained(encoder, num_labels=2,
                                                                       attn_implementation="sdpa")
            weights = f"checkpoint {encoder}"
        else:
            stock = build_stock("minilm")
    else:
        stock = build_stock(args.model)
    ids, att, masks, _ = make_batch(args.batch, args.seq)
    built = {}
    for name in args.which:
        model = variant_model(stock, *(("sla", args.kernel) if name == "sla" else (None, None))).to(device)
        kw = dict(input_ids=ids.to(device), attention_mask=att.to(device))
        if name == "sla":
            kw["structure_mask"] = masks["sla"].to(device)
        built[name] = (model, kw)
    return built, weights


class Step:
    """One workload of one compiled model: ``__call__`` runs a step and waits for the device."""

    def __init__(self, model, kw: dict, workload: str, device, mode: str, backend: str):
        import torch

        from attention import set_attention_dropout

        self.plain, self.kw, self.workload, self.device = model, kw, workload, device
        self.labels = torch.arange(kw["input_ids"].shape[0], device=device) % 2
        self.opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
        set_attention_dropout(model, 0.1)   # active in train mode only
        self.set_mode()
        self.model = torch.compile(model, mode=None if mode == "default" else mode, backend=backend)

    def set_mode(self) -> None:
        """Train or eval mode for this workload (outside the timed step: it walks every submodule)."""
        self.plain.train(self.workload == "train")

    def _autocast(self):
        import torch

        return torch.autocast("cuda", dtype=torch.bfloat16) if self.device.type == "cuda" else nullcontext()

    def __call__(self) -> None:
        import torch

        if self.workload == "train":
            with self._autocast():
                loss = self.model(**self.kw, labels=self.labels).loss
            loss.backward()
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)
        else:
            with torch.inference_mode(), self._autocast():
                self.model(**self.kw)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def _dynamo_facts() -> dict:
    """Dynamo's counters (graphs, breaks with reasons, frames) and the compile phases' summed times (s)."""
    from torch._dynamo.utils import compilation_time_metrics, counters

    breaks = dict(counters["graph_break"])
    return {"unique_graphs": counters["stats"].get("unique_graphs", 0),
            "frames_ok": counters["frames"].get("ok", 0), "frames_total": counters["frames"].get("total", 0),
            "graph_breaks": sum(breaks.values()), "break_reasons": {k[:300]: v for k, v in breaks.items()},
            "recompiles": sum(counters["recompiles"].values()) if "recompiles" in counters else 0,
            "phases_s": {k: round(sum(v), 3) for k, v in compilation_time_metrics.items()}}


def child(args) -> dict:
    """``first``: the first compiled step of one model and workload, then ``--reps`` steps; ``steady``: both models
    compiled, then interleaved repetitions of every workload."""
    import torch

    from attention import timed

    device = torch.device(args.device)
    if args.device == "cpu" and args.kernel == "fused":
        from structattn.attention import kernels

        if not kernels.fused_available():   # loaded (or built) here, outside the timed compile
            raise SystemExit(f"the fused kernel is unavailable: {kernels.native.failure()}")
    built, weights = _build(args, device)
    facts = {"weights": weights, "threads": torch.get_num_threads()}
    if args.role == "first":
        (name, (model, kw)), = built.items()
        step = Step(model, kw, args.workload, device, args.mode, args.backend)
        first = timed(step)
        facts_first = _dynamo_facts()
        second = timed(step)
        after = [timed(step) for _ in range(args.reps)]
        peak = _peak(step, device)
        return {**facts, "first_s": first, "second_s": second, "steps_s": after, "peak_bytes": peak,
                "dynamo_first": facts_first, "dynamo_end": _dynamo_facts()}
    steps = {w: {n: Step(m, kw, w, device, args.mode, args.backend) for n, (m, kw) in built.items()}
             for w in args.workloads}
    warm, times, ratios = {}, {w: {n: [] for n in MODELS} for w in steps}, {w: [] for w in steps}
    for w, pair in steps.items():   # one workload at a time: both models stay in its train/eval mode
        for n, step in pair.items():
            step.set_mode()
            warm[f"{w} {n}"] = timed(step)
            step()
        for _ in range(args.reps):
            before = timed(pair["stock"])
            t = timed(pair["sla"])
            after = timed(pair["stock"])
            times[w]["stock"] += [before, after]
            times[w]["sla"].append(t)
            ratios[w].append(t / ((before + after) / 2))
    peaks = {w: {n: _peak(s, device) for n, s in pair.items()} for w, pair in steps.items()}
    return {**facts, "warm_first_s": warm, "times": times, "ratios": ratios, "peak_bytes": peaks,
            "dynamo_end": _dynamo_facts()}


def _peak(step, device):
    """Peak CUDA bytes allocated during one step above the allocation at its start (None on CPU)."""
    if device.type != "cuda":
        return None
    from attention_gpu import peak

    return peak(step, device)


# --------------------------------------------------------------------------------------------- the run


def _spawn(args, role: str, cache: Path, extra: list[str], log) -> dict:
    """Run this script as a child (``--role``) with ``TORCHINDUCTOR_CACHE_DIR=cache``; its result dict."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--role", role, "--model", args.model,
           "--device", args.device, "--mode", args.mode, "--backend", args.backend, "--kernel", args.kernel,
           "--batch", str(args.batch), "--seq", str(args.seq), "--reps", str(args.reps), *extra]
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache))
    started = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.child_timeout)
    log.write(f"$ {' '.join(extra)} [{role}]\n{proc.stderr[-4000:]}\n")
    lines = [line for line in proc.stdout.splitlines() if line.startswith(RESULT)]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise SystemExit(f"child {role} {' '.join(extra)} failed (exit {proc.returncode}): {tail}")
    result = json.loads(lines[-1][len(RESULT):])
    result["process_s"] = time.perf_counter() - started
    return result


def run(args, work: Path, log) -> dict:
    """``--rounds`` rounds of every model's first steps (empty, then warm cache) per workload, then the steady
    steps; the first steps as {"workload model state": [one result per round]}."""
    caches, first = {}, {}
    for rnd in range(args.rounds):
        for i, w in enumerate(args.workloads):
            order = list(MODELS) if (i + rnd) % 2 == 0 else list(MODELS)[::-1]
            for state in ("empty", "warm"):
                for n in order:
                    cache = work / f"cache-{n}-{w}-{rnd}"
                    if state == "empty":
                        cache.mkdir()
                        caches[(n, w)] = cache
                    r = _spawn(args, "first", cache, ["--which", n, "--workload", w], log)
                    first.setdefault(f"{w} {n} {state}", []).append(r)
                    print(f"[round {rnd + 1}, {w}] {n}, {state} cache: first step {r['first_s']:.1f} s, graphs "
                          f"{r['dynamo_first']['unique_graphs']}, breaks {r['dynamo_first']['graph_breaks']}",
                          flush=True)
    merged = work / "cache-merged"
    for cache in caches.values():
        shutil.copytree(cache, merged, dirs_exist_ok=True)
    steady = _spawn(args, "steady", merged, ["--which", *MODELS, "--workloads", *args.workloads], log)
    return {"first": first, "steady": steady}


def _ratio_cell(seconds: float, ratios: list[float] | None, unit: str = "s", scale: float = 1.0) -> str:
    """A table cell: a median time and, for SLA, the median of its ratios to stock [lowest-highest]."""
    cell = f"{seconds * scale:.1f} {unit}"
    if ratios is None:
        return cell
    spread = f" [{min(ratios):.2f}-{max(ratios):.2f}]" if len(ratios) > 1 else ""
    return cell + f" (**{statistics.median(ratios):.2f}x**{spread})"


def report(args, raw: dict, command: str, device: str, minutes: float) -> str:
    """The markdown tables: first-step times (empty / warm cache) and steady steps, SLA as a ratio to stock."""
    first, steady = raw["first"], raw["steady"]
    lines = ["| workload | model | first step, empty cache | first step, warm cache | steady step | "
             "graphs / breaks | peak memory |", "|---|---|---|---|---|---|---|"]
    for w in args.workloads:
        for n in MODELS:
            cells = []
            for state in ("empty", "warm"):
                runs, stock = first[f"{w} {n} {state}"], first[f"{w} stock {state}"]
                ratios = None if n == "stock" else [r["first_s"] / s["first_s"] for r, s in zip(runs, stock)]
                cells.append(_ratio_cell(statistics.median(r["first_s"] for r in runs), ratios))
            cells.append(_ratio_cell(statistics.median(steady["times"][w][n]),
                                     None if n == "stock" else steady["ratios"][w], "ms", 1000))
            graphs = {(r["dynamo_end"]["unique_graphs"], r["dynamo_end"]["graph_breaks"])
                      for r in first[f"{w} {n} empty"]}
            cells.append(", ".join(f"{g} / {b}" for g, b in sorted(graphs)))
            peak = steady["peak_bytes"][w][n]
            cells.append("n/a (CPU)" if peak is None else f"{peak / 2 ** 20:.1f} MB")
            lines.append(f"| {WORKLOADS[w]} | {n} | " + " | ".join(cells) + " |")
    breaks = sorted({reason for runs in first.values() for r in runs for reason in r["dynamo_end"]["break_reasons"]})
    phases = ["", "Compile phases of the first step with an empty cache, medians over the rounds (dynamo's summed "
              "timers, s; they nest, and the backward graph compiles at the first backward call, outside "
              "`_compile.compile_inner`):", "",
              "| workload | model | " + " | ".join(f"`{k}`" for k in _PHASES) + " |", "|---|---|" + "---|" * len(_PHASES)]
    for w in args.workloads:
        for n in MODELS:
            runs = first[f"{w} {n} empty"]
            phases.append(f"| {w} | {n} | " + " | ".join(
                f"{statistics.median(r['dynamo_first']['phases_s'].get(k, 0) for r in runs):.1f}" for k in _PHASES)
                + " |")
    return "\n".join([
        "# Compile time and compiled speed: SLA against the stock model",
        "",
        f"Command: `{command}`",
        "",
        f"Device: {device}",
        "",
        f"Model: {args.model} ({first[f'{args.workloads[0]} stock empty'][0]['weights']}) as "
        f"BertForSequenceClassification, batch {args.batch}, sequence {args.seq}, SLA m = 3 over random projective "
        f"trees, kernel `{args.kernel}`; torch.compile mode `{args.mode}`, backend `{args.backend}`. First step: "
        f"{args.rounds} round(s); in each, every cell is one fresh process (TORCHINDUCTOR_CACHE_DIR a new empty "
        "folder, then the folder that process filled), the two models alternating; the time is the median over the "
        "rounds, the ratio the median over the rounds of SLA's time / the stock model's in the same round and cache "
        "state [lowest-highest]. Steady step: one process, both models compiled from the warm caches, median of "
        f"{args.reps} interleaved repetitions (S V S), ratio = median of SLA / mean of the stock runs around it "
        "[lowest-highest]. Graphs / breaks: dynamo's graphs and graph breaks after a few steps.",
        "",
        *lines,
        *phases,
        "",
        "Graph breaks: " + ("; ".join(breaks) if breaks else "none"),
        "",
        f"Wall time of the run: {minutes:.1f} min",
        "",
    ])


# dynamo's timers that make up most of a first step's compile
_PHASES = ("_compile.compile_inner", "OutputGraph.call_user_compiler", "create_aot_dispatcher_function",
           "compile_fx_inner", "fx_codegen_and_compile", "async_compile.wait")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="minilm", choices=["minilm", "bert-base", "tiny"])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--mode", default="default", choices=["default", "reduce-overhead", "max-autotune-no-cudagraphs"])
    parser.add_argument("--backend", default="inductor", help="torch.compile backend ('eager': dynamo alone)")
    parser.add_argument("--kernel", default=None, help="SLA's kernel (default: fused on CPU, triton on CUDA)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=1, help="rounds of the first-step processes (medians)")
    parser.add_argument("--workloads", nargs="*", default=list(WORKLOADS), choices=list(WORKLOADS))
    parser.add_argument("--child-timeout", type=float, default=1800.0, help="seconds one process may take")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny model, batch 2, seq 16, backend eager, 2 repetitions: checks the script")
    parser.add_argument("--out", default=None, help="write the markdown report here")
    parser.add_argument("--json", default=None, help="write the raw results here")
    parser.add_argument("--role", default=None, choices=["first", "steady"], help=argparse.SUPPRESS)
    parser.add_argument("--which", nargs="*", default=list(MODELS), help=argparse.SUPPRESS)
    parser.add_argument("--workload", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.kernel is None:
        args.kernel = "triton" if args.device == "cuda" else "fused"
    if args.smoke:
        args.model, args.batch, args.seq, args.reps, args.backend, args.rounds = "tiny", 2, 16, 2, "eager", 1
    if args.role is not None:
        print(RESULT + json.dumps(child(args)), flush=True)
        return 0

    import torch
    import transformers

    from machine import cpu_description

    started = time.time()
    threads = [f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}"] if "OMP_NUM_THREADS" in os.environ else []
    command = " ".join([*threads, *(shlex.quote(a) for a in [Path(sys.executable).name, "benchmarks/compile.py", *argv])])
    if args.device == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("--device cuda: no CUDA GPU here")
        from attention_gpu import device_line

        device = device_line(torch.device("cuda"))
    else:
        device = f"{cpu_description()}, {os.cpu_count()} logical CPUs, transformers {transformers.__version__}"
    with tempfile.TemporaryDirectory(prefix="structattn-compile-") as tmp:
        with open(Path(tmp) / "children.log", "w") as log:
            raw = run(args, Path(tmp), log)
    text = report(args, raw, command, device, (time.time() - started) / 60)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    if args.json:
        Path(args.json).write_text(json.dumps({"command": command, "device": device, **raw}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
