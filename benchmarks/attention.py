"""Speed and memory of structure-aware attention inside all-MiniLM-L6-v2, as ratios to the stock model (HF sdpa).

One run measures, for each variant (mechanism x kernel) and each sequence length:

* train step: forward + backward + AdamW step (``BertForSequenceClassification``, train mode), with the
  attention dropout the checkpoint ships (0.1) and again with attention dropout 0;
* inference: forward in ``torch.inference_mode``;
* peak tensor memory of one train step and one inference pass: allocations traced by ``torch.profiler``
  (``profile_memory=True``, the c10 CPU allocator), peak of live bytes above the state at the start of the
  step (parameters, gradients of the previous step and optimizer state excluded; everything the step
  allocates, including kernels' workspaces that go through the allocator, included).

Long inputs (``--long-seqs 512 1024``, batch ``--long-batch``): multi-sentence passages from the SQuAD 2.0 dev
file (consecutive paragraphs of one article joined until they fill the sequence, then cut to it), parsed by the
pipeline (spaCy en_core_web_sm through the parse cache); SLA m = 3 and WLA k = 3 inside each sentence (no links
across sentences), [CLS]/[SEP] visible (SLA's rules). Sequences beyond the encoder's position table (512 for
all-MiniLM-L6-v2) run the same architecture with a longer table, randomly initialised (timing needs no weights).

Variants run interleaved with the stock model (S V1 S V2 S ... per workload, variant order rotated every
repetition); each ratio is the median over repetitions of (variant time / mean of the two stock runs
around it), which cancels slow drift caused by other processes on the machine. Batch 32, structure masks from
random projective dependency trees (SLA, m = 3) or windows (WLA, k = 3) over each example's real tokens,
example lengths spread between T/2 and T.

Allocator: glibc's defaults make eager n x n buffers page-fault on every call, so the script re-executes
itself with ``MALLOC_MMAP_THRESHOLD_=1073741824 MALLOC_TRIM_THRESHOLD_=4294967296 MALLOC_TOP_PAD_=536870912``
unless they are already set (``--keep-env`` to run with the environment as it is).

    python benchmarks/attention.py                      # full run (about 15 minutes on 2 cores)
    python benchmarks/attention.py --reps 3 --seqs 64   # quick look
    python benchmarks/attention.py --out results/bench_attention_cpu.md
    python benchmarks/attention.py --seqs --long-seqs 512 1024 --variants "sla fused (default)" "wla fused (default)"

Overhead-bound cells (``--overhead``): batch 1-2 x 16-32 tokens on one thread, where a step costs little more than
its host work, so a fixed cost per layer shows. Stock vs SLA with each CPU kernel (:data:`OVERHEAD_VARIANTS`), eager
and ``torch.compile``d (inductor, ``dynamic=False``; ``--compiled-variants``), interleaved as above; the times are
the thread's CPU time (``time.thread_time``: one thread does all the work, and other processes on a shared machine
do not count in it), the wall-clock ratios are in the JSON. Workloads: train step (forward + backward + AdamW,
attention dropout 0.1 as the checkpoint ships), forward + backward alone (the optimizer is the same for both
models and only dilutes the ratio), inference.

    OMP_NUM_THREADS=1 python benchmarks/attention.py --overhead --reps 15 --out overhead.md --json overhead.json
"""
from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import cpu_flags, cpu_name, peak_bytes  # noqa: E402

ALLOCATOR_ENV = {
    "MALLOC_MMAP_THRESHOLD_": "1073741824",
    "MALLOC_TRIM_THRESHOLD_": "4294967296",
    "MALLOC_TOP_PAD_": "536870912",
}

# Variables that lower the instruction set ATen, MKL and oneDNN use (an AVX2 run on an AVX-512 machine):
# printed with the command when set
ISA_ENV = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA")

# label -> (mechanism, kernel); the kernels in BENCHMARK_KERNELS are defined below, the others are the library's
VARIANTS = {
    "stock sdpa": (None, None),
    "sla fused (default)": ("sla", "fused"),
    "wla fused (default)": ("wla", "fused"),
    "sla exact (2x SDPA)": ("sla", "exact"),
    "sla shared_exp compiled": ("sla", "shared_exp_compiled"),
    "sla shared_exp eager": ("sla", "shared_exp"),
    "sla reference": ("sla", "reference"),
    "sla official (2 softmax, 2 PV)": ("sla", "official"),
}


# --------------------------------------------------------------------------------------------- benchmark-only kernels
# Same arguments and shapes as the library's kernels (structattn.attention.kernels): q [b, h, n, d], k, v [b, h, m, d],
# local / base [b, 1|h, n, m] bool (True = may attend), gate [b, G, n] -> out [b, h, n, d]. Not valid in a
# saved configuration: registered with kernels.register_private_kernel and set on the installed mechanism.


def official_mixed_attention(q, k, v, local, gate, base=None, *, scale=None, dropout_p=0.0, training=True):
    """The SLA authors' formulation: two masked softmaxes, two P v, outputs mixed (eager, input dtype).

    Masks become additive finite minima, like HF's eager path. Unlike the library's kernels (one dropout
    mask on the mixed probabilities) it drops each distribution with its own mask, as the authors' code does.
    """
    import torch
    import torch.nn.functional as F

    from structattn.attention.kernels import local_pattern

    sc = q.shape[-1] ** -0.5 if scale is None else float(scale)
    s = torch.matmul(q, k.transpose(-1, -2)) * sc
    neg = torch.finfo(s.dtype).min
    zero = torch.zeros((), dtype=s.dtype, device=s.device)
    s_glb = s if base is None else s + torch.where(base, zero, neg)
    s_loc = s + torch.where(local_pattern(local, base), zero, neg)
    drop = training and dropout_p > 0
    p_glb = F.dropout(torch.softmax(s_glb, dim=-1), p=dropout_p, training=drop)
    p_loc = F.dropout(torch.softmax(s_loc, dim=-1), p=dropout_p, training=drop)
    g = gate.to(s.dtype).unsqueeze(-1)
    out = (1.0 - g) * torch.matmul(p_glb, v) + g * torch.matmul(p_loc, v)
    return out if base is None else out * base.any(dim=-1, keepdim=True)  # rows without keys give 0


_compiled_shared_exp = None


def compiled_shared_exp_mixed_attention(q, k, v, local, gate, base=None, *, scale=None, dropout_p=0.0):
    """The library's ``shared_exp`` kernel (branch-free) compiled with ``torch.compile(dynamic=False)``.

    Compiles once per shape and mask layout.
    """
    global _compiled_shared_exp
    import torch

    from structattn.attention.kernels import shared_exp_mixed_attention

    if _compiled_shared_exp is None:
        _compiled_shared_exp = torch.compile(shared_exp_mixed_attention, dynamic=False)
    sc = q.shape[-1] ** -0.5 if scale is None else float(scale)
    return _compiled_shared_exp(q, k, v, local, gate, base, scale=sc, dropout_p=dropout_p, branch_free=True)


BENCHMARK_KERNELS = {
    "official": official_mixed_attention,
    "shared_exp_compiled": compiled_shared_exp_mixed_attention,
}


def register_benchmark_kernels() -> None:
    """Make the benchmark-only kernels runnable by name inside a model (never valid in a saved config)."""
    from structattn.attention.kernels import register_private_kernel

    for name, fn in BENCHMARK_KERNELS.items():
        register_private_kernel(name, fn)


def apply_variant(model, mech: str, kernel: str) -> None:
    """Install mechanism ``mech`` running ``kernel`` (a library kernel or one of BENCHMARK_KERNELS)."""
    from structattn.models.encoder import apply_mechanism, mechanism_of

    if kernel not in BENCHMARK_KERNELS:
        apply_mechanism(model, mech, kernel=kernel)
        return
    register_benchmark_kernels()
    apply_mechanism(model, mech, kernel="reference")
    mechanism_of(model).kernel = kernel  # after validation: a private name is refused in a configuration


def _ensure_allocator_env(argv: list[str]) -> None:
    if "--keep-env" in argv or all(os.environ.get(k) == v for k, v in ALLOCATOR_ENV.items()):
        return
    env = dict(os.environ, **ALLOCATOR_ENV)
    os.execve(sys.executable, [sys.executable, *argv], env)


def _loadavg() -> str:
    try:
        with open("/proc/loadavg") as fh:
            return " ".join(fh.read().split()[:3])
    except OSError:
        return "n/a"


# --------------------------------------------------------------------------------------------- data


def random_heads(n: int, rng) -> list[int]:
    """A random projective dependency tree over n words: 1-based heads, 0 = root."""
    heads = [0] * n

    def build(lo: int, hi: int, parent: int) -> None:
        if lo >= hi:
            return
        h = int(rng.integers(lo, hi))
        heads[h] = parent
        build(lo, h, h + 1)
        build(h + 1, hi, h + 1)

    build(0, n, 0)
    return heads


def make_batch(batch: int, seq: int, seed: int = 0):
    """input_ids, attention_mask [b, T] and structure masks (sla m=3, window k=3) [b, T, T] bool."""
    import numpy as np
    import torch

    from structattn.structure.relations import sla_masks, window_masks

    rng = np.random.default_rng(seed)
    lengths = np.sort(rng.integers(seq // 2, seq + 1, size=batch))[::-1].copy()
    lengths[0] = seq
    ids = torch.from_numpy(rng.integers(1000, 20000, size=(batch, seq))).long()
    att = torch.zeros(batch, seq, dtype=torch.long)
    masks = {name: torch.zeros(batch, seq, seq, dtype=torch.bool) for name in ("sla", "wla")}
    local_pairs, pairs = 0, 0
    for b, n in enumerate(lengths):
        n = int(n)
        att[b, :n] = 1
        heads = np.array([random_heads(n, rng)])
        sla = torch.from_numpy(sla_masks(heads, m=3)[0])
        masks["sla"][b, :n, :n] = sla
        masks["wla"][b, :n, :n] = torch.from_numpy(window_masks(heads, k=3)[0])
        local_pairs += int(sla.sum())
        pairs += n * n
        for name in masks:  # padding rows: only themselves (the kernels fall back to the padding row)
            masks[name][b, range(n, seq), range(n, seq)] = True
    return ids, att, masks, local_pairs / pairs


def squad_batch(batch: int, seq: int, encoder: str):
    """input_ids, attention_mask [b, T] and structure masks (sla m=3, wla k=3) [b, T, T] bool from multi-sentence
    SQuAD 2.0 dev passages (module docstring), and the share of local pairs."""
    import numpy as np
    import torch
    from transformers import AutoTokenizer

    from structattn.dependency.cache import parse_cached
    from structattn.dependency.spacy_backend import SpacyParser
    from structattn.settings import data_dir
    from structattn.structure.align import encode_words
    from structattn.structure.example import build_word_structures
    from structattn.structure.expand import ExpansionRules, token_mask
    from structattn.tasks.squad import load_squad
    from structattn.tasks.text_words import words_of

    tokenizer = AutoTokenizer.from_pretrained(encoder)
    data = load_squad(data_dir() / "squad2" / "dev-v2.0.reconstructed-from-explorer.json")
    examples: list[list[list[str]]] = []   # per example, its paragraphs' words
    for article in data["data"]:
        paragraphs, tokens = [], 2
        for para in article["paragraphs"]:
            words = words_of(para["context"])
            paragraphs.append(words)
            tokens += len(tokenizer(words, is_split_into_words=True, add_special_tokens=False)["input_ids"])
            if tokens >= seq:
                examples.append(paragraphs)
                break
        if len(examples) == batch:
            break
    if len(examples) < batch:
        raise SystemExit(f"only {len(examples)} SQuAD 2.0 articles reach {seq} tokens; lower --long-batch")
    flat = [words for paragraphs in examples for words in paragraphs]
    parsed = iter(parse_cached(flat, SpacyParser(), kind="words"))
    passages = [[sentence for _ in paragraphs for sentence in next(parsed)] for paragraphs in examples]
    ids = torch.zeros(batch, seq, dtype=torch.long)
    att = torch.zeros(batch, seq, dtype=torch.long)
    masks = {name: torch.zeros(batch, seq, seq, dtype=torch.bool) for name in ("sla", "wla")}
    structures = {"sla": build_word_structures(passages, None, "sla", m=3),
                  "wla": build_word_structures(passages, None, "window", k=3)}
    local_pairs = 0
    for b, passage in enumerate(passages):
        words = [w for sentence in passage for w in sentence.words]
        window = encode_words(tokenizer, words, max_length=seq, long_inputs="truncate")[0]
        n = len(window.input_ids)
        ids[b, :n] = torch.tensor(window.input_ids)
        att[b, :n] = 1
        for name in masks:
            masks[name][b, :n, :n] = torch.from_numpy(np.asarray(token_mask(structures[name][b], window.token_word,
                                                                            ExpansionRules())))
            masks[name][b, range(n, seq), range(n, seq)] = True
        local_pairs += int(masks["sla"][b, :n, :n].sum())
    return ids, att, masks, local_pairs / int(att.sum(1).pow(2).sum())


# --------------------------------------------------------------------------------------------- models


def build_models(encoder: str, names: list[str], positions: int = 0):
    """One model per variant, copies of the stock one; ``positions`` beyond the encoder's position table give
    the same architecture with a longer table, randomly initialised."""
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification

    torch.manual_seed(0)
    config = AutoConfig.from_pretrained(encoder, num_labels=2)
    if positions > config.max_position_embeddings:
        config.max_position_embeddings = positions
        stock = AutoModelForSequenceClassification.from_config(config, attn_implementation="sdpa")
    else:
        stock = AutoModelForSequenceClassification.from_pretrained(encoder, num_labels=2, attn_implementation="sdpa")
    return {label: variant_model(stock, *VARIANTS[label]) for label in names}


def variant_model(stock, mech, kernel):
    """A copy of ``stock`` with mechanism ``mech`` running ``kernel`` installed (None: the stock model's copy)."""
    model = copy.deepcopy(stock)
    if mech is not None:
        apply_variant(model, mech, kernel)
    return model


def set_attention_dropout(model, p: float) -> None:
    import torch

    model.config.attention_probs_dropout_prob = p
    for module in model.modules():
        if type(module).__name__ == "BertSelfAttention" and isinstance(getattr(module, "dropout", None), torch.nn.Dropout):
            module.dropout.p = p


class Runner:
    """Train step / inference for one model on one batch."""

    def __init__(self, label: str, model, ids, att, masks):
        import torch

        self.label = label
        self.model = model
        mech = VARIANTS[label][0]
        self.kw = dict(input_ids=ids, attention_mask=att)
        if mech is not None:
            self.kw["structure_mask"] = masks[mech]
        self.labels = torch.arange(ids.shape[0]) % 2
        self.attn_dropout = model.config.attention_probs_dropout_prob
        self.opt = torch.optim.AdamW(model.parameters(), lr=1e-5)

    #: whether a step sets the model's train/eval mode itself (the overhead cells set it before timing)
    sets_mode = True

    def train_step(self) -> None:
        if self.sets_mode:
            self.model.train()
        out = self.model(**self.kw, labels=self.labels)
        out.loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)

    def train_step_no_attn_dropout(self) -> None:
        set_attention_dropout(self.model, 0.0)
        try:
            self.train_step()
        finally:
            set_attention_dropout(self.model, self.attn_dropout)

    def infer(self) -> None:
        import torch

        if self.sets_mode:
            self.model.eval()
        with torch.inference_mode():
            self.model(**self.kw)


def time_cell(times: list[float], ratios: list[float] | None, digits: int = 0) -> str:
    """A table cell: median time in ms and the median ratio to stock, with the 25th-75th percentile of the
    ratios when there are 4 or more (``ratios`` None: the stock row, 1.00x)."""
    med = statistics.median(times) * 1000
    if ratios is None:
        return f"{med:.{digits}f} ms (1.00x)"
    spread = ""
    if len(ratios) >= 4:
        q1, _, q3 = statistics.quantiles(ratios, n=4)
        spread = f" [{q1:.2f}-{q3:.2f}]"
    return f"{med:.{digits}f} ms (**{statistics.median(ratios):.2f}x**{spread})"


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


# --------------------------------------------------------------------------------------------- overhead-bound cells

# the library's kernels that train on CPU (flex: forward only there; triton: a GPU kernel)
CPU_KERNELS = ("fused", "exact", "shared_exp", "reference")
# label -> (mechanism, kernel): stock and SLA with each CPU kernel
OVERHEAD_VARIANTS = {"stock sdpa": (None, None), **{f"sla {k}": ("sla", k) for k in CPU_KERNELS}}
OVERHEAD_CELLS = ((1, 16), (1, 32), (2, 16), (2, 32))   # (batch, tokens)


def cpu_timed(fn) -> tuple[float, float]:
    """(thread CPU time, wall time) of one call, in seconds."""
    c0, w0 = time.thread_time(), time.perf_counter()
    fn()
    return time.thread_time() - c0, time.perf_counter() - w0


class OverheadRunner(Runner):
    """A :class:`Runner` whose model may be ``torch.compile``d; adds forward + backward without the optimizer.
    The model's train/eval mode is set before a workload is timed (:meth:`set_mode`), not inside the timed call:
    ``model.train()`` walks every submodule, a cost of the call site, not of the step, and larger for a model
    with more modules (the mechanism adds one gate per layer)."""

    def __init__(self, label: str, model, ids, att, masks, compiled: bool):
        import torch

        self.plain = model
        super().__init__(label, model, ids, att, masks)
        if compiled:
            self.model = torch.compile(model, dynamic=False)

    def set_mode(self, workload: str) -> None:
        self.plain.train(workload != "infer")

    sets_mode = False

    def forward_backward(self) -> None:
        self.model(**self.kw, labels=self.labels).loss.backward()
        self.plain.zero_grad(set_to_none=True)


def overhead_run(args):
    """The overhead-bound table (module docstring): rows (cell, mode, variant), CPU-time medians and ratios."""
    import torch

    from structattn.settings import default_encoder

    torch.set_num_threads(1)
    encoder = args.encoder or default_encoder()
    VARIANTS.update({k: v for k, v in OVERHEAD_VARIANTS.items() if k not in VARIANTS})
    names = [n for n in OVERHEAD_VARIANTS if n == "stock sdpa" or not args.variants or n in args.variants]
    workloads = {"train": "train_step", "fwdbwd": "forward_backward", "infer": "infer"}
    lines, raw = [], {}
    for cell in args.overhead_cells:
        batch, seq = (int(x) for x in cell.split("x"))
        ids, att, masks, _ = make_batch(batch, seq)
        compile_here = args.compiled_variants and cell in args.compiled_cells
        for mode in ["eager"] + (["compiled"] if compile_here else []):
            compiled = mode == "compiled"
            cell_names = [n for n in names if not compiled or n == "stock sdpa" or n in args.compiled_variants]
            models = build_models(encoder, cell_names)
            runners = {n: OverheadRunner(n, models[n], ids, att, masks, compiled) for n in cell_names}
            started = time.perf_counter()
            for n in cell_names:   # warm-up (and, compiled, the compilation of the train and inference graphs)
                for _ in range(3):
                    for w, method in workloads.items():
                        runners[n].set_mode(w)
                        getattr(runners[n], method)()
            warm = time.perf_counter() - started
            cpu = {n: {w: [] for w in workloads} for n in cell_names}
            ratios = {n: {w: [] for w in workloads} for n in cell_names}
            wall_ratios = {n: {w: [] for w in workloads} for n in cell_names}
            stock = runners["stock sdpa"]
            gc.collect()
            gc.disable()   # as timeit does: a collection triggered by one model's garbage would land in another's time
            for rep in range(args.reps):
                others = [n for n in cell_names if n != "stock sdpa"]
                others = others[rep % len(others):] + others[:rep % len(others)]
                for w, method in workloads.items():
                    for runner in runners.values():
                        runner.set_mode(w)
                    before = cpu_timed(getattr(stock, method))
                    cpu["stock sdpa"][w].append(before[0])
                    for n in others:
                        t = cpu_timed(getattr(runners[n], method))
                        after = cpu_timed(getattr(stock, method))
                        cpu[n][w].append(t[0])
                        cpu["stock sdpa"][w].append(after[0])
                        ratios[n][w].append(t[0] / ((before[0] + after[0]) / 2))
                        wall_ratios[n][w].append(t[1] / ((before[1] + after[1]) / 2))
                        before = after
            gc.enable()
            key = f"{batch}x{seq} {mode}"
            raw[key] = {"cpu_times": cpu, "ratios": ratios, "wall_ratios": wall_ratios, "warmup_s": warm}
            print(f"[{key}] warm-up {warm:.0f} s; " + ", ".join(
                f"{n}: " + "/".join(f"{statistics.median(ratios[n][w]):.3f}" for w in workloads)
                for n in cell_names if n != "stock sdpa"), flush=True)
            for n in cell_names:
                cells = [time_cell(cpu[n][w], None if n == "stock sdpa" else ratios[n][w], digits=1)
                         for w in workloads]
                lines.append(f"| {batch} x {seq} | {mode} | {n} | " + " | ".join(cells) + " |")
            del models, runners
            gc.collect()
    header = ("| batch x tokens | mode | variant | train step (fwd + bwd + AdamW) | forward + backward | inference |\n"
              "|---|---|---|---|---|---|")
    return "\n".join([header, *lines]), raw, encoder


# --------------------------------------------------------------------------------------------- main


def run(args):

    from structattn.attention import kernels
    from structattn.settings import default_encoder

    encoder = args.encoder or default_encoder()
    names = [n for n in VARIANTS if n == "stock sdpa" or not args.variants or n in args.variants]
    if any("fused" in n for n in names) and not kernels.fused_available():
        print("fused kernel unavailable:", kernels.native.failure(), file=sys.stderr)
        names = [n for n in names if "fused" not in n]
    lines = []
    header = ("| seq (batch, masks) | variant | train (attn dropout 0.1) | train (attn dropout 0) | inference | "
              "peak mem train (dropout 0.1) | peak mem train (dropout 0) | peak mem inference |")
    sep = "|---|---|---|---|---|---|---|---|"
    raw = {}
    workloads_by_seq = [(seq, args.batch, "random trees") for seq in args.seqs]
    workloads_by_seq += [(seq, args.long_batch, "SQuAD 2.0 passages") for seq in args.long_seqs]
    for seq, batch, source in workloads_by_seq:
        if source == "random trees":
            ids, att, masks, density = make_batch(batch, seq)
        else:
            ids, att, masks, density = squad_batch(batch, seq, encoder)
        models = build_models(encoder, names, positions=seq)
        runners = {n: Runner(n, models[n], ids, att, masks) for n in names}
        print(f"[seq {seq}] local pairs (SLA m=3): {density:.1%}; warming up {len(names)} variants ...", flush=True)
        for n in names:
            for _ in range(2):
                runners[n].train_step()
                runners[n].train_step_no_attn_dropout()
                runners[n].infer()
        stock = runners["stock sdpa"]
        workloads = {"train": "train_step", "train0": "train_step_no_attn_dropout", "infer": "infer"}
        times = {n: {w: [] for w in workloads} for n in names}
        ratios = {n: {w: [] for w in workloads} for n in names}
        for rep in range(args.reps):
            others = [n for n in names if n != "stock sdpa"]
            others = others[rep % len(others):] + others[:rep % len(others)]
            for w, method in workloads.items():
                # S V1 S V2 S ... S: each variant is compared with the mean of the stock runs around it
                before = timed(getattr(stock, method))
                times["stock sdpa"][w].append(before)
                for n in others:
                    t = timed(getattr(runners[n], method))
                    after = timed(getattr(stock, method))
                    times[n][w].append(t)
                    times["stock sdpa"][w].append(after)
                    ratios[n][w].append(t / ((before + after) / 2))
                    before = after
            print(f"[seq {seq}] rep {rep + 1}/{args.reps}: " + ", ".join(
                f"{n.split(' (')[0]} " + "/".join(f"{times[n][w][-1]:.2f}" for w in workloads) + "s"
                for n in names), flush=True)
        mem = {}
        for n in names:
            mem[n] = (peak_bytes(runners[n].train_step), peak_bytes(runners[n].train_step_no_attn_dropout),
                      peak_bytes(runners[n].infer))
        base = "stock sdpa"
        raw[seq] = {"times": times, "mem": mem, "local_density": density, "batch": batch, "masks": source}
        raw[seq]["ratios"] = ratios
        for n in names:
            cells = [time_cell(times[n][key], None if n == base else ratios[n][key])
                     for key in ("train", "train0", "infer")]
            for i in range(3):
                mb = mem[n][i] / 2 ** 20
                cells.append(f"{mb:.0f} MB ({mem[n][i] / mem[base][i]:.2f}x)")
            lines.append(f"| {seq} ({batch}, {source}) | {n} | " + " | ".join(cells) + " |")
        del models, runners
        gc.collect()
    table = "\n".join([header, sep, *lines])
    return table, raw, encoder, names


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    _ensure_allocator_env(argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seqs", type=int, nargs="*", default=[64, 128], help="random-tree workloads")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--long-seqs", type=int, nargs="*", default=[],
                        help="SQuAD 2.0 passage workloads (needs ../shared/data), e.g. 512 1024")
    parser.add_argument("--long-batch", type=int, default=4)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--variants", nargs="*", default=None, help="subset of: " + "; ".join(VARIANTS))
    parser.add_argument("--encoder", default=None, help="model name or folder (default: all-MiniLM-L6-v2)")
    parser.add_argument("--out", default=None, help="write the markdown report here")
    parser.add_argument("--json", default=None, help="write raw timings here")
    parser.add_argument("--keep-env", action="store_true", help="do not set the allocator variables")
    parser.add_argument("--overhead", action="store_true",
                        help="the overhead-bound cells (batch 1-2 x 16-32 tokens, one thread), not the table above")
    parser.add_argument("--overhead-cells", nargs="*", default=[f"{b}x{t}" for b, t in OVERHEAD_CELLS],
                        help="BATCHxTOKENS cells of --overhead")
    parser.add_argument("--compiled-variants", nargs="*", default=["sla fused", "sla reference"],
                        help="variants also timed torch.compile'd (with the stock model); none: eager only")
    parser.add_argument("--compiled-cells", nargs="*", default=["1x16"],
                        help="the --overhead cells timed compiled too (inductor compiles each model per cell)")
    args = parser.parse_args(argv[1:])

    import torch
    import transformers

    started = time.time()
    load_start = _loadavg()
    isa_env = [f"{k}={os.environ[k]}" for k in ISA_ENV if k in os.environ]
    command = " ".join(isa_env + [f"{k}={v}" for k, v in ALLOCATOR_ENV.items() if os.environ.get(k) == v])
    command = (command + " " if command else "") + " ".join(shlex.quote(a) for a in [Path(sys.executable).name, *argv])
    if args.overhead:
        table, raw, encoder = overhead_run(args)
    else:
        table, raw, encoder, names = run(args)
    from structattn.attention import native

    device = (f"{cpu_name()} ({cpu_flags()}; ATen CPU capability {torch.backends.cpu.get_cpu_capability()}, fused "
              f"kernel built for {native.capability()}), {os.cpu_count()} logical CPUs, torch {torch.__version__} "
              f"({torch.get_num_threads()} threads), transformers {transformers.__version__}, "
              f"Python {platform.python_version()}")
    alloc = ", ".join(f"{k}={os.environ.get(k, '(unset)')}" for k in ALLOCATOR_ENV)
    if args.overhead:
        report = overhead_report(args, command, alloc, device, encoder, table, started, load_start)
    else:
        report = table_report(args, command, alloc, device, encoder, table, raw, started, load_start)
    print(report)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(report)
    if args.json:
        Path(args.json).write_text(json.dumps({str(k): v for k, v in raw.items()}, indent=1))
    return 0


def overhead_report(args, command, alloc, device, encoder, table, started, load_start) -> str:
    """The markdown report of ``--overhead``."""
    compiled = ", ".join(args.compiled_variants) if args.compiled_variants else "none"
    return "\n".join([
        "# Structure-aware attention: the overhead-bound cells on CPU",
        "",
        f"Command: `{command}`",
        "",
        f"Allocator: {alloc}",
        "",
        f"Device: {device}; one thread (torch.set_num_threads(1))",
        "",
        f"Model: all-MiniLM-L6-v2 ({encoder}) as BertForSequenceClassification, SLA m = 3 over random projective "
        f"trees (module docstring); median of {args.reps} interleaved repetitions (3 warm-up steps each, which "
        "include the compilation in mode `compiled`); time = the thread's CPU time of one call; ratio = median over "
        "repetitions of variant / mean of the stock (HF sdpa) runs just before and after it (S V1 S V2 S ...), "
        "[25th-75th percentile] in brackets; wall-clock ratios in the JSON. Train step = forward + backward + "
        "AdamW, attention dropout 0.1; the model's train/eval mode is set before each workload's timed calls, not "
        "inside them, and Python's garbage collector is off while they run (as timeit does). "
        "Compiled: torch.compile(model, dynamic=False), inductor, for the stock model "
        f"and {compiled}, in cells {', '.join(args.compiled_cells)}.",
        "",
        table,
        "",
        f"Wall time of the run: {(time.time() - started) / 60:.1f} min; load average (1, 5, 15 min) at start "
        f"{load_start}, at end {_loadavg()}",
        "",
    ])


def table_report(args, command, alloc, device, encoder, table, raw, started, load_start) -> str:
    """The markdown report of the speed and memory table."""
    return "\n".join([
        "# Structure-aware attention: speed and memory on CPU",
        "",
        f"Command: `{command}`",
        "",
        f"Allocator: {alloc}",
        "",
        f"Device: {device}",
        "",
        f"Model: all-MiniLM-L6-v2 ({encoder}) as BertForSequenceClassification, batch {args.batch} "
        f"(long inputs: {args.long_batch}; beyond 512 positions a longer, randomly initialised position table), "
        f"median of {args.reps} interleaved repetitions (2 warm-up steps each); ratio = median over repetitions of "
        "variant time / mean of the stock (HF sdpa) runs just before and after it (S V1 S V2 S ...), "
        "[25th-75th percentile] of those ratios in brackets. Train step = forward + backward + AdamW. "
        "Peak memory = peak live tensor bytes a step allocates (torch.profiler memory trace), ratio to stock.",
        "",
        table,
        "",
        "Local density (share of real token pairs inside the SLA m=3 pattern): "
        + ", ".join(f"seq {s}: {raw[s]['local_density']:.0%}" for s in raw),
        "",
        f"Wall time of the run: {(time.time() - started) / 60:.1f} min; load average (1, 5, 15 min) at start "
        f"{load_start}, at end {_loadavg()} (the benchmark's own threads count in it; load beyond them means other "
        "processes shared the machine, and the [25th-75th percentile] of the per-repetition ratios shows how much "
        "that moved them)",
        "",
    ])


if __name__ == "__main__":
    sys.exit(main())
