"""Joey NMT's committed translations against ours: BLEU of each file and a seed-paired bootstrap per variant.

    python experiments/peers/joey_vs_ours.py            # 4,000 updates: results/peers/joeynmt.SPLIT.de against
                                                        #   results/nmt/multi30k-VARIANT-sSEED.SPLIT.de, four test sets
    python experiments/peers/joey_vs_ours.py --laptop   # 800 updates: results/peers/joeynmt-laptop.test2016.de against
                                                        #   the laptop preset's lines of results/laptop_defaults.jsonl

(from the repository root, the library importable). BLEU is ``structattn score bleu``'s (sacreBLEU, detokenised,
13a). One JSON line per file, then one per (variant, split): our mean BLEU over seeds minus Joey's, its p from
:func:`structattn.tasks.bleu.seed_paired_bootstrap` (pairs (Joey, our seed k); 1,000 resamples, sacreBLEU's p), and
that p Holm-adjusted over the lines printed. Joey ran once, so the spread is ours only.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from structattn.tasks.base import read_lines
from structattn.tasks.bleu import corpus_bleu, seed_paired_bootstrap
from structattn.tasks.multi30k import read_split
from structattn.train.significance import holm, mean_std

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
SPLITS = ("test2016", "test2017", "test2018", "mscoco2017")
FULL_VARIANTS = ("transformer", "hybrid_gate")
FULL_SEEDS = (1, 2)
LAPTOP_VARIANTS = {"transformer": ("transformer", "transformer-s2"), "hybrid_gate": ("hg", "hg-s2")}


def full_length() -> tuple[dict[str, Path], dict[str, dict[str, list[Path]]]]:
    """(Joey's file per split, {variant: {split: our files, one per seed}}) of the 4,000-update runs."""
    joey = {split: RESULTS / "peers" / f"joeynmt.{split}.de" for split in SPLITS}
    ours = {v: {split: [RESULTS / "nmt" / f"multi30k-{v}-s{s}.{split}.de" for s in FULL_SEEDS] for split in SPLITS}
            for v in FULL_VARIANTS}
    return joey, ours


def laptop() -> tuple[dict[str, Path], dict[str, dict[str, list[Path]]]]:
    """The same for the 800-update runs; our files are the recorded lines' outputs (test2016 only)."""
    recorded = {}
    for line in read_lines(RESULTS / "laptop_defaults.jsonl"):
        run = json.loads(line)
        recorded[run["name"]] = ROOT / run["output"]
    ours = {v: {"test2016": [recorded[name] for name in names if name in recorded]}
            for v, names in LAPTOP_VARIANTS.items()}
    return {"test2016": RESULTS / "peers" / "joeynmt-laptop.test2016.de"}, ours


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--laptop", action="store_true", help="the 800-update runs (default: 4,000 updates)")
    args = parser.parse_args(argv)
    joey, ours = laptop() if args.laptop else full_length()
    references = {split: read_split(split).targets for split in joey}
    files = list(joey.items())
    files += [(split, p) for by_split in ours.values() for split, paths in by_split.items() for p in paths]
    hypotheses, bleu = {}, {}  # path -> its lines, its BLEU (each file read and scored once)
    for split, path in files:
        if not path.is_file():
            print(json.dumps({"file": str(path.relative_to(ROOT)), "missing": True}))
            continue
        hypotheses[path] = read_lines(path)
        bleu[path] = corpus_bleu(hypotheses[path], references[split])["bleu"]
        print(json.dumps({"file": str(path.relative_to(ROOT)), "split": split, "bleu": round(bleu[path], 2)}))
    lines = []
    for variant, by_split in ours.items():
        for split, paths in by_split.items():
            have = [p for p in paths if p in bleu]
            if joey[split] not in bleu or not have:
                continue
            tested = seed_paired_bootstrap([(hypotheses[joey[split]], hypotheses[p]) for p in have], references[split])
            mean, std = mean_std([bleu[p] for p in have])
            lines.append({"variant": variant, "split": split, "seeds": len(have), "bleu": f"{mean:.2f} ± {std:.2f}",
                          "joey_bleu": round(bleu[joey[split]], 2), "minus_joey": round(tested["delta"], 2),
                          "p": tested["p_value"]})
    for line, adjusted in zip(lines, holm([line["p"] for line in lines])):
        print(json.dumps({**line, "p": round(line["p"], 4), "p_holm": round(adjusted, 4)}, ensure_ascii=False))


if __name__ == "__main__":
    main()
