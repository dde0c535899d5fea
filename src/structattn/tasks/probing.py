"""Probing tasks built from gold UD English EWT trees (the SentEval files of Conneau et al. 2018 are not available
here): what a frozen sentence encoder's mean vector tells a classifier about a sentence.

Each task maps a sentence (its surface text, rebuilt from the UD tokens with their ``SpaceAfter=No`` marks) to a
label. Train/dev/test are EWT's own splits; only sentences of 5-30 words (punctuation included) are used, as in
Conneau et al.; every filter is counted (`ProbingTask.dropped`). Tasks and their construction:

Surface
* ``SeLn`` — sentence length in words, 6 bins: 5-8, 9-12, 13-16, 17-20, 21-25, 26-30.
* ``WC`` — word content: the label is the one "probe word" the sentence contains. Probe words (the classes):
  the 30 lower-cased alphabetic word forms ranked 100-129 by the number of training sentences holding them
  (mid-frequency, as SentEval's; SentEval has 1,000, EWT is 100 times smaller); a sentence holding exactly one
  of them is kept.
Syntax
* ``TrDep`` — depth of the dependency tree (edges from the root to the deepest word, the root at depth 1),
  classes 3, 4, ..., 7 and "8+" (SentEval uses constituency depth, 5-12).
* ``ToCo`` — an approximation of top constituents from the dependency tree: the sequence of the root's
  dependents' relations around ``ROOT`` in word order (``nsubj ROOT obj punct``); the 20 most frequent training
  sequences are the classes, other sentences are dropped.
* ``BShif`` — bigram shift: in half of the sentences (seeded), two adjacent words (neither punctuation) are
  swapped; label ``I`` (inverted) or ``O`` (original).
Semantics
* ``Tense`` — tense of the main clause: the ``Tense`` feature of the root, or else of an ``aux``/``cop``
  dependent of the root that has one (``Past``/``Pres``); sentences without one are dropped.
* ``SubjNum`` / ``ObjNum`` — ``Number`` (``Sing``/``Plur``) of the root's ``nsubj``/``nsubj:pass`` / ``obj``;
  sentences without such a dependent with a Number are dropped.
* ``CoIn`` — coordination inversion: sentences whose root has a ``conj`` clause (a dependent with its own
  ``nsubj``) introduced by a ``cc`` word and with the first clause ending right before it; in half of them
  (seeded) the two clauses are swapped around the ``cc`` word; label ``I``/``O``.
* ``SoMo`` (semantic odd man out) is left out: replacing a word by a plausible one of the same POS needs a
  language model that these machines do not have.
"""
from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UserError
from ..settings import data_dir

TASKS = ("SeLn", "WC", "TrDep", "ToCo", "BShif", "Tense", "SubjNum", "ObjNum", "CoIn")
GROUPS = {"Surf.": ("SeLn", "WC"), "Sync.": ("TrDep", "ToCo", "BShif"),
          "Semc.": ("Tense", "SubjNum", "ObjNum", "CoIn")}
SPLIT_FILES = {"train": "en_ewt-ud-train.conllu", "dev": "en_ewt-ud-dev.conllu", "test": "en_ewt-ud-test.conllu"}
MIN_WORDS, MAX_WORDS = 5, 30
LENGTH_BINS = ((5, 8), (9, 12), (13, 16), (17, 20), (21, 25), (26, 30))


@dataclass
class Sentence:
    """One UD sentence: words, heads (1-based, 0 = root), relations, UPOS, FEATS dicts, spaces after words."""

    words: list[str]
    heads: list[int]
    deprels: list[str]
    upos: list[str]
    feats: list[dict]
    space_after: list[bool]

    def text(self, words: list[str] | None = None) -> str:
        """Surface text from (possibly reordered) words with this sentence's spacing."""
        words = self.words if words is None else words
        return "".join(w + (" " if sp else "") for w, sp in zip(words, self.space_after)).strip()

    @property
    def root(self) -> int:
        return self.heads.index(0)

    def dependents(self, i: int) -> list[int]:
        return [j for j, h in enumerate(self.heads) if h == i + 1]


@dataclass
class ProbingTask:
    """Texts and labels per split, the classes, and what the filters dropped."""

    name: str
    texts: dict = field(default_factory=dict)  # split -> list[str]
    labels: dict = field(default_factory=dict)  # split -> list[str]
    classes: list = field(default_factory=list)
    dropped: dict = field(default_factory=dict)  # split -> {reason: count}


def read_ud(split: str, root: str | Path | None = None) -> list[Sentence]:
    """The UD English EWT sentences of ``split`` (multi-word token lines and empty nodes skipped)."""
    import conllu

    if split not in SPLIT_FILES:
        raise UserError(f"unknown UD split {split!r}; valid: {', '.join(SPLIT_FILES)}")
    path = (Path(root) if root is not None else data_dir()) / "ud_english_ewt" / SPLIT_FILES[split]
    if not path.is_file():
        raise UserError(f"{path}: UD English EWT file not found (the probing tasks are built from it)")
    from ..textcheck import check_text

    out = []
    check_text(path.read_text(encoding="utf-8"), str(path))
    with open(path, encoding="utf-8") as fh:
        for sent in conllu.parse_incr(fh):
            toks = [t for t in sent if isinstance(t["id"], int)]
            out.append(Sentence([t["form"] for t in toks], [int(t["head"]) for t in toks],
                                [t["deprel"] for t in toks], [t["upos"] for t in toks],
                                [dict(t["feats"] or {}) for t in toks],
                                [not (t["misc"] or {}).get("SpaceAfter") == "No" for t in toks]))
    return out


# ---------------------------------------------------------------------------------------------- labels


def length_label(s: Sentence) -> str | None:
    n = len(s.words)
    for lo, hi in LENGTH_BINS:
        if lo <= n <= hi:
            return f"{lo}-{hi}"
    return None


def tree_depth(heads: list[int]) -> int:
    """Edges from the root to the deepest word, plus one (a one-word tree has depth 1)."""
    depth = {}

    def walk(i: int) -> int:
        if i not in depth:
            depth[i] = 1 if heads[i] == 0 else walk(heads[i] - 1) + 1
        return depth[i]

    return max(walk(i) for i in range(len(heads)))


def depth_label(s: Sentence) -> str | None:
    d = tree_depth(s.heads)
    return None if d < 3 else ("8+" if d >= 8 else str(d))


def top_sequence(s: Sentence) -> str:
    r = s.root
    items = sorted([(j, s.deprels[j].split(":")[0]) for j in s.dependents(r)] + [(r, "ROOT")])
    return " ".join(label for _, label in items)


def tense_label(s: Sentence) -> str | None:
    r = s.root
    for i in [r] + [j for j in s.dependents(r) if s.deprels[j] in ("aux", "aux:pass", "cop")]:
        tense = s.feats[i].get("Tense")
        if tense in ("Past", "Pres"):
            return tense
    return None


def number_label(s: Sentence, relations: tuple[str, ...]) -> str | None:
    for j in s.dependents(s.root):
        if s.deprels[j] in relations and s.feats[j].get("Number") in ("Sing", "Plur"):
            return s.feats[j]["Number"]
    return None


def bigram_shift(s: Sentence, rng: random.Random) -> str | None:
    """The text with two adjacent non-punctuation words swapped (None when no such pair exists)."""
    pairs = [i for i in range(len(s.words) - 1) if s.upos[i] != "PUNCT" and s.upos[i + 1] != "PUNCT"
             and s.words[i].lower() != s.words[i + 1].lower()]
    if not pairs:
        return None
    i = rng.choice(pairs)
    words = list(s.words)
    words[i], words[i + 1] = words[i + 1], words[i]
    return s.text(words)


def coordination_split(s: Sentence) -> tuple[int, int] | None:
    """(index of the cc word, index of the last word of the second clause) for a root with a coordinated clause
    whose first clause ends right before the cc word; None otherwise."""
    r = s.root
    for c in s.dependents(r):
        if s.deprels[c] != "conj" or not any(s.deprels[k].startswith("nsubj") for k in s.dependents(c)):
            continue
        ccs = [k for k in s.dependents(c) if s.deprels[k] == "cc"]
        if not ccs or ccs[0] <= r:
            continue
        cc = ccs[0]
        end = len(s.words) - 1
        while end > cc and s.upos[end] == "PUNCT":
            end -= 1
        first = cc - 1
        while first > 0 and s.upos[first] == "PUNCT":
            first -= 1
        if first >= 1 and end > cc + 1:
            return cc, end
    return None


def invert_coordination(s: Sentence, cc: int, end: int) -> str:
    """Clause 2 + connector (the cc word and any punctuation before it) + clause 1 (+ the trailing
    punctuation). Spacing travels with the words, and the sentence-
    initial capital moves with the position (a proper noun or "I" keeps its case), so neither gives the answer."""
    first_end = cc
    while first_end > 0 and s.upos[first_end - 1] == "PUNCT":
        first_end -= 1
    clause1 = [[s.words[i], s.space_after[i]] for i in range(first_end)]
    clause2 = [[s.words[i], s.space_after[i]] for i in range(cc + 1, end + 1)]
    tail = [[s.words[i], s.space_after[i]] for i in range(end + 1, len(s.words))]
    connector = [[s.words[i], s.space_after[i]] for i in range(first_end, cc + 1)]  # [","] "and"
    clause2[-1][1] = s.space_after[first_end - 1]  # as clause 1 met the connector
    connector[-1][1] = True
    clause1[-1][1] = not tail
    if s.upos[0] != "PROPN" and clause1[0][0] != "I":
        clause1[0][0] = clause1[0][0][:1].lower() + clause1[0][0][1:]
    if s.upos[cc + 1] != "PROPN":
        clause2[0][0] = clause2[0][0][:1].upper() + clause2[0][0][1:]
    items = clause2 + connector + clause1 + tail
    return "".join(w + (" " if sp else "") for w, sp in items).strip()


# ---------------------------------------------------------------------------------------------- building


def _probe_words(train: list[Sentence]) -> list[str]:
    """The WC classes: the 30 lower-cased alphabetic forms ranked 100-129 by training sentence frequency."""
    counts = Counter()
    for s in train:
        counts.update({w.lower() for w in s.words if w.isalpha()})
    ranked = sorted(counts, key=lambda w: (-counts[w], w))
    return sorted(ranked[100:130])


def _word_label(s: Sentence, candidates: set[str]) -> str | None:
    present = {w.lower() for w in s.words if w.lower() in candidates}
    return next(iter(present)) if len(present) == 1 else None


def build_task(name: str, splits: dict[str, list[Sentence]], seed: int = 0) -> ProbingTask:
    """One probing task over ``splits`` (``train``, ``dev``, ``test`` sentences); see the module doc."""
    if name not in TASKS:
        raise UserError(f"unknown probing task {name!r}; valid: {', '.join(TASKS)}")
    task = ProbingTask(name)
    rng = random.Random(f"{name}-{seed}")
    classes: list[str] | None = _probe_words(splits["train"]) if name == "WC" else None
    candidates = set(classes or ())
    if name == "ToCo":
        counts = Counter(top_sequence(s) for s in splits["train"] if MIN_WORDS <= len(s.words) <= MAX_WORDS)
        classes = sorted(seq for seq, _ in counts.most_common(20))
    for split in ("train", "dev", "test"):
        texts, labels, dropped = [], [], Counter()
        for s in splits[split]:
            if not MIN_WORDS <= len(s.words) <= MAX_WORDS:
                dropped["length outside 5-30 words"] += 1
                continue
            text, label = s.text(), None
            if name == "SeLn":
                label = length_label(s)
            elif name == "WC":
                label = _word_label(s, candidates)
            elif name == "TrDep":
                label = depth_label(s)
            elif name == "ToCo":
                label = top_sequence(s)
                label = label if label in classes else None
            elif name == "Tense":
                label = tense_label(s)
            elif name == "SubjNum":
                label = number_label(s, ("nsubj", "nsubj:pass"))
            elif name == "ObjNum":
                label = number_label(s, ("obj",))
            elif name == "BShif":
                shifted = bigram_shift(s, rng)
                if shifted is not None:
                    label = "I" if rng.random() < 0.5 else "O"
                    text = shifted if label == "I" else text
            elif name == "CoIn":
                split_at = coordination_split(s)
                if split_at is not None:
                    label = "I" if rng.random() < 0.5 else "O"
                    text = invert_coordination(s, *split_at) if label == "I" else text
            if label is None:
                dropped["no label"] += 1
                continue
            texts.append(text)
            labels.append(label)
        task.texts[split], task.labels[split], task.dropped[split] = texts, labels, dict(dropped)
    task.classes = classes or sorted(set(task.labels["train"]))
    return task
