"""EVALB with COLLINS.prm: labelled bracket recall, precision, F1 and the rest of its summary, in Python.

The rules below follow the C program ``evalb.c`` (Sekine & Collins 1997, with the 2006 update by D. Ellis)
run as ``evalb -p COLLINS.prm GOLD TEST``; each names the part of ``evalb.c`` it reproduces. COLLINS.prm::

    LABELED 1          CUTOFF_LEN 40          MAX_ERROR 10
    DELETE_LABEL TOP   DELETE_LABEL -NONE-    DELETE_LABEL ,   DELETE_LABEL :
    DELETE_LABEL ``    DELETE_LABEL ''        DELETE_LABEL .
    DELETE_LABEL_FOR_LENGTH -NONE-
    EQ_LABEL ADVP PRT

Reading a tree (``read_line``):

1. A preterminal ``(TAG word)`` whose TAG is exactly a DELETE_LABEL (``-NONE- , : `` '' .``) is dropped with
   its word. Each tree is read on its own: the *test* tree's words are deleted by the test tree's own tags, so a
   punctuation word the parser tagged ``NN`` stays in the test sentence (and makes a length mismatch, rule 6).
2. Every other bracket is a constituent spanning the words kept so far, the root included (``(S ...)`` is one
   bracket). Preterminals are never brackets. Each node of a unary chain is its own bracket.
3. Sentence length for the cut-off is the number of gold preterminals whose tag is not
   DELETE_LABEL_FOR_LENGTH, i.e. every word but ``-NONE-`` (punctuation counts) (``len`` in ``read_line``).

Preparing brackets (``massage_data``), for gold and test alike:

4. A bracket spanning no kept word is deleted ("zero element"): a constituent over traces and/or punctuation
   only disappears, and so, recursively, do its parents over nothing else. Brackets are counted on the
   kept words, so where a punctuation mark attaches never matters.
5. The label is cut at its first ``-`` or ``=`` (``modify_label``: ``NP-SBJ-1 -> NP``, ``NP=2 -> NP``); then a
   bracket whose label is a DELETE_LABEL is deleted (``TOP``; the others are preterminal tags in the treebank).
   An unlabelled bracket, the treebank's outer ``( ... )``, counts as ``TOP`` (see *Deviations*).

Sentence status (``calc_result``):

6. A test tree with no kept word is a *skip* sentence (status 2). Otherwise, a different number of kept
   words in gold and test ("Length unmatch (g|t)") or a different word at some position ("Words unmatch
   (g|t)", exact string comparison, no EQ_WORD in COLLINS.prm) makes an *error* sentence (status 1).
   ``fix_quote`` is a no-op here: COLLINS.prm has no QUOTE_LABEL. Error and skip sentences count in
   "Number of sentence" and in their own counts, and contribute nothing else (``individual_result``).

Scoring a valid sentence (``calc_result``, ``individual_result``):

7. Matching: each kept gold bracket takes the first unused kept test bracket with the same start, end and
   label, labels compared with ``label_comp`` (equal, or the EQ_LABEL pair ADVP = PRT). Because that relation
   is an equivalence, this is the size of the multiset intersection: n gold and m test copies of one
   bracket match min(n, m) times (README section 7.5).
8. Complete match: gold brackets = test brackets = matched.
9. Crossing (counted over *test* brackets): a kept test bracket crosses when some kept gold bracket overlaps
   it without nesting (``g.start < t.start < g.end < t.end`` or ``t.start < g.start < t.end < g.end``).
10. Tagging: kept gold and test tags at the same position compared with ``label_comp`` over the kept words
    only (deleted punctuation is not counted).

Totals (``print_total``): recall = 100 * matched / gold brackets, precision = 100 * matched / test brackets
(0 when the denominator is 0), F1 = 2PR / (P + R) from those percentages; complete match, no crossing and
"2 or less crossing" are percentages of *valid* sentences (all - error - skip); average crossing = crossings
/ valid sentences; tagging accuracy = 100 * correct tags / kept words. The ``len<=40`` block applies the same to
the sentences whose gold length (rule 3) is at most 40, error and skip sentences included in its counts.

Deviations from the C program (none matters for the treebank's trees and a parser's output of them):

* An unlabelled bracket is deleted like TOP. The C program would count ``( (S ...) )`` as an extra
  bracket labelled "" (its gold files come from tgrep, which prints that bracket as TOP, README section 5):
  here raw treebank trees can be scored against parser output with or without the outer bracket.
* The C program stops without a summary at the 12th error sentence (``Error``: MAX_ERROR 10); here every
  sentence is scored and `EvalbResult.errors` lists the error sentences
  ([`EvalbResult.evalb_would_abort`][structattn.tasks.evalb.EvalbResult.evalb_would_abort] says when the C program would
  have stopped).
* F1 with P + R = 0 is 0 (the C program prints nan). Sentences are Tree objects in any layout, not one per
  line, and there is no limit of 200 words or brackets per sentence.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

from ..errors import UserError
from ..io import read_input_lines
from .ptb import Tree, parse_trees, read_tree_file

# COLLINS.prm
DELETE_LABELS = frozenset({"TOP", "-NONE-", ",", ":", "``", "''", "."})
DELETE_LABELS_FOR_LENGTH = frozenset({"-NONE-"})
EQ_LABELS = {"PRT": "ADVP"}  # label_comp: each pair compares equal; mapped onto one representative
CUTOFF_LEN = 40
MAX_ERROR = 10


def _modify_label(label: str) -> str:
    """``modify_label``: cut at the first ``-`` or ``=`` (at any position, as the C code does)."""
    for k, ch in enumerate(label):
        if ch in "-=":
            return label[:k]
    return label


def _canonical(label: str) -> str:
    return EQ_LABELS.get(label, label)


@dataclass
class _Read:
    """One tree as ``read_line`` leaves it: kept (word, tag) pairs, brackets (start, end, label), length."""

    terminals: list[tuple[str, str]]
    brackets: list[tuple[int, int, str]]
    length: int


def _read(tree: Tree) -> _Read:
    terminals: list[tuple[str, str]] = []
    brackets: list[tuple[int, int, str]] = []
    length = 0

    def walk(node: Tree) -> None:
        nonlocal length
        if node.is_preterminal():
            if node.label not in DELETE_LABELS_FOR_LENGTH:
                length += 1
            if node.label not in DELETE_LABELS:  # exact comparison, as is_deletelabel
                terminals.append((node.word, node.label))
            return
        index = len(brackets)
        brackets.append((len(terminals), -1, node.label or "TOP"))  # pre-order, like the bracket ids
        for child in node.children:
            walk(child)
        brackets[index] = (brackets[index][0], len(terminals), brackets[index][2])

    walk(tree)
    return _Read(terminals, brackets, length)


def _kept_brackets(brackets: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """``massage_data``: drop zero-element brackets and DELETE_LABELs; labels cut and made canonical."""
    kept = []
    for start, end, label in brackets:
        if start == end:
            continue
        label = _modify_label(label)
        if label in DELETE_LABELS:
            continue
        kept.append((start, end, _canonical(label)))
    return kept


class _BracketScores:
    """Recall and precision (percent, 0 for an empty denominator) of ``matched`` over ``gold_brackets`` and
    ``test_brackets``: a sentence's, or one label's (`LabelScore`)."""

    matched: int
    gold_brackets: int
    test_brackets: int

    @property
    def recall(self) -> float:
        return 100.0 * self.matched / self.gold_brackets if self.gold_brackets else 0.0

    @property
    def precision(self) -> float:
        return 100.0 * self.matched / self.test_brackets if self.test_brackets else 0.0


@dataclass
class EvalbSentence(_BracketScores):
    """One sentence's line of the EVALB table. ``status``: 0 valid, 1 error, 2 skip."""

    id: int                      # 1-based position in the files
    length: int                  # gold words without -NONE- (punctuation included), for the cut-off
    status: int
    gold_brackets: int = 0
    test_brackets: int = 0
    matched: int = 0
    crossing: int = 0
    words: int = 0               # kept words (tags scored)
    correct_tags: int = 0
    error: str | None = None     # "Length unmatch (g|t)" / "Words unmatch (g|t)" / "no words in the test tree"
    # label -> (gold, test, matched) brackets of that label (canonical: PRT counts as ADVP); valid sentences only
    by_label: dict[str, tuple[int, int, int]] = field(default_factory=dict, repr=False)

    def table_line(self) -> str:
        """The sentence's line in EVALB's per-sentence table (``individual_result``)."""
        tag_acc = 100.0 * self.correct_tags / self.words if self.words else 0.0
        return (f"{self.id:4d}  {self.length:3d}    {self.status:d}  {self.recall:6.2f} {self.precision:6.2f}   "
                f"{self.matched:3d}    {self.gold_brackets:3d}  {self.test_brackets:3d}    {self.crossing:3d}"
                f"   {self.words:4d}  {self.correct_tags:4d}   {tag_acc:6.2f}")


def evalb_sentence(gold: Tree, test: Tree, id: int = 1) -> EvalbSentence:
    """Score one sentence (``calc_result``)."""
    g, t = _read(gold), _read(test)
    if not t.terminals:
        return EvalbSentence(id, g.length, 2, error="no words in the test tree (skip sentence)")
    if len(g.terminals) != len(t.terminals):
        return EvalbSentence(id, g.length, 1, error=f"Length unmatch ({len(g.terminals)}|{len(t.terminals)})")
    for (gw, _), (tw, _) in zip(g.terminals, t.terminals):
        if gw != tw:
            return EvalbSentence(id, g.length, 1, error=f"Words unmatch ({gw}|{tw})")
    gold_b, test_b = _kept_brackets(g.brackets), _kept_brackets(t.brackets)
    common = Counter(gold_b) & Counter(test_b)
    matched = sum(common.values())
    crossing = sum(
        any((gs < ts < ge < te) or (ts < gs < te < ge) for gs, ge, _ in gold_b)
        for ts, te, _ in test_b)
    correct = sum(_canonical(gt) == _canonical(tt) for (_, gt), (_, tt) in zip(g.terminals, t.terminals))
    return EvalbSentence(id, g.length, 0, len(gold_b), len(test_b), matched, crossing, len(g.terminals), correct,
                         by_label=_label_counts(gold_b, test_b, common))


def _label_counts(gold_b, test_b, common: Counter) -> dict[str, tuple[int, int, int]]:
    """label -> (gold brackets, test brackets, matched brackets) of one sentence; ``common`` is rule 7's matching
    (the multiset intersection), so the matched counts sum to the sentence's ``matched``."""
    gold = Counter(label for _, _, label in gold_b)
    test = Counter(label for _, _, label in test_b)
    hits = Counter()
    for (_, _, label), n in common.items():
        hits[label] += n
    return {label: (gold[label], test[label], hits[label]) for label in sorted(gold | test)}


@dataclass(frozen=True)
class LabelScore(_BracketScores):
    """Labelled bracketing scores of the brackets of one label (or a group of labels) over the valid sentences:
    recall over that label's gold brackets, precision over the parser's brackets with that label."""

    label: str
    gold_brackets: int
    test_brackets: int
    matched: int

    @property
    def f1(self) -> float:
        r, p = self.recall, self.precision
        return 2 * p * r / (p + r) if p + r > 0 else 0.0

    def to_dict(self) -> dict:
        """JSON-ready, percentages rounded to 2 decimals as EVALB prints them."""
        return {"label": self.label, "recall": float(f"{self.recall:.2f}"),
                "precision": float(f"{self.precision:.2f}"), "f1": float(f"{self.f1:.2f}"),
                "gold_brackets": self.gold_brackets, "test_brackets": self.test_brackets, "matched": self.matched}


@dataclass
class EvalbResult:
    """EVALB's summary block (percentages unrounded; [`to_dict`][structattn.tasks.evalb.EvalbResult.to_dict] rounds them
    as EVALB prints them)."""

    recall: float
    precision: float
    f1: float
    complete_match: float
    average_crossing: float
    no_crossing: float
    two_or_less_crossing: float
    tagging_accuracy: float
    sentences: int
    error_sentences: int
    skipped_sentences: int
    valid_sentences: int
    matched: int
    gold_brackets: int
    test_brackets: int
    complete_sentences: int
    crossing: int
    words: int
    correct_tags: int
    le40: "EvalbResult | None" = None
    cutoff: int = CUTOFF_LEN
    errors: list[tuple[int, str]] = field(default_factory=list)   # (sentence id, message), error and skip
    per_sentence: list[EvalbSentence] = field(default_factory=list, repr=False)

    @property
    def evalb_would_abort(self) -> bool:
        """The C program exits without a summary at its (MAX_ERROR + 2)th error sentence."""
        return self.error_sentences > MAX_ERROR + 1

    def label_scores(self, groups: dict[str, Sequence[str]] | None = None) -> list[LabelScore]:
        """Scores per label over the valid sentences, most frequent gold label first; ``groups`` (name -> labels,
        e.g. ``{"SBARQ/SQ": ("SBARQ", "SQ")}``) gives the listed groups instead, in their order, each summing its
        labels' counts. Labels are canonical (``PRT`` is scored as ``ADVP``); the matched counts of all labels sum
        to `matched`."""
        totals: dict[str, list[int]] = {}
        for sentence in self.per_sentence:
            for label, counts in sentence.by_label.items():
                row = totals.setdefault(label, [0, 0, 0])
                for k, n in enumerate(counts):
                    row[k] += n
        if groups is None:
            order = sorted(totals, key=lambda label: (-totals[label][0], label))
            return [LabelScore(label, *totals[label]) for label in order]
        return [LabelScore(name, *(sum(totals.get(_canonical(label), [0, 0, 0])[k] for label in labels)
                                   for k in range(3)))
                for name, labels in groups.items()]

    def to_dict(self) -> dict:
        """JSON-ready: percentages rounded to 2 decimals like EVALB's ``%6.2f``, the counts, and ``le40``."""
        out = {k: v for k, v in asdict(self).items() if k not in ("le40", "errors", "per_sentence")}
        for key in ("recall", "precision", "f1", "complete_match", "average_crossing", "no_crossing",
                    "two_or_less_crossing", "tagging_accuracy"):
            out[key] = float(f"{out[key]:.2f}")
        out["errors"] = [{"sentence": i, "error": e} for i, e in self.errors]
        if self.le40 is not None:
            out["le40"] = self.le40.to_dict()  # the sentences of length <= cutoff (40 unless changed)
        return out

    def summary(self) -> str:
        """EVALB's ``=== Summary ===`` text: ``-- All --`` and the ``-- len<=40 --`` block."""
        lines = ["=== Summary ===", "", "-- All --", *self._block()]
        if self.le40 is not None:
            lines += ["", f"-- len<={self.cutoff} --", *self.le40._block()]
        return "\n".join(lines)

    def _block(self) -> list[str]:
        return [f"Number of sentence        = {self.sentences:6d}",
                f"Number of Error sentence  = {self.error_sentences:6d}",
                f"Number of Skip  sentence  = {self.skipped_sentences:6d}",
                f"Number of Valid sentence  = {self.valid_sentences:6d}",
                f"Bracketing Recall         = {self.recall:6.2f}",
                f"Bracketing Precision      = {self.precision:6.2f}",
                f"Bracketing FMeasure       = {self.f1:6.2f}",
                f"Complete match            = {self.complete_match:6.2f}",
                f"Average crossing          = {self.average_crossing:6.2f}",
                f"No crossing               = {self.no_crossing:6.2f}",
                f"2 or less crossing        = {self.two_or_less_crossing:6.2f}",
                f"Tagging accuracy          = {self.tagging_accuracy:6.2f}"]


def _total(sentences: Sequence[EvalbSentence], cutoff: int) -> EvalbResult:
    """``print_total`` over the given sentences."""
    valid = [s for s in sentences if s.status == 0]
    errors = sum(s.status == 1 for s in sentences)
    skips = sum(s.status == 2 for s in sentences)
    gold = sum(s.gold_brackets for s in valid)
    test = sum(s.test_brackets for s in valid)
    matched = sum(s.matched for s in valid)
    crossing = sum(s.crossing for s in valid)
    words = sum(s.words for s in valid)
    tags = sum(s.correct_tags for s in valid)
    complete = sum(s.gold_brackets == s.test_brackets == s.matched for s in valid)
    n = len(valid)
    r = 100.0 * matched / gold if gold > 0 else 0.0
    p = 100.0 * matched / test if test > 0 else 0.0
    f = 2 * p * r / (p + r) if p + r > 0 else 0.0
    return EvalbResult(
        recall=r, precision=p, f1=f,
        complete_match=100.0 * complete / n if n else 0.0,
        average_crossing=1.0 * crossing / n if n else 0.0,
        no_crossing=100.0 * sum(s.crossing == 0 for s in valid) / n if n else 0.0,
        two_or_less_crossing=100.0 * sum(s.crossing <= 2 for s in valid) / n if n else 0.0,
        tagging_accuracy=100.0 * tags / words if words else 0.0,
        sentences=len(sentences), error_sentences=errors, skipped_sentences=skips, valid_sentences=n,
        matched=matched, gold_brackets=gold, test_brackets=test, complete_sentences=complete,
        crossing=crossing, words=words, correct_tags=tags, cutoff=cutoff,
        errors=[(s.id, s.error) for s in sentences if s.status != 0],
        per_sentence=list(sentences))


def evalb(gold: Sequence[Tree], test: Sequence[Tree], cutoff: int = CUTOFF_LEN) -> EvalbResult:
    """Score ``test`` trees against ``gold`` trees, pair by pair, as ``evalb -p COLLINS.prm`` does.

    Trees may be raw (as found in the treebank: traces, function tags, outer bracket) or cleaned.

    Raises:
        UserError: the two lists differ in length.
    """
    if len(gold) != len(test):
        raise UserError(f"{len(gold)} gold trees but {len(test)} test trees; the two must pair up one to one")
    sentences = [evalb_sentence(g, t, k + 1) for k, (g, t) in enumerate(zip(gold, test))]
    result = _total(sentences, cutoff)
    result.le40 = _total([s for s in sentences if s.length <= cutoff], cutoff)
    return result


def evalb_files(gold_paths: Sequence[Path] | Path, test_path: Path | str, cutoff: int = CUTOFF_LEN) -> EvalbResult:
    """Score the trees of ``test_path`` against those of ``gold_paths`` read in the given order, one after another.

    ``test_path`` ``"-"`` reads the test trees from standard input (named ``<stdin>`` in messages, with the
    UTF-8 rules of `structattn.io.read_input_lines`).

    Raises:
        UserError: a malformed file (TreebankError naming file and line), no tree on standard input, or
            different tree counts (naming both counts and both files).
    """
    if isinstance(gold_paths, (str, Path)):
        gold_paths = [gold_paths]
    gold_paths = [Path(p) for p in gold_paths]
    if not gold_paths:
        raise UserError("no gold file given")
    gold = [tree for path in gold_paths for tree in read_tree_file(path)]
    if str(test_path) == "-":
        test_path, lines = read_input_lines("-")
        test = parse_trees("\n".join(lines), source=test_path)
        if not test:
            raise UserError(f"{test_path}: no bracketed tree on standard input; pipe in the predicted trees, one "
                            "per gold tree, e.g. `structattn parse ... | structattn score evalb --gold GOLD --predictions -`")
    else:
        test = read_tree_file(test_path)
    if len(gold) != len(test):
        where = (str(gold_paths[0]) if len(gold_paths) == 1
                 else f"{len(gold_paths)} files {gold_paths[0]} .. {gold_paths[-1]}")
        raise UserError(f"{len(gold)} gold trees in {where} but {len(test)} trees in {test_path}; the test file must "
                        "hold one tree per gold tree, in the same order")
    return evalb(gold, test, cutoff)
