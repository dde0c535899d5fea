"""Penn Treebank bracketed trees: reading, cleaning, the fixed WSJ-sample split, and spans.

Data: the NLTK 10% WSJ sample (``ptb_sample_nltk/treebank/combined/wsj_0001.mrg .. wsj_0199.mrg``, 3,914
trees). Each file holds trees such as ``( (S (NP-SBJ (NNP Vinken)) (VP ...) (. .)) )``: an outer bracket
without a label, function tags and co-indices on the labels (``NP-SBJ-1``, ``NP=2``) and empty elements
(``(-NONE- *T*-1)``).

Reading (`parse_trees`) uses its own tokenizer that knows the line of every bracket, so that a broken
file is reported as ``<file>:<line>: <what is wrong>; <what to do>`` (`TreebankError`): unbalanced
brackets, an empty tree ``( )``, a bracket with a label and nothing inside, a word without a POS tag (a bare
word beside bracketed siblings), two words under one tag, or text outside any bracket.

Cleaning (`clean_tree`), the usual parsing setup:

* ``-NONE-`` preterminals are removed, then every constituent left without words (recursively);
* function tags and indices are stripped from the labels: ``NP-SBJ-1 -> NP``, ``NP=2 -> NP``,
  ``PP-LOC-CLR -> PP``; a label that *starts* with ``-`` (``-NONE-``, ``-LRB-``, ``-RRB-``) is left whole;
* the outer bracket without a label is dropped (with several children it is kept, labelled ``TOP``).

Punctuation is kept (EVALB, not the reader, ignores it when scoring; see
[`structattn.tasks.evalb`][structattn.tasks.evalb]).

Split by file, fixed for every run (`PTB_SPLIT`): train wsj_0001-0139 (3,068 trees), dev
wsj_0140-0159 (328), test wsj_0160-0199 (518). Any other bracketed treebank file (one tree per line, or the
PTB's multi-line layout) is read and cleaned by the same rules with `read_treebank`. A corpus split by file is a
`TreebankCorpus`; `PARSING_CORPORA` is the ``parsing`` family of the task registry.

Spans (`tree_to_spans`, `spans_to_tree`): a sentence of L words has fenceposts 0..L; span
``(i, j)`` covers words ``i+1..j``. Unary chains become one label joined top-down with ``::`` (``S::VP``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from ..errors import UserError

#: files of each split, as (first, last) wsj_NNNN numbers, inclusive
PTB_SPLIT = {"train": (1, 139), "dev": (140, 159), "test": (160, 199)}
#: trees per split in the NLTK sample (checked by the data tests)
PTB_SPLIT_SIZES = {"train": 3068, "dev": 328, "test": 518}
PTB_SUBDIR = Path("ptb_sample_nltk") / "treebank" / "combined"

#: treebank token -> raw text (whole-token escapes)
PTB_ESCAPES = {"-LRB-": "(", "-RRB-": ")", "-LCB-": "{", "-RCB-": "}", "-LSB-": "[", "-RSB-": "]",
               "``": '"', "''": '"'}
#: raw text -> treebank token; the quote is left as written (opening or closing cannot be told from one token)
_RAW_TO_PTB = {"(": "-LRB-", ")": "-RRB-", "{": "-LCB-", "}": "-RCB-", "[": "-LSB-", "]": "-RSB-"}

EMPTY_ELEMENT = "-NONE-"
#: the label a root bracket with several children gets when the outer unlabelled bracket is dropped
TOP = "TOP"
#: joins the labels of a collapsed unary chain, top-down
UNARY_JOIN = "::"


class TreebankError(UserError):
    """A malformed bracketed tree: ``<file>:<line>: <what is wrong>; <what to do>``."""


@dataclass(eq=True)
class Tree:
    """A constituency tree node.

    A preterminal has a POS tag as ``label``, its ``word`` and no children; any other node has a
    nonterminal label (``""`` only for the treebank's outer unlabelled bracket) and one or more children.
    """

    label: str
    children: list["Tree"] = field(default_factory=list)
    word: str | None = None

    def is_preterminal(self) -> bool:
        return self.word is not None

    def preterminals(self) -> list["Tree"]:
        """The preterminal nodes, left to right."""
        out: list[Tree] = []
        stack = [self]
        while stack:  # iterative: deep trees must not hit the recursion limit
            node = stack.pop()
            if node.is_preterminal():
                out.append(node)
            else:
                stack.extend(reversed(node.children))
        return out

    def leaves(self) -> list[str]:
        return [p.word for p in self.preterminals()]

    def tags(self) -> list[str]:
        return [p.label for p in self.preterminals()]

    def to_string(self) -> str:
        """One line: ``(S (NP (DT The) (NN cat)) (VP (VBD sat)))``."""
        if self.is_preterminal():
            return f"({self.label} {self.word})"
        return f"({self.label} " + " ".join(c.to_string() for c in self.children) + ")"

    def __str__(self) -> str:
        return self.to_string()


# ---------------------------------------------------------------------------------------------- reading
_TOKEN = re.compile(r"\(|\)|[^\s()]+")
_FIX = "fix the brackets of this tree (one (TAG word) per word, every '(' closed by a ')')"


def _tokens(text: str):
    """``(token, line)`` for every ``(``, ``)`` and atom (a run of characters that are neither space nor bracket)."""
    line, pos = 1, 0
    for m in _TOKEN.finditer(text):
        line += text.count("\n", pos, m.start())
        pos = m.start()
        yield m.group(), line


def parse_trees(text: str, source: str = "<string>", starts: list[int] | None = None) -> list[Tree]:
    """Every top-level bracketed tree in ``text`` (any layout: one per line or spread over lines); ``starts``,
    when given, receives the line each tree starts on (1-based), for messages about a tree.

    An outer bracket without a label, ``( (S ...) )``, gives ``Tree(label="", children=[S])``.

    Raises:
        TreebankError: ``<source>:<line>: ...`` for unbalanced brackets, an empty tree, a bracket with a label
            and nothing inside, a word without a tag, two words under one tag, or text outside any bracket.
    """
    trees: list[Tree] = []
    # stack of open brackets: [label or None, children, word or None, line of "(", label-seen flag]
    stack: list[list] = []
    for tok, line in _tokens(text):
        where = f"{source}:{line}"
        if tok == "(":
            if stack and stack[-1][2] is not None:
                raise TreebankError(f"{where}: '(' after the word {stack[-1][2]!r} inside ({stack[-1][0]} ...): a "
                                    f"preterminal holds one word; {_FIX}")
            stack.append([None, [], None, line])
        elif tok == ")":
            if not stack:
                raise TreebankError(f"{where}: ')' without a matching '(' (unbalanced brackets); {_FIX}")
            label, children, word, start = stack.pop()
            if word is not None:
                node = Tree(label, [], word)
            elif children:
                if label == "" and stack:
                    raise TreebankError(f"{source}:{start}: bracket without a label inside a tree (only the outer "
                                        f"bracket may have none); {_FIX}")
                node = Tree(label or "", children)
            elif label is None or label == "":
                raise TreebankError(f"{source}:{start}: empty tree '( )'; remove it or put a tree inside")
            else:
                raise TreebankError(f"{source}:{start}: ({label}) has neither a word nor children; {_FIX}")
            if stack:
                stack[-1][1].append(node)
            else:
                trees.append(node)
                if starts is not None:
                    starts.append(start)
        else:
            if not stack:
                raise TreebankError(f"{where}: text {tok!r} outside any bracket; trees must be fully bracketed, "
                                    "e.g. (S (NP (DT The) (NN cat)) (VP (VBD sat)))")
            top = stack[-1]
            if top[0] is None and not top[1]:
                top[0] = tok  # the label: first atom right after "("
            elif top[1]:
                raise TreebankError(f"{where}: word {tok!r} without a POS tag beside bracketed siblings in "
                                    f"({top[0]} ...); write it as (TAG {tok})")
            elif top[2] is not None:
                raise TreebankError(f"{where}: two words {top[2]!r} {tok!r} under one tag ({top[0]} ...); {_FIX}")
            else:
                top[2] = tok
        if tok == "(" and len(stack) >= 2 and stack[-2][0] is None and not stack[-2][1]:
            stack[-2][0] = ""  # "( (S" and "((S": the enclosing bracket has no label
    if stack:
        raise TreebankError(f"{source}:{stack[-1][3]}: '(' never closed (unbalanced brackets, "
                            f"{len(stack)} open at the end of the text); {_FIX}")
    return trees


def read_tree_file(path, starts: list[int] | None = None) -> list[Tree]:
    """The trees of one file, as found (traces and function tags kept); ``starts`` receives each tree's first
    line (`parse_trees`).

    Raises:
        UserError: missing, empty or non-UTF-8 file; TreebankError for a malformed tree or no tree at all.
    """
    from .base import read_lines

    path = Path(path)
    text = "\n".join(read_lines(path))  # keeps line numbers; UTF-8 and empty-file errors name the file
    trees = parse_trees(text, source=str(path), starts=starts)
    if not trees:
        raise TreebankError(f"{path}:1: no bracketed tree in the file; expected trees like (S (NP ...) ...)")
    return trees


# --------------------------------------------------------------------------------------------- cleaning
def strip_label(label: str) -> str:
    """``NP-SBJ-1 -> NP``, ``NP=2 -> NP``, ``PP-LOC-CLR -> PP``; a label starting with ``-`` stays whole."""
    if label.startswith("-"):
        return label
    return re.split(r"[-=]", label, maxsplit=1)[0]


def _clean(node: Tree) -> Tree | None:
    if node.is_preterminal():
        return None if node.label == EMPTY_ELEMENT else Tree(node.label, [], node.word)
    kids = [k for k in (_clean(c) for c in node.children) if k is not None]
    if not kids:
        return None  # a constituent left empty
    return Tree(strip_label(node.label), kids)


def clean_tree(tree: Tree) -> Tree:
    """Remove ``-NONE-`` and the constituents left empty, strip function tags and indices, drop the outer
    unlabelled bracket (kept as ``TOP`` when it has several children). Returns a new tree.

    Raises:
        ValueError: the tree has no word besides empty elements.
    """
    cleaned = _clean(tree)
    if cleaned is None:
        raise ValueError(f"tree has no words besides empty elements: {tree.to_string()}")
    if tree.label == "" and not tree.is_preterminal():
        cleaned = cleaned.children[0] if len(cleaned.children) == 1 else Tree(TOP, cleaned.children)
    return cleaned


# ------------------------------------------------------------------------------------------------ split
@dataclass(frozen=True)
class TreebankCorpus:
    """A parsing corpus split by file: split ``<split>`` is the files ``<folder>/<pattern.format(n)>`` for ``n``
    from ``first`` to ``last`` of ``splits[split]``, under the data folder, read and cleaned by `read_treebank`.
    ``name`` and ``what`` are said in messages; ``split_note`` describes the split in a run's summary and settings."""

    name: str
    what: str
    folder: Path
    pattern: str
    splits: Mapping[str, tuple[int, int]]
    split_note: str

    def directory(self, data_dir=None) -> Path:
        """``<data>/<folder>``; UserError saying where it looked when missing."""
        from ..settings import data_dir as default_data_dir

        root = Path(data_dir) if data_dir is not None else default_data_dir()
        path = root / self.folder
        if not path.is_dir():
            first, last = min(f for f, _ in self.splits.values()), max(last for _, last in self.splits.values())
            raise UserError(f"{path}: {self.what} not found (expected {self.pattern.format(first)} .. "
                            f"{self.pattern.format(last)} there); set STRUCTATTN_DATA to the folder that holds "
                            f"{self.folder.parts[0]}/")
        return path

    def split_files(self, split: str, data_dir=None) -> list[Path]:
        """The files of ``split`` in treebank order; UserError if one is missing."""
        if split not in self.splits:
            raise UserError(f"unknown {self.name} split {split!r}; expected one of {', '.join(self.splits)}")
        folder = self.directory(data_dir)
        first, last = self.splits[split]
        paths = [folder / self.pattern.format(n) for n in range(first, last + 1)]
        missing = [p.name for p in paths if not p.is_file()]
        if missing:
            raise UserError(f"{folder}: {len(missing)} file(s) of the {split} split missing "
                            f"({', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}); restore the full "
                            f"{self.what}")
        return paths

    def read_split(self, split: str, data_dir=None, *, clean: bool = True) -> list[Tree]:
        """The trees of a split in treebank order, cleaned unless ``clean=False``."""
        return [tree for path in self.split_files(split, data_dir) for tree in read_treebank(path, clean=clean)]


PTB_SAMPLE = TreebankCorpus("PTB", "Penn Treebank sample", PTB_SUBDIR, "wsj_{:04d}.mrg", PTB_SPLIT,
                            "fixed (train wsj_0001-0139, dev 0140-0159, test 0160-0199)")

#: The ``parsing`` family of the task registry ([`structattn.tasks.registry`][structattn.tasks.registry]): corpus
#: name -> reader. The first is the default of ``structattn train-parsing``.
PARSING_CORPORA: dict[str, TreebankCorpus] = {"ptb_sample_nltk": PTB_SAMPLE}


def ptb_dir(data_dir=None) -> Path:
    """``<data>/ptb_sample_nltk/treebank/combined``; UserError saying where it looked when missing."""
    return PTB_SAMPLE.directory(data_dir)


def split_files(split: str, data_dir=None) -> list[Path]:
    """The files of ``split`` (``train``, ``dev``, ``test``) in treebank order; UserError if one is missing."""
    return PTB_SAMPLE.split_files(split, data_dir)


def read_split(split: str, data_dir=None, *, clean: bool = True) -> list[Tree]:
    """The trees of a split in treebank order (train 3,068 / dev 328 / test 518), cleaned unless ``clean=False``."""
    return PTB_SAMPLE.read_split(split, data_dir, clean=clean)


def read_treebank(path, *, clean: bool = True, starts: list[int] | None = None) -> list[Tree]:
    """The trees of any bracketed treebank file (one tree per line, or spread over lines as in the PTB ``.mrg``
    files), read by the rules of `parse_trees` and cleaned by `clean_tree` unless ``clean=False``;
    ``starts`` receives each tree's first line.

    Raises:
        UserError: missing, empty or non-UTF-8 file; TreebankError naming ``<file>:<line>`` for a malformed
            tree, or ``<file>: tree <k>`` for a tree with no word besides empty elements.
    """
    trees = read_tree_file(path, starts)
    if not clean:
        return trees
    cleaned = []
    for k, tree in enumerate(trees):
        try:
            cleaned.append(clean_tree(tree))
        except ValueError as exc:
            line = f":{starts[k]}" if starts else ""
            raise TreebankError(f"{path}{line}: tree {k + 1}: {exc}; remove that tree") from None
    return cleaned


# ------------------------------------------------------------------------------------------------ spans
def tree_to_spans(tree: Tree) -> tuple[list[str], list[str], list[tuple[int, int, str]]]:
    """A cleaned tree -> ``(words, tags, spans)``.

    ``spans`` holds every constituent above the preterminals as ``(i, j, label)`` in pre-order (sorted by
    ``(i, -j)``); a unary chain is one span whose label joins the chain top-down with ``::`` (``S::VP``).
    The root span ``(0, L)`` is included. A tree that is a single preterminal has no spans.
    """
    words = tree.leaves()
    tags = tree.tags()
    spans: list[tuple[int, int, str]] = []

    def walk(node: Tree, start: int) -> int:
        if node.is_preterminal():
            return start + 1
        chain = [node.label]
        while len(node.children) == 1 and not node.children[0].is_preterminal():
            node = node.children[0]
            chain.append(node.label)
        index = len(spans)
        spans.append((start, start, ""))  # placeholder: end known after the children
        end = start
        for child in node.children:
            end = walk(child, end)
        spans[index] = (start, end, UNARY_JOIN.join(chain))
        return end

    walk(tree, 0)
    return words, tags, spans


def spans_to_tree(words: list[str], tags: list[str], spans) -> Tree:
    """The inverse of `tree_to_spans`: ``spans_to_tree(*tree_to_spans(t)) == t`` for a cleaned tree.

    Words not covered by a labelled span below their nearest enclosing span hang directly under it; without
    a ``(0, L)`` span the tree is rooted in ``TOP``.

    Raises:
        ValueError: words and tags differ in length, a span is out of range, empty, unlabelled, duplicated,
            or crosses another (spans must nest).
    """
    n = len(words)
    if len(tags) != n:
        raise ValueError(f"{n} words but {len(tags)} tags")
    ordered = sorted(spans, key=lambda s: (s[0], -s[1]))
    for k, (i, j, label) in enumerate(ordered):
        if not (0 <= i < j <= n):
            raise ValueError(f"span ({i}, {j}) is outside 0..{n} or empty")
        if not label or any(not part for part in label.split(UNARY_JOIN)):
            raise ValueError(f"span ({i}, {j}) has an empty label {label!r}")
        if k and ordered[k - 1][:2] == (i, j):
            raise ValueError(f"span ({i}, {j}) given twice; join the labels of a unary chain with '::'")
    if not ordered or ordered[0][:2] != (0, n):
        ordered.insert(0, (0, n, TOP))

    def chain(label: str, children: list[Tree]) -> Tree:
        node = None
        for part in reversed(label.split(UNARY_JOIN)):
            node = Tree(part, children if node is None else [node])
        return node

    def leaf(position: int) -> Tree:
        return Tree(tags[position], [], words[position])

    def build(k: int) -> tuple[Tree, int]:
        """The subtree of span ``ordered[k]`` and the index of the first span after it."""
        i, j, label = ordered[k]
        children: list[Tree] = []
        position = i
        k += 1
        while k < len(ordered) and ordered[k][0] < j:  # spans starting inside (i, j) must nest in it
            ci, cj, child_label = ordered[k]
            if cj > j:
                raise ValueError(f"span ({ci}, {cj}, {child_label!r}) crosses span ({i}, {j}, {label!r}); "
                                 "spans must nest")
            children.extend(leaf(p) for p in range(position, ci))  # uncovered words hang here
            child, k = build(k)
            children.append(child)
            position = cj
        children.extend(leaf(p) for p in range(position, j))
        return chain(label, children), k

    return build(0)[0]


# --------------------------------------------------------------------------------------------- escapes
def unescape_word(word: str) -> str:
    """A treebank token as raw text: ``-LRB- -> (``, ``'' -> "``, ``1\\/2 -> 1/2``, ``\\* -> *``."""
    if word in PTB_ESCAPES:
        return PTB_ESCAPES[word]
    return word.replace("\\/", "/").replace("\\*", "*")


def escape_word(word: str) -> str:
    """Raw text as a treebank token: ``( -> -LRB-``, ``1/2 -> 1\\/2``, ``* -> \\*``; ``"`` is left as is."""
    if word in _RAW_TO_PTB:
        return _RAW_TO_PTB[word]
    word = re.sub(r"(?<!\\)/", r"\\/", word)
    word = re.sub(r"(?<!\\)\*", r"\\*", word)
    # brackets inside a token would break the bracket format
    for raw, token in _RAW_TO_PTB.items():
        word = word.replace(raw, token)
    return word
