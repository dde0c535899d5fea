"""The parse record shared by every backend, and the checks of what a backend is given to parse.

A [`Parse`][structattn.dependency.record.Parse] is one sentence: its words and a dependency tree over them.
Heads are 1-based with 0 for the root (CoNLL-U convention). A passage is a
``list[Parse]``.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import UserError


class ParseError(UserError, ValueError):
    """A sentence whose tree or words cannot be used; the message names the sentence."""


@dataclass(frozen=True)
class Parse:
    """One parsed sentence.

    Attributes:
        words: the surface words, in order (n of them).
        heads: n ints, ``heads[i]`` is the 1-based index of word i's head, 0 for the root.
        deprels: n dependency labels.
        upos: n universal POS tags ("" where the backend has none).
        sent_id: an identifier used in error messages and JSON output.
    """

    words: tuple[str, ...]
    heads: tuple[int, ...]
    deprels: tuple[str, ...]
    upos: tuple[str, ...]
    sent_id: str = ""
    meta: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    def __post_init__(self):
        for name in ("words", "heads", "deprels", "upos"):
            value = getattr(self, name)
            if not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))

    def __len__(self) -> int:
        return len(self.words)

    def validate(self) -> "Parse":
        """Check that the record is a single rooted tree; raise [`ParseError`][structattn.dependency.record.ParseError]
        naming the problem."""
        validate_tree(self.words, self.heads, self.sent_id,
                      deprels=self.deprels, upos=self.upos)
        return self

    def to_dict(self) -> dict:
        """JSON-ready: ``sent_id``, ``words``, ``heads``, ``deprels``, ``upos`` (what `from_dict` reads)."""
        return {"sent_id": self.sent_id, "words": list(self.words), "heads": list(self.heads),
                "deprels": list(self.deprels), "upos": list(self.upos)}

    @classmethod
    def chain(cls, words, sent_id: str = "") -> "Parse":
        """A placeholder tree over ``words`` (each word's head is the one before it) for the relations that
        read no heads (``window``, ``forward``, ``backward``, ``all``): a valid record without a parser."""
        n = len(words)
        return cls(words=words, heads=[0] + list(range(1, n)), deprels=["dep"] * n, upos=[""] * n, sent_id=sent_id)

    @classmethod
    def from_dict(cls, d: dict) -> "Parse":
        """The Parse that ``to_dict`` wrote."""
        return cls(words=d["words"], heads=d["heads"], deprels=d["deprels"],
                   upos=d["upos"], sent_id=d.get("sent_id", ""))


def validate_tree(words, heads, sent_id="", deprels=None, upos=None) -> None:
    """Raise [`ParseError`][structattn.dependency.record.ParseError] unless ``heads`` encodes one tree over ``words``.

    Checks: at least one word, no empty word, equal lengths, heads in 0..n,
    exactly one root, no self-loop and no cycle.
    """
    where = f"sentence {sent_id!r}" if sent_id != "" else "sentence"
    n = len(words)
    if n == 0:
        raise ParseError(f"{where}: has no words")
    for i, w in enumerate(words):
        if not isinstance(w, str) or w == "" or w.isspace():
            raise ParseError(f"{where}: word {i + 1} is empty or whitespace ({w!r})")
    if len(heads) != n:
        raise ParseError(f"{where}: {n} words but {len(heads)} heads")
    for name, seq in (("deprels", deprels), ("upos", upos)):
        if seq is not None and len(seq) != n:
            raise ParseError(f"{where}: {n} words but {len(seq)} {name}")
    roots = []
    for i, h in enumerate(heads):
        if not isinstance(h, int) or isinstance(h, bool):
            raise ParseError(f"{where}: head of word {i + 1} ({words[i]!r}) is not an integer: {h!r}")
        if h < 0 or h > n:
            raise ParseError(f"{where}: head {h} of word {i + 1} ({words[i]!r}) is out of range 0..{n}")
        if h == i + 1:
            raise ParseError(f"{where}: word {i + 1} ({words[i]!r}) is its own head")
        if h == 0:
            roots.append(i + 1)
    if len(roots) != 1:
        listed = ", ".join(str(r) for r in roots) if roots else "none"
        raise ParseError(f"{where}: needs exactly one root (head 0), found {len(roots)}: words {listed}")
    # Cycle check: follow heads from every word; a walk longer than n steps is a cycle.
    state = [0] * (n + 1)  # 0 unseen, 1 on current path, 2 known to reach the root
    state[0] = 2
    for start in range(1, n + 1):
        path = []
        node = start
        while state[node] == 0:
            state[node] = 1
            path.append(node)
            node = heads[node - 1]
        if state[node] == 1:
            cycle = path[path.index(node):]
            raise ParseError(f"{where}: the heads form a cycle through words {cycle}")
        for p in path:
            state[p] = 2


def check_word_lists(word_lists: Sequence[Sequence[str]]) -> None:
    """Raise [`ParseError`][structattn.dependency.record.ParseError] naming the first empty list or
    empty/whitespace/non-string word."""
    for i, words in enumerate(word_lists):
        try:  # fast path, C-level loops; a non-string word makes str.isspace raise TypeError
            if words and not isinstance(words, str) and "" not in words and not any(map(str.isspace, words)):
                continue
        except TypeError:
            pass
        if isinstance(words, str):
            raise ParseError(f"item {i}: expected a list of words, got a string {words[:40]!r}")
        if len(words) == 0:
            raise ParseError(f"item {i}: the word list is empty")
        for j, w in enumerate(words):
            if not isinstance(w, str) or w == "" or w.isspace():
                raise ParseError(f"item {i}: word {j + 1} is empty, whitespace or not a string ({w!r})")


def check_texts(texts: Sequence[str]) -> None:
    """Raise [`ParseError`][structattn.dependency.record.ParseError] naming the first text that is not a string or is
    empty/whitespace."""
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise ParseError(f"item {i}: expected a string, got {type(text).__name__}")
        if text == "" or text.isspace():
            raise ParseError(f"item {i}: the text is empty or whitespace only")
