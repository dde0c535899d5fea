"""Time per training update in fp32 and bf16 (``--precision``) of the translation and parsing trainers.

    python benchmarks/precision.py [--threads 2] [--repeats 3] [--nmt-steps 4] [--parser-steps 3]
                                   [--sentences 2000]

Each workload runs the trainers' own update (:class:`structattn.train.engine.Engine`: forward and loss under
``torch.autocast("cpu", dtype=torch.bfloat16)`` for bf16, nothing for fp32; backward; clipping; Adam) on the same
batches in both precisions, from the same initial weights:

- ``nmt tiny``: the ``tiny`` MarianMT of ``structattn train-nmt`` (transformer variant) on batches of <= 4096
  padded tokens per side from the first ``--sentences`` Multi30k training pairs (joint BPE, vocabulary 8,000).
- ``parser none`` / ``parser MiniLM (frozen)``: the BNA parser at the CPU configuration of
  experiments/recipes/parsing.toml (d_model 128, 4 heads of 32, feed-forward 256, label MLP 128, batch 32,
  clipping 5): without a pretrained encoder (4 layers) and on all-MiniLM-L6-v2 kept frozen (2 layers), batches
  of 32 length-grouped training trees of the NLTK WSJ sample. The frozen encoder's rows are cached per sentence
  after the warm-up pass, as in a training run after its first epoch, so its figure is the steady state.

After one warm-up update of each pair, one repetition runs ``--*-steps`` updates of every (workload, precision)
pair, interleaved; the figure is the median over repetitions of the time per update and of the bf16/fp32 ratio
within a repetition. Prints the CPU model, its vector instruction sets and the thread count, and the table in
markdown; each measurement as it is taken on stderr. Needs ../shared/data (or STRUCTATTN_DATA).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from machine import cpu_description  # noqa: E402

from structattn.translation.data import (TranslationCollator, encode_texts, token_batches,  # noqa: E402
                                          train_bpe_tokenizer)
from structattn.bna.model import ChartParser, ParserConfig  # noqa: E402
from structattn.translation.model import build_model  # noqa: E402
from structattn.tasks import ptb  # noqa: E402
from structattn.tasks.multi30k import read_split  # noqa: E402
from structattn.bna.trainer import make_optimizer, warmup_factor  # noqa: E402
from structattn.train.engine import Engine, epoch_seed, seeded_batches  # noqa: E402
from structattn.translation.trainer import _decoder_inputs, _label_smoothed_loss  # noqa: E402

PRECISIONS = ("fp32", "bf16")


def _engine(precision: str, model, optimizer, clip: float, schedule=lambda step: 1.0) -> Engine:
    """The trainers' update machinery for ``model`` (no output folder is written: nothing is checkpointed)."""
    import tempfile

    engine = Engine(tempfile.mkdtemp(prefix="bench-precision-"), seed=0, precision=precision, clip_norm=clip,
                    show_progress=False)
    engine.prepare(model, optimizer, schedule)
    return engine


def _update(engine: Engine, loss) -> None:
    """One update as the engine takes it: backward, (process average), clipping, learning rate, step."""
    engine._backward(loss, 1)
    engine._step()
    engine.state.step += 1
PARSER_CONFIG = dict(d_model=128, heads=4, d_head=32, d_ff=256, label_hidden=128, batch_size=32, variant="bna")


def nmt_workload(sentences: int, steps: int):
    """(make(precision) -> update function over ``steps`` batches, description)."""
    train = read_split("train")
    sources, targets = train.sources[:sentences], train.targets[:sentences]
    tokenizer = train_bpe_tokenizer(sources + targets, vocab_size=8000)
    src, tgt = encode_texts(tokenizer, sources), encode_texts(tokenizer, targets)
    batches = token_batches([len(x) for x in src], [len(x) for x in tgt], 4096, seed=0)[:steps]
    collate = TranslationCollator(tokenizer.pad_token_id)
    prepared = [collate([src[i] for i in b], [tgt[i] for i in b], None, None) for b in batches]
    tokens = sum(int((b["labels"] != -100).sum()) for b in prepared)

    def make(precision: str):
        model = build_model(tokenizer, "tiny", "transformer", seed=0).train()
        optim = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
        engine = _engine(precision, model, optim, 0.0)
        pad, start = tokenizer.pad_token_id, model.config.decoder_start_token_id

        def run(limit: int | None = None) -> None:
            for batch in prepared[:limit]:
                batch = dict(batch)
                labels = batch.pop("labels")
                with engine.autocast():
                    logits = model(**batch, decoder_input_ids=_decoder_inputs(labels, pad, start)).logits
                    loss, _ = _label_smoothed_loss(logits, labels, 0.1)
                _update(engine, loss)
        return run

    return make, f"{len(prepared)} batches, {tokens:,} target tokens"


def parser_workload(encoder: str, steps: int):
    train = ptb.read_split("train")
    lengths = [len(t.leaves()) for t in train]
    batches = seeded_batches(len(train), 32, epoch_seed(1, 0), lengths)[:steps]  # the parser family's first epoch
    words = sum(lengths[i] for b in batches for i in b)

    def make(precision: str):
        cfg = ParserConfig(encoder=encoder, fine_tune_encoder=False, seed=1, **PARSER_CONFIG)
        torch.manual_seed(0)
        model = ChartParser.build(cfg, train).train()
        engine = _engine(precision, model, make_optimizer(model, cfg), cfg.clip_grad,
                         lambda step: warmup_factor(step, cfg.warmup_steps))

        def run(limit: int | None = None) -> None:
            for b in batches[:limit]:
                with engine.autocast():
                    loss = model.loss([train[i] for i in b])
                _update(engine, loss)
        return run

    return make, f"{len(batches)} batches of 32 trees, {words:,} words"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--nmt-steps", type=int, default=4)
    ap.add_argument("--parser-steps", type=int, default=3)
    ap.add_argument("--sentences", type=int, default=2000)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)

    workloads = {"nmt tiny": nmt_workload(args.sentences, args.nmt_steps),
                 "parser none": parser_workload("none", args.parser_steps),
                 "parser MiniLM (frozen)": parser_workload("", args.parser_steps)}
    runs, steps = {}, {}
    for name, (make, _) in workloads.items():
        steps[name] = args.nmt_steps if name.startswith("nmt") else args.parser_steps
        for precision in PRECISIONS:
            runs[name, precision] = make(precision)
            # warm-up: oneDNN picks its kernels (one update); the frozen encoder fills its cache (every batch)
            runs[name, precision](None if "frozen" in name else 1)
    times = {key: [] for key in runs}
    for rep in range(args.repeats):
        for key, run in runs.items():
            t0 = time.perf_counter()
            run()
            times[key].append((time.perf_counter() - t0) / steps[key[0]])
            print(f"repetition {rep + 1}: {key[0]} {key[1]} {times[key][-1]:.3f} s/update", file=sys.stderr,
                  flush=True)
    lines = ["# Time per training update, fp32 vs bf16 autocast (translation and parsing trainers)", "",
             f"Command: `python benchmarks/precision.py {' '.join(argv if argv is not None else sys.argv[1:])}`",
             f"Machine: {cpu_description()}",
             f"Median of {args.repeats} interleaved repetitions (each: every workload in both precisions)", "",
             "| workload | updates per repetition | s / update fp32 | s / update bf16 | bf16 / fp32 |",
             "|---|---|---:|---:|---:|"]
    for name, (_, what) in workloads.items():
        fp32, bf16 = times[name, "fp32"], times[name, "bf16"]
        ratio = statistics.median(b / f for b, f in zip(bf16, fp32))
        lines.append(f"| {name} | {what} | {statistics.median(fp32):.3f} | {statistics.median(bf16):.3f} | "
                     f"{ratio:.2f}x |")
    print("\n".join(lines))  # markdown, for results/bench_precision_cpu.md
    return 0


if __name__ == "__main__":
    sys.exit(main())
