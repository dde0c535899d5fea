"""``structattn parse``: constituency trees from a saved chart parser, one bracketed tree per line.

``--model`` is a saved parser folder or the name of a shipped parser (``structattn models``; see
:mod:`structattn.models.trained`).

Input (``--input FILE``, default stdin) is UTF-8 (:func:`structattn.io.read_input_lines`): bytes that are not
UTF-8 are an error naming ``FILE:LINE`` or ``<stdin>:LINE`` and saying to re-save the text as UTF-8; a byte-order
mark at the start is dropped.

* raw text (default): each line is a text; the spaCy pipeline splits it into sentences and tokens, tokens
  are written in treebank form (``(`` -> ``-LRB-``, quotes by their tag). Blank lines are skipped; their
  count is printed on stderr. A line may give several sentences, hence several output lines.
* ``--pretokenized``: each line is one sentence of space-separated (treebank) tokens. An empty or blank line
  is an error naming the line (the output has one tree per input line, so nothing may be skipped).

Tags (``--tags``): ``spacy`` (default) writes the pipeline's PTB tags on the preterminals; ``none`` writes
``XX`` (with ``--pretokenized`` and a parser that reads no tags, spaCy is then never loaded). A parser that
reads tags (``pos`` spacy or gold) always gets the pipeline's tags as its input: raw text has no gold tags.

A sentence longer than the parser's ``max_words`` or the encoder's sub-word limit is an error naming
``FILE:LINE``. Nothing is written unless every sentence parses (``--output`` is created at the end).
"""
from __future__ import annotations

import sys
from pathlib import Path

from ..errors import UserError

TAG_CHOICES = ("spacy", "none")


def add_parser(sub) -> None:
    p = sub.add_parser("parse", help="parse raw or pre-tokenised text into bracketed constituency trees")
    p.add_argument("--model", required=True, help="a trained parser's name (`structattn models` lists them) or a saved parser "
                                                      "folder (structattn train-parsing's best/)")
    p.add_argument("--input", default="-", help="text file (default stdin)")
    p.add_argument("--output", default="-", help="tree file, one tree per line (default stdout)")
    p.add_argument("--pretokenized", action="store_true",
                   help="one sentence per line, tokens separated by spaces (no spaCy tokenisation)")
    p.add_argument("--batch-size", type=int, default=32, help="sentences per forward pass (default 32)")
    p.add_argument("--tags", choices=TAG_CHOICES, default="spacy",
                   help="preterminal tags: spaCy's PTB tags (default) or XX")
    p.add_argument("--spacy-model", default=None, help="spaCy pipeline (default: structattn's default pipeline)")
    p.set_defaults(func=run)


def read_sentences(lines: list[str], source: str, pretokenized: bool, spacy_model: str | None,
                   need_tags: bool) -> tuple[list[list[str]], list[list[str]] | None, list[str], int]:
    """Input lines -> (sentences of treebank tokens, their spaCy tags or None, a name per sentence, blank lines
    skipped). ``need_tags``: run spaCy's tagger on pre-tokenised input."""
    from ..parsing.ptb_text import spacy_tags, text_sentences
    from ..settings import DEFAULT_SPACY_MODEL

    model = spacy_model or DEFAULT_SPACY_MODEL
    if pretokenized:
        words, names = [], []
        for number, line in enumerate(lines, start=1):
            tokens = line.split()
            if not tokens:
                raise UserError(f"{source}:{number}: empty line; with --pretokenized every line must hold one "
                                "sentence (remove the blank lines)")
            words.append(tokens)
            names.append(f"{source}:{number}")
        tags = spacy_tags(words, model) if need_tags else None
        return words, tags, names, 0

    numbers = [n for n, line in enumerate(lines, start=1) if line.strip()]
    blank = len(lines) - len(numbers)
    words, tags, names = [], [], []
    for number, sentences in zip(numbers, text_sentences([lines[n - 1] for n in numbers], model)):
        for k, (w, t) in enumerate(sentences, start=1):
            words.append(w)
            tags.append(t)
            names.append(f"{source}:{number}" + (f" (sentence {k} of the line)" if len(sentences) > 1 else ""))
    return words, tags, names, blank


def run(args) -> int:
    from ..io import read_input_lines
    from ..models.parser import UNKNOWN_TAG, ChartParser

    if args.batch_size < 1:
        raise UserError(f"--batch-size {args.batch_size} must be positive")
    parser = ChartParser.from_pretrained(args.model)
    source, lines = read_input_lines(args.input)
    reads_tags = parser.config.pos != "none"
    words, tags, names, blank = read_sentences(lines, source, args.pretokenized, args.spacy_model,
                                               need_tags=reads_tags or args.tags == "spacy")
    if blank:
        print(f"structattn parse: skipped {blank} blank line(s) of {source}", file=sys.stderr)
    trees = parser.parse(words, tags, batch_size=args.batch_size, names=names)
    if args.tags == "none":
        for tree in trees:
            for leaf in tree.preterminals():
                leaf.label = UNKNOWN_TAG
    text = "".join(tree.to_string() + "\n" for tree in trees)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text, encoding="utf-8")
    print(f"structattn parse: {len(trees)} sentence(s) parsed", file=sys.stderr)
    return 0
