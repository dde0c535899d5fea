"""Speed and memory of structure-aware attention on a GPU, as ratios to the stock model (HF sdpa), for the GPU
kernels ``exact`` (two SDPA passes), ``flex`` (SDPA + FlexAttention) and ``triton`` (the fused Triton kernel).

Models: BERTs of all-MiniLM-L6-v2's size (6 layers, hidden 384, 12 heads of 32) and of bert-base's size (12 layers,
hidden 768, 12 heads of 64), randomly initialised (timing needs no weights), as ``BertForSequenceClassification``.
Batch 32, sequences 128 and 512, structure masks from random projective trees (SLA, m = 3) over each example's
real tokens, example lengths spread between T/2 and T (``attention.make_batch``). Everything under
``torch.autocast("cuda", dtype=torch.bfloat16)``. For each model, sequence and variant:

* train step: forward + backward + AdamW step, with attention dropout 0.1 and with attention dropout 0;
* inference: forward in ``torch.inference_mode``;
* peak memory: ``torch.cuda.max_memory_allocated`` during one step, above the allocation at its start (not
  measured by ``--smoke``).

Modes (``--modes``): ``eager``; ``compiled`` = ``torch.compile(model)`` (inductor) of every variant and of the stock
model, compared with the compiled stock model; ``reduce-overhead`` = ``torch.compile(model, mode="reduce-overhead")``
(CUDA graphs; note that the ``triton`` kernel reads its dropout seed on the host, so a captured train step with
attention dropout replays one mask). Compiled rows carry the mode in brackets after the variant.

Variants run interleaved with the stock model (S V1 S V2 S ..., variant order rotated every repetition); each
ratio is the median over repetitions of (variant time / mean of the two stock runs around it). A variant that
cannot run a workload here (e.g. ``triton`` without the package) is reported as n/a with the reason.

    python benchmarks/attention_gpu.py                                  # full run (needs a CUDA GPU)
    python benchmarks/attention_gpu.py --models minilm --seqs 128 --reps 5
    python benchmarks/attention_gpu.py --out results/bench_attention_gpu.md
    python benchmarks/attention_gpu.py --smoke      # one tiny shape on CPU, Triton under its interpreter (CI)
    python benchmarks/attention_gpu.py --models minilm --batch 1 --seqs 16 32 --modes eager compiled   # overhead cells
"""
from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import time
from contextlib import nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

# label -> (mechanism, kernel)
VARIANTS = {
    "stock sdpa": (None, None),
    "sla exact (2x SDPA)": ("sla", "exact"),
    "sla flex": ("sla", "flex"),
    "sla triton": ("sla", "triton"),
}
STOCK = "stock sdpa"
WORKLOADS = {"train": 0.1, "train0": 0.0, "infer": None}   # name -> attention dropout of a train step (None: inference)
HEADER = ("| model | seq (batch) | variant | train (attn dropout 0.1) | train (attn dropout 0) | inference | "
          "peak mem train (dropout 0.1) | peak mem train (dropout 0) | peak mem inference |")


# model -> BertConfig sizes; every model is randomly initialised (timing needs no weights, and the run needs no
# model files on the GPU machine)
SIZES = {
    "minilm": dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536),
    "bert-base": dict(),   # BertConfig's defaults are bert-base's
    "tiny": dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64),
}


def build_stock(model: str):
    """The stock BertForSequenceClassification (HF sdpa) of ``model``'s size (:data:`SIZES`), random weights."""
    import torch
    from transformers import AutoModelForSequenceClassification, BertConfig

    torch.manual_seed(0)
    config = BertConfig(num_labels=2, **SIZES[model])
    return AutoModelForSequenceClassification.from_config(config, attn_implementation="sdpa")


class Runner:
    """Train steps and inference of one model on one batch, under bf16 autocast on ``device``."""

    def __init__(self, model, kw: dict, device):
        import torch

        self.model, self.kw, self.device = model, kw, device
        self.labels = torch.arange(kw["input_ids"].shape[0], device=device) % 2
        self.opt = torch.optim.AdamW(model.parameters(), lr=1e-5)

    def _autocast(self):
        import torch

        return torch.autocast(self.device.type, dtype=torch.bfloat16)

    def run(self, workload: str) -> None:
        import torch

        from attention import set_attention_dropout

        dropout = WORKLOADS[workload]
        if dropout is None:
            self.model.eval()
            with torch.inference_mode(), self._autocast():
                self.model(**self.kw)
            return
        set_attention_dropout(self.model, dropout)
        self.model.train()
        with self._autocast():
            loss = self.model(**self.kw, labels=self.labels).loss
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device) -> float:
    _sync(device)
    t0 = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - t0


def peak(fn, device) -> int:
    """Peak bytes allocated during ``fn`` on ``device`` (CUDA) above the allocation at its start."""
    import torch

    _sync(device)
    torch.cuda.reset_peak_memory_stats(device)
    start = torch.cuda.memory_allocated(device)
    fn()
    _sync(device)
    return torch.cuda.max_memory_allocated(device) - start


def measure(runners: dict, reps: int, device):
    """Times {variant: {workload: [s]}}, ratios to stock {variant: {workload: [x]}}, interleaved S V1 S V2 S ..."""
    names = [n for n in runners if n != STOCK]
    times = {n: {w: [] for w in WORKLOADS} for n in runners}
    ratios = {n: {w: [] for w in WORKLOADS} for n in names}
    for rep in range(reps):
        order = names[rep % len(names):] + names[:rep % len(names)]
        for w in WORKLOADS:
            if runners[STOCK].failed.get(w):
                continue
            before = timed(lambda: runners[STOCK].run(w), device)
            times[STOCK][w].append(before)
            for n in order:
                if runners[n].failed.get(w):
                    continue
                t = timed(lambda: runners[n].run(w), device)
                after = timed(lambda: runners[STOCK].run(w), device)
                times[n][w].append(t)
                times[STOCK][w].append(after)
                ratios[n][w].append(t / ((before + after) / 2))
                before = after
    return times, ratios


def warm_up(runner: Runner, steps: int, workloads: list[str]) -> None:
    """Run each of ``workloads`` ``steps`` times (Triton compiles here); a workload the variant refuses, or one not
    in ``workloads``, is marked failed."""
    import traceback

    from structattn.errors import UserError

    runner.failed = {w: "not measured (--workloads)" for w in WORKLOADS if w not in workloads}
    for w in workloads:
        try:
            for _ in range(steps):
                runner.run(w)
        except UserError as exc:
            runner.failed[w] = str(exc)
        except Exception as exc:   # e.g. a compile mode that fails: reported as n/a, the other cells still run
            traceback.print_exc()
            runner.failed[w] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        if w in runner.failed:
            runner.opt.zero_grad(set_to_none=True)


def table_rows(model: str, seq: int, batch: int, runners: dict, times: dict, ratios: dict, mem: dict,
               label: str = "") -> list[str]:
    """One markdown row per variant; ``label`` follows the variant's name (the compile mode)."""
    from attention import time_cell

    rows = []
    for n, runner in runners.items():
        cells = ["n/a" if runner.failed.get(w) else time_cell(times[n][w], None if n == STOCK else ratios[n][w], 1)
                 for w in WORKLOADS]
        for w in WORKLOADS:
            if mem[n][w] is None:
                cells.append("n/a")
            else:
                cells.append(f"{mem[n][w] / 2 ** 20:.1f} MB ({mem[n][w] / max(mem[STOCK][w], 1):.2f}x)")
        rows.append(f"| {model} | {seq} ({batch}) | {n}{label} | " + " | ".join(cells) + " |")
    return rows


def device_line(device) -> str:
    import torch
    import transformers

    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = "not installed"
    versions = (f"torch {torch.__version__}, triton {triton_version}, transformers {transformers.__version__}, "
                f"Python {platform.python_version()}")
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return (f"{props.name} (compute capability {props.major}.{props.minor}, {props.total_memory / 2 ** 30:.0f} "
                f"GiB, {props.multi_processor_count} SMs), CUDA {torch.version.cuda}, {versions}")
    from machine import cpu_description

    return f"CPU (smoke run, Triton's interpreter): {cpu_description()}; {versions}"


def run(args, device, on_cell=None) -> tuple[list[str], list[str]]:
    """Markdown rows and notes (variants that could not run) for every model and sequence; ``on_cell(rows, notes)``
    after each cell (a run stopped part-way still leaves the cells it measured)."""
    import torch

    from attention import make_batch, variant_model

    rows, notes = [], []
    names = [n for n in VARIANTS if n == STOCK or not args.variants or n in args.variants]
    for model_name in args.models:
        stock = build_stock(model_name)
        for seq in args.seqs:
            ids, att, masks, _ = make_batch(args.batch, seq)
            for mode in args.modes:
                runners = {}
                for n in names:
                    mech = VARIANTS[n][0]
                    model = variant_model(stock, *VARIANTS[n]).to(device)
                    kw = dict(input_ids=ids.to(device), attention_mask=att.to(device))
                    if mech is not None:
                        kw["structure_mask"] = masks[mech].to(device)
                    if mode != "eager":
                        model = torch.compile(model, mode=None if mode == "compiled" else mode)
                    runners[n] = Runner(model, kw, device)
                    began = time.time()
                    warm_up(runners[n], args.warmup, args.workloads)
                    print(f"[{model_name} seq {seq} {mode}] {n} warmed up in {time.time() - began:.0f} s", flush=True)
                    label = "" if mode == "eager" else f" [{mode}]"
                    notes += [f"{model_name} seq {seq}, {n}{label}, {w}: n/a ({why})"
                              for w, why in runners[n].failed.items()]
                print(f"[{model_name} seq {seq} {mode}] warmed up {len(names)} variants; measuring {args.reps} "
                      "repetitions ...", flush=True)
                times, ratios = measure(runners, args.reps, device)
                mem = {n: {w: None if r.failed.get(w) or args.smoke else peak(lambda: r.run(w), device)
                           for w in WORKLOADS} for n, r in runners.items()}
                rows += table_rows(model_name, seq, args.batch, runners, times, ratios, mem, label)
                if on_cell is not None:
                    on_cell(rows, notes)
                del runners
            if device.type == "cuda":
                torch.cuda.empty_cache()
    return rows, notes


def report(args, device, command: str, rows: list[str], notes: list[str], minutes: float, done: bool) -> str:
    """The markdown report of the cells measured so far (``done``: all of them)."""
    return "\n".join([
        "# Structure-aware attention: speed and memory on a GPU",
        "",
        f"Command: `{command}`",
        "",
        f"Device: {device_line(device)}",
        "",
        f"Models as BertForSequenceClassification, batch {args.batch}, bf16 autocast, SLA (m = 3) masks from random "
        f"trees; median of {args.reps} interleaved repetitions after {args.warmup} warm-up steps per workload; ratio = "
        "median over repetitions of variant time / mean of the stock (HF sdpa) runs just before and after it, "
        "[25th-75th percentile] in brackets. Train step = forward + backward + AdamW. Peak memory = peak bytes "
        "allocated during one step above the allocation at its start, ratio to stock.",
        "",
        HEADER,
        "|" + "---|" * HEADER.count(" | ") + "---|",
        *rows,
        "",
        *(["Not run:", *[f"- {note}" for note in notes], ""] if notes else []),
        f"Wall time of the run: {minutes:.1f} min" + ("" if done else " (stopped part-way: the cells above only)"),
        "",
    ])


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", default=["minilm", "bert-base"], choices=["minilm", "bert-base"])
    parser.add_argument("--seqs", type=int, nargs="*", default=[128, 512])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--warmup", type=int, default=3, help="warm-up steps per workload (Triton compiles here)")
    parser.add_argument("--variants", nargs="*", default=None, help="subset of: " + "; ".join(VARIANTS))
    parser.add_argument("--smoke", action="store_true",
                        help="one tiny shape (1-layer BERT, batch 2, seq 16, 1 repetition, no peak memory) on CPU, "
                             "Triton under its interpreter: checks that the script runs")
    parser.add_argument("--modes", nargs="*", default=["eager", "compiled"],
                        choices=["eager", "compiled", "reduce-overhead"],
                        help="eager and/or torch.compile'd (module docstring)")
    parser.add_argument("--workloads", nargs="*", default=list(WORKLOADS), choices=list(WORKLOADS),
                        help="train (attention dropout 0.1), train0 (dropout 0), infer (inference)")
    parser.add_argument("--out", default=None, help="write the markdown report here")
    args = parser.parse_args(argv)
    if args.smoke:
        # before the first Triton kernel is defined (structattn defines them on first use)
        os.environ["TRITON_INTERPRET"] = "1"
        args.models, args.seqs, args.batch, args.reps, args.warmup = ["tiny"], [16], 2, 1, 1
        args.modes = [m for m in args.modes if m == "eager"] or ["eager"]   # compiling under the interpreter: slow

    import torch

    if args.smoke:
        device = torch.device("cpu")
    elif torch.cuda.is_available():
        device = torch.device("cuda")
    else:
        raise SystemExit("no CUDA GPU: this benchmark measures GPU kernels (--smoke runs a tiny CPU check)")
    started = time.time()
    command = " ".join(shlex.quote(a) for a in [Path(sys.executable).name, "benchmarks/attention_gpu.py", *argv])

    def write(rows: list[str], notes: list[str], done: bool = False) -> None:
        text = report(args, device, command, rows, notes, (time.time() - started) / 60, done)
        if args.out:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(text)
        if done:
            print(text)

    rows, notes = run(args, device, on_cell=write)
    write(rows, notes, done=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
