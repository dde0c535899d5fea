"""Cost of batching RACE-M questions for training: the baseline's collator against SG-Net's (which builds the
``[B, C, T, T]`` syntax-guided masks in the training process, on the CPU, every update).

    python benchmarks/mc_collate.py [--questions 320] [--batch 16] [--max-length 384] [--reps 5] [--out FILE.json]

Features of the first ``--questions`` RACE-M training questions (from ``$STRUCTATTN_DATA``; parses through the
parse cache, spaCy where a text is not cached), built once for each variant as the trainer builds them (SG-Net: the
SDOI structure of ``sg_structure_spec("multiple_choice", "option")``). Each repetition collates every batch of
``--batch`` questions with both collators, interleaved (baseline, SG-Net, baseline, ...). Reported: the median over
batches and repetitions of each collator's time per batch, and their ratio; the CPU model, its vector instruction
sets and the thread count. What the GPU does meanwhile is not measured here.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from machine import cpu_description  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=320)
    ap.add_argument("--batch", type=int, default=16, help="questions a batch (4 option inputs each)")
    ap.add_argument("--max-length", type=int, default=384)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--model", default=None, help="tokenizer (default: the offline encoder)")
    ap.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = ap.parse_args()

    from transformers import AutoTokenizer

    from structattn.settings import default_encoder
    from structattn.tasks.multiple_choice import get_mc_task
    from structattn.sgnet.multiple_choice_features import MultipleChoiceCollator, build_mc_features
    from structattn.sgnet.loading import SGMaskCollator, sg_structure_spec

    tokenizer = AutoTokenizer.from_pretrained(args.model or default_encoder())
    questions = get_mc_task("race_m").read("train")[:args.questions]
    spec = sg_structure_spec("multiple_choice", "option")
    build = dict(max_length=args.max_length, split="race_m/train", show_progress=False)
    plain = build_mc_features(questions, tokenizer, None, **build)
    with_sg = build_mc_features(questions, tokenizer, spec, **build)
    for feature in with_sg:   # where the SG-Net trainer keeps them (multiple_choice.py)
        for option in feature["options"]:
            option["sg_structure"], option["structure"] = option["structure"], None
    baseline = MultipleChoiceCollator(tokenizer.pad_token_id, option_mask=True)
    sgnet = SGMaskCollator(baseline, spec.rules, options=True)

    times: dict[str, list[float]] = {"baseline": [], "sgnet": []}
    shape = None
    for _ in range(args.reps):
        for start in range(0, len(questions), args.batch):
            for name, collate, feats in (("baseline", baseline, plain), ("sgnet", sgnet, with_sg)):
                t0 = time.perf_counter()
                batch = collate(feats[start:start + args.batch])
                times[name].append(time.perf_counter() - t0)
                if name == "sgnet":
                    shape = list(batch["sg_mask"].shape)
    medians = {name: 1000 * statistics.median(ts) for name, ts in times.items()}
    result = {"command": "python " + " ".join(sys.argv), "machine": cpu_description(),
              "questions": len(questions), "batch_questions": args.batch, "max_length": args.max_length,
              "reps": args.reps, "sg_mask_shape_last_batch": shape,
              "median_ms_per_batch": {k: round(v, 2) for k, v in medians.items()},
              "sgnet_over_baseline": round(medians["sgnet"] / medians["baseline"], 1)}
    print(json.dumps(result, indent=1))
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
