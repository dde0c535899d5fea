"""``structattn demo``: the library's systems on the offline defaults, one step each.

1. the structure pipeline: the dependency parse and SLA mask of a sample sentence;
2. BNA: the constituency tree of the same sentence by the shipped parser ``bna-scratch``;
3. the hybrid local/global gate: two captions translated by the shipped ``hybrid-gate-en-de``;
4. SG-Net reading: a question answered by a shipped reader when this install has one;
5. SLA inside an encoder: all-MiniLM-L6-v2 fine-tuned with and without SLA on a slice of SST-2 (1,000 sentences,
   one epoch of 63 updates of 16 at learning rate 1e-4), both dev accuracies printed (the longest step: about a
   minute and a half per run on one CPU thread).
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path

SAMPLE = "the film is a breath of fresh air that allows us to see the world anew ."
CAPTIONS = ["A dog runs on the beach.", "Two men are playing chess in a park."]
QUESTION = ("What does the film allow us to do?", "The film is a breath of fresh air that allows us to see the "
            "world anew. It was shot in Lisbon over two summers.")


def add_parser(sub) -> None:
    p = sub.add_parser("demo", help="show each system once: structure, parse, translation, reading, SLA fine-tuning",
                       description=" ".join(__doc__.split("\n\n", 1)[1].split()))
    p.add_argument("--max-train-examples", type=int, default=1000,
                   help="SST-2 training sentences of each run (default 1000)")
    p.add_argument("--max-eval-examples", type=int, default=0,
                   help="dev sentences scored (default 0 = the whole dev set, 872)")
    p.add_argument("--epochs", type=float, default=1.0, help="passes over the training sentences (default 1)")
    p.add_argument("--seed", type=int, default=42, help="seed of both runs (default 42)")
    p.add_argument("--output-dir", default="runs/demo",
                   help="folder of the two runs, OUTPUT_DIR/global and OUTPUT_DIR/sla (default runs/demo; "
                        "emptied first)")
    p.add_argument("--skip-training", action="store_true", help="steps 1-4 only, no fine-tuning")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..paths import check_output_folder

    check_output_folder(args.output_dir)
    if not args.skip_training:  # the SST-2 files of step 5, found before steps 1-4 take their minutes
        from ..settings import data_dir
        from ..tasks.base import read_lines
        from ..tasks.glue import SST2

        for split in ("train", "dev"):
            read_lines(data_dir() / SST2.splits[split])
    from ..analysis.mask_view import mask_grid, parse_table
    from ..dependency.spacy_backend import SpacyParser
    from ..structure.relations import batch_word_masks

    (passage,) = SpacyParser().parse_words([SAMPLE.split()])
    print("== 1. structure: dependency parse and SLA mask (m=3) of a sample sentence ==")
    for p, mask in zip(passage, batch_word_masks(passage, "sla", m=3)):
        print(parse_table(p.words, p.heads, p.deprels, p.upos))
        print()
        print(mask_grid(p.words, mask))
        print()
    _show_parse([p.words for p in passage])
    _show_translation()
    _show_reading()
    if args.skip_training:
        return 0

    from ..train.config import TrainConfig
    from ..finetuning.trainer import Trainer

    results = {}
    for mechanism in ("global", "sla"):
        cfg = TrainConfig(task="sst2", mechanism=mechanism, m=3 if mechanism == "sla" else None,
                          output_dir=str(Path(args.output_dir) / mechanism), seed=args.seed,
                          learning_rate=1e-4, epochs=args.epochs, batch_size=16, max_length=64,
                          eval_every=0, max_train_examples=args.max_train_examples,
                          max_eval_examples=args.max_eval_examples, save_checkpoints=False, keep_best_model=False)
        _fresh(Path(cfg.output_dir))
        print(f"== 5. SLA in an encoder: fine-tuning {mechanism} on {args.max_train_examples} SST-2 sentences, "
              f"{args.epochs:g} epochs ==")
        t0 = time.time()
        summary = Trainer(cfg).train()
        results[mechanism] = (summary["best"], time.time() - t0)
    print()
    print(f"SST-2 dev accuracy (all-MiniLM-L6-v2, CPU, seed {args.seed}, {args.max_train_examples} training "
          "sentences):")
    for mechanism, (acc, secs) in results.items():
        name = "baseline (global attention)" if mechanism == "global" else "SLA (m=3)"
        print(f"  {name:30s} {100 * acc:6.2f}   ({secs:.0f} s)")
    print("One seed on a slice: differences of a point or two are within seed noise; see results/ for "
          "multi-seed comparisons.")
    return 0


@contextmanager
def _timed(title: str):
    """Print ``title`` now and the seconds the step took when it ends."""
    print(f"== {title} ==")
    start = time.time()
    yield
    print(f"({time.time() - start:.1f} s)\n")


def _show_parse(sentences: list[list[str]]) -> None:
    from ..bna.model import ChartParser

    with _timed("2. BNA: constituency tree by the shipped parser bna-scratch"):
        for tree in ChartParser.from_pretrained("bna-scratch").parse(sentences):
            print(tree.to_string())


def _show_translation() -> None:
    from ..translation.translator import Translator

    with _timed("3. hybrid local/global gate: English -> German by the shipped hybrid-gate-en-de"):
        for source, target in zip(CAPTIONS, Translator.load("hybrid-gate-en-de").translate(CAPTIONS)):
            print(f"{source}  ->  {target}")


def _show_reading() -> None:
    from ..models.trained import shipped_models

    readers = shipped_models("reader")
    with _timed("4. SG-Net reading: a question about a passage"):
        if not readers:
            print("no reader ships with this install yet (docs/reader.md: train one with `structattn train "
                  "--task squad2 --sgnet dual`, then `structattn answer --model RUN_DIR`)")
            return
        from ..sgnet.reader import Reader

        question, context = QUESTION
        best = Reader.from_pretrained(readers[0].name)(question=question, context=context).answer
        print(f"{readers[0].name}: Q: {question}")
        print(f"A: {best.text!r} (characters {best.start}-{best.end}, score {best.score:.2f})" if best else
              "A: no answer in the passage")


def _fresh(folder: Path) -> None:
    """The demo always starts from scratch (no resume of an older demo run)."""
    import shutil
    if folder.exists():
        shutil.rmtree(folder)
