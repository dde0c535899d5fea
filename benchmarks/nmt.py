"""Training throughput of each translation variant (target tokens per second) as a ratio to ``transformer``.

    python benchmarks/nmt.py [--size tiny] [--sentences 2000] [--max-tokens 4096] [--steps 4] [--repeats 5]
                             [--threads 2] [--variants transformer local hybrid_gate ...] [--out FILE.md]

Every variant is the ``tiny`` (or ``--size``) MarianMT of ``structattn train-translation`` over the same joint BPE (learned
on the first ``--sentences`` Multi30k training pairs, vocabulary 8,000) and the same token-count batches of those
pairs (``--max-tokens`` padded tokens per side; the ``sla`` variant with its parsed-source masks, built outside
the timing). One repetition runs ``--steps`` training updates (label-smoothed loss, backward, Adam) of every
variant, interleaved in the order given; the figure is the median over repetitions of each variant's target tokens
per second and of its ratio of time to ``transformer`` in the same repetition. Prints the CPU model, its vector
instruction sets and the thread count. Needs ../shared/data/multi30k (or STRUCTATTN_DATA).
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

from structattn.translation.model import VARIANTS, build_model  # noqa: E402
from structattn.tasks.multi30k import read_split  # noqa: E402
from structattn.translation.data import (TranslationCollator, build_source_structure, encode_texts,  # noqa: E402
                                          token_batches, train_bpe_tokenizer)
from structattn.translation.trainer import _decoder_inputs, _label_smoothed_loss  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="tiny")
    ap.add_argument("--sentences", type=int, default=2000)
    ap.add_argument("--max-tokens", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS))
    ap.add_argument("--out", type=Path, help="also write the report as markdown here")
    args = ap.parse_args(argv)
    if args.variants[0] != "transformer":
        args.variants = ["transformer"] + [v for v in args.variants if v != "transformer"]
    torch.set_num_threads(args.threads)

    train = read_split("train")
    sources, targets = train.sources[:args.sentences], train.targets[:args.sentences]
    tokenizer = train_bpe_tokenizer(sources + targets, vocab_size=8000)
    src, tgt = encode_texts(tokenizer, sources), encode_texts(tokenizer, targets)
    batches = token_batches([len(x) for x in src], [len(x) for x in tgt], args.max_tokens, seed=0)[:args.steps]
    collate = TranslationCollator(tokenizer.pad_token_id)
    structure = None
    if "sla" in args.variants:
        structure = build_source_structure(tokenizer, sources, "sla", m=3)
    prepared = {}
    for variant in args.variants:
        needs = variant == "sla"
        prepared[variant] = [collate([src[i] for i in b], [tgt[i] for i in b], structure if needs else None,
                                     b if needs else None) for b in batches]
    models = {v: build_model(tokenizer, args.size, v, seed=0).train() for v in args.variants}
    optims = {v: torch.optim.Adam(m.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9) for v, m in models.items()}
    pad, start = tokenizer.pad_token_id, models["transformer"].config.decoder_start_token_id
    target_tokens = sum(int((b["labels"] != -100).sum()) for b in prepared["transformer"])

    def run(variant: str) -> float:
        model, optim = models[variant], optims[variant]
        t0 = time.perf_counter()
        for batch in prepared[variant]:
            batch = dict(batch)
            labels = batch.pop("labels")
            logits = model(**batch, decoder_input_ids=_decoder_inputs(labels, pad, start)).logits
            loss, _ = _label_smoothed_loss(logits, labels, 0.1)
            optim.zero_grad(set_to_none=True)
            loss.backward()
            optim.step()
        return time.perf_counter() - t0

    for v in args.variants:  # warm-up (the fused kernel builds on first use)
        run(v)
    times: dict[str, list[float]] = {v: [] for v in args.variants}
    for _ in range(args.repeats):
        for v in args.variants:
            times[v].append(run(v))
    header = [f"# Translation training throughput ({args.size}), ratio to transformer",
              "", f"Command: `python benchmarks/nmt.py {' '.join(argv if argv is not None else sys.argv[1:])}`",
              f"Machine: {cpu_description()}",
              f"Workload: {len(batches)} updates per repetition over the first {args.sentences:,} Multi30k training "
              f"pairs ({target_tokens:,} target tokens, batches of <= {args.max_tokens} padded tokens per side), "
              f"median of {args.repeats} interleaved repetitions", "",
              "| variant | mechanism parameters | target tokens / s | time ratio to transformer |",
              "|---|---:|---:|---:|"]
    rows = []
    for v in args.variants:
        ratio = statistics.median(t / b for t, b in zip(times[v], times["transformer"]))
        extra = sum(p.numel() for n, p in models[v].named_parameters() if ".structattn_" in n)
        rows.append(f"| {v} | {extra:,} | {target_tokens / statistics.median(times[v]):,.0f} | {ratio:.3f}x |")
    report = "\n".join(header + rows) + "\n"
    print(report)
    if args.out:
        args.out.write_text(report, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
