"""``structattn parse``: constituency trees from a saved chart parser, one bracketed tree per line.

``--model`` is a saved parser folder or the name of a shipped parser (``structattn models``; see
[`structattn.models.trained`][structattn.models.trained]).

Input (``--input FILE``, default stdin) is UTF-8 (`structattn.io.read_input_lines`): bytes that are not
UTF-8 are an error naming ``FILE:LINE`` or ``<stdin>:LINE`` and saying to re-save the text as UTF-8; a byte-order
mark at the start is dropped.

* raw text (default): each line is a text; the spaCy pipeline splits it into sentences and tokens, tokens
  are written in treebank form (``(`` -> ``-LRB-``, quotes by their tag). A line that gives several sentences
  gives their trees on one output line, separated by a space (``score evalb`` reads any whitespace layout).
* ``--pretokenized``: each line is one sentence of space-separated (treebank) tokens.

In both modes (as in ``translate``) output line N belongs to input line N: an empty or blank input line gives an
empty output line (their count is printed on stderr). Control characters (NUL and other C0 controls but tab) are
an error naming the line.

Tags (``--tags``): ``spacy`` (default) writes the pipeline's PTB tags on the preterminals; ``none`` writes
``XX`` (with ``--pretokenized`` and a parser that reads no tags, spaCy is then never loaded). A parser that
reads tags (``pos`` spacy or gold) always gets the pipeline's tags as its input: raw text has no gold tags.

A sentence longer than the parser's ``max_words`` or the encoder's sub-word limit is an error naming
``FILE:LINE``. ``--input`` and ``--output`` are checked before the model loads (`structattn.paths`); nothing
is written unless every sentence parses (``--output`` is written at the end, atomically).
"""
from __future__ import annotations

import sys
from pathlib import Path

from ..errors import UserError

TAG_CHOICES = ("spacy", "none")


def add_parser(sub) -> None:
    from ..cli_grammar import add_line_io_flags
    from . import trained_model
    from ..settings import DEFAULT_SPACY_MODEL

    p = sub.add_parser("parse", help="parse raw or pre-tokenised text into bracketed constituency trees",
                       description="Constituency trees of raw text (split into sentences by spaCy) or of "
                                   "pre-tokenised sentences, one output line per input line, with a trained "
                                   "parser (`structattn models` lists the shipped ones).")
    add_line_io_flags(p, "parser", "a saved parser folder (structattn train-parsing's best/)",
                      "one text (with --pretokenized: one sentence)", "the trees", model_type=trained_model("parser"))
    p.add_argument("--pretokenized", action="store_true",
                   help="one sentence per line, tokens separated by spaces (no spaCy tokenisation)")
    p.add_argument("--batch-size", type=int, default=32, help="sentences per forward pass (default 32)")
    p.add_argument("--tags", choices=TAG_CHOICES, default="spacy",
                   help="preterminal tags: spacy = the pipeline's PTB tags (default), none = XX")
    p.add_argument("--parser", default=None, help="spaCy pipeline that splits, tokenises and tags the text "
                                                  f"(default: {DEFAULT_SPACY_MODEL})")
    p.set_defaults(func=run)


def read_sentences(lines: list[str], source: str, pretokenized: bool, parser,
                   need_tags: bool) -> tuple[list[list[str]], list[list[str]] | None, list[str], list[int]]:
    """Input lines -> (sentences of treebank tokens, their spaCy tags or None, a name per sentence, the index of
    each sentence's input line), split and tagged by ``parser`` ([`structattn.Parser`][structattn.bna.parser.Parser]). A
    blank line gives no sentence. ``need_tags``: run spaCy's tagger on pre-tokenised input."""
    numbers = [n for n, line in enumerate(lines, start=1) if line.strip()]
    if pretokenized:
        words = [lines[n - 1].split() for n in numbers]
        tags = parser.tag(words) if need_tags else None
        return words, tags, [f"{source}:{n}" for n in numbers], [n - 1 for n in numbers]
    words, tags, names, line_of = [], [], [], []
    for number, sentences in zip(numbers, parser.split([lines[n - 1] for n in numbers])):
        for k, (w, t) in enumerate(sentences, start=1):
            words.append(w)
            tags.append(t)
            names.append(f"{source}:{number}" + (f" (sentence {k} of the line)" if len(sentences) > 1 else ""))
            line_of.append(number - 1)
    return words, tags, names, line_of


def run(args) -> int:
    from ..io import atomic_write_text, read_input_lines
    from ..bna.model import UNKNOWN_TAG
    from ..bna.parser import Parser
    from ..paths import check_input_file, check_output_file

    if args.batch_size < 1:
        raise UserError(f"--batch-size {args.batch_size} must be positive")
    check_input_file(args.input, "--input")
    check_output_file(args.output, "--output")
    parser = Parser.from_pretrained(args.model, spacy_model=args.parser, batch_size=args.batch_size)
    source, lines = read_input_lines(args.input)
    words, tags, names, line_of = read_sentences(lines, source, args.pretokenized, parser,
                                                 need_tags=parser.reads_tags or args.tags == "spacy")
    blank = sum(1 for line in lines if not line.strip())
    if blank:
        print(f"structattn parse: {blank} blank line(s) of {source}: an empty output line each", file=sys.stderr)
    trees = parser.parse_sentences(words, tags, names=names)
    out_lines: list[list[str]] = [[] for _ in lines]
    for tree, index in zip(trees, line_of):
        if args.tags == "none":
            for leaf in tree.preterminals():
                leaf.label = UNKNOWN_TAG
        out_lines[index].append(tree.to_string())
    text = "".join(" ".join(line) + "\n" for line in out_lines)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        atomic_write_text(Path(args.output), text)
    print(f"structattn parse: {len(trees)} sentence(s) parsed", file=sys.stderr)
    return 0
