"""``structattn masks``: show the parse and a word-level mask, or write masks as JSON lines.

Examples::

    structattn masks --text "The film was fresh air ." --relation sla --m 3
    structattn masks --text "..." --relation window --k 2 --png mask.png
    structattn masks --conllu en_ewt-ud-dev.conllu --relation sdoi --json > masks.jsonl
"""
from __future__ import annotations

import json
import sys

from ..errors import UserError
from ..settings import DEFAULT_SPACY_MODEL

RELATION_CHOICES = ["sla", "window", "sdoi", "forward", "backward", "tree", "all"]


def add_parser(sub) -> None:
    p = sub.add_parser("masks", help="show a sentence's parse and structure mask, or dump masks of a CoNLL-U file",
                       description=__doc__.split("\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--text", help="text to parse with the spaCy pipeline (sentence-split)")
    src.add_argument("--conllu", help="CoNLL-U file with gold trees")
    src.add_argument("--ptb-dep", help="PTB dependency file or folder (NLTK dependency_treebank format)")
    p.add_argument("--relation", default="sla", choices=RELATION_CHOICES, help="word-level relation (default sla)")
    p.add_argument("--m", type=int, default=3, help="tree-distance threshold for sla/tree (default 3)")
    p.add_argument("--k", type=int, default=3, help="window half-width for window (default 3)")
    p.add_argument("--parser", default=DEFAULT_SPACY_MODEL, help=f"spaCy pipeline for --text (default {DEFAULT_SPACY_MODEL})")
    p.add_argument("--json", action="store_true", help="write one JSON object per sentence to stdout")
    p.add_argument("--png", help="write the mask of the (first) sentence as a PNG; with several sentences "
                                 "FILE gets a -<n> suffix per sentence")
    p.add_argument("--limit", type=int, default=None, help="only the first N sentences")
    p.set_defaults(func=run)


def _load(args):
    if args.text is not None:
        if not args.text.strip():
            raise UserError("--text is empty; give a sentence to parse")
        from ..dependency.spacy_backend import SpacyParser
        (passage,) = SpacyParser(model=args.parser).parse_texts([args.text])
        return passage
    if args.conllu is not None:
        from ..dependency.conllu_backend import read_conllu
        return read_conllu(args.conllu)
    from ..dependency.ptb_dependency import read_ptb_dependency
    return read_ptb_dependency(args.ptb_dep)


def run(args) -> int:
    from ..analysis.mask_view import mask_grid, parse_table, save_mask_png
    from ..structure.relations import batch_word_masks

    from ..paths import check_output_file

    for name in ("m", "k"):
        if getattr(args, name) < 0:
            raise UserError(f"--{name} must be >= 0, got {getattr(args, name)}")
    check_output_file(args.png, "--png")
    parses = _load(args)
    if args.limit is not None:
        parses = parses[:args.limit]
    masks = batch_word_masks(parses, args.relation, m=args.m, k=args.k)
    option = {"sla": f"m={args.m}", "tree": f"m={args.m}", "window": f"k={args.k}"}.get(args.relation, "")
    if args.json:
        out = sys.stdout
        for p, mask in zip(parses, masks):
            out.write(json.dumps({"sent_id": p.sent_id, "words": list(p.words),
                                  "mask": mask.astype(int).tolist()}, ensure_ascii=False) + "\n")
    else:
        for p, mask in zip(parses, masks):
            print(f"# sentence {p.sent_id}  relation={args.relation} {option}".rstrip())
            print(parse_table(p.words, p.heads, p.deprels, p.upos))
            print()
            print(mask_grid(p.words, mask))
            print()
    if args.png:
        many = len(parses) > 1
        for idx, (p, mask) in enumerate(zip(parses, masks)):
            path = args.png if not many else args.png.replace(".png", "") + f"-{idx + 1}.png"
            save_mask_png(p.words, mask, path, title=f"{args.relation} {option}".strip())
            print(f"wrote {path}", file=sys.stderr)
    return 0
