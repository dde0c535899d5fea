"""The BNA constituency parser a user loads: raw text (or words) in, trees out; the one route of every front end.

    parser = structattn.Parser.from_pretrained("bna-scratch")      # a shipped name or a saved parser folder
    parser("The cat sat on the mat. It purred.")                    # -> [Tree, Tree]: one per sentence
    parser(["One text.", "Another text."])                          # -> [[Tree], [Tree]]
    parser(["The", "cat", "sat", "."], is_split_into_words=True)    # -> Tree
    parser.evaluate(gold_trees)                                     # EVALB (COLLINS.prm) of the parses of their words

The network ([`ChartParser`][structattn.bna.model.ChartParser]) and the spaCy pipeline that splits raw text into
sentences of treebank tokens and tags them are loaded once per object. ``structattn parse`` and the spaCy component
(``nlp.add_pipe("structattn_parser")``) parse through
[`Parser.parse_sentences`][structattn.bna.parser.Parser.parse_sentences] too, so the three give the same trees for the
same sentences and tags.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import torch

from ..errors import UserError
from ..settings import DEFAULT_SPACY_MODEL
from ..tasks.ptb import Tree
from ..verbosity import quiet_loading


class Parser:
    """A trained chart parser with its text splitting.

    Args:
        model: the network.
        spacy_model: the spaCy pipeline that splits raw text into sentences and tags words (an installed name or
            a folder).
        batch_size: sentences per forward pass (sorted by length: less padding).
    """

    def __init__(self, model, spacy_model: str | None = None, batch_size: int = 32):
        if batch_size < 1:
            raise UserError(f"batch_size={batch_size} must be positive")
        self.model = model
        self.spacy_model = spacy_model or DEFAULT_SPACY_MODEL
        self.batch_size = batch_size

    @classmethod
    @quiet_loading()
    def from_pretrained(cls, name_or_folder: str | Path, device: str | torch.device = "cpu",
                        spacy_model: str | None = None, batch_size: int = 32) -> "Parser":
        """Load a shipped parser by name (``structattn models`` lists them) or a folder written by
        ``ChartParser.save_pretrained`` (a ``structattn train-parsing`` run's ``best/``)."""
        from .model import ChartParser

        return cls(ChartParser.from_pretrained(name_or_folder, device=device), spacy_model, batch_size)

    @property
    def reads_tags(self) -> bool:
        """Whether the network reads POS tags (``pos`` spacy or gold): raw text is then tagged by spaCy."""
        return self.model.config.pos != "none"

    # ------------------------------------------------------------------ text -> sentences
    def split(self, texts: Sequence[str]) -> list[list[tuple[list[str], list[str]]]]:
        """Per text its sentences as (treebank tokens, spaCy's PTB tags): the pipeline's sentence split."""
        from .ptb_text import text_sentences

        return text_sentences(texts, self.spacy_model)

    def tag(self, words: Sequence[Sequence[str]]) -> list[list[str]]:
        """spaCy's PTB tags of pre-split sentences (one per word)."""
        from .ptb_text import spacy_tags

        return spacy_tags(words, self.spacy_model) if words else []

    # ------------------------------------------------------------------ parsing
    def parse_sentences(self, words: Sequence[Sequence[str]], tags: Sequence[Sequence[str]] | None = None,
                        names: Sequence[str] | None = None,
                        output_tags: Sequence[Sequence[str]] | None = None) -> list[Tree]:
        """Sentences of treebank tokens -> one tree each, in order; ``tags`` (one per word) are the trees'
        preterminals (unless ``output_tags`` are given) and, for a network that reads tags, its input;
        ``names[k]`` names sentence k in errors."""
        if not words:
            return []
        return self.model.parse(words, tags, batch_size=self.batch_size, names=names, output_tags=output_tags)

    def __call__(self, text: str | Sequence[str] | Sequence[Sequence[str]], *, is_split_into_words: bool = False,
                 tags: Sequence[Sequence[str]] | None = None):
        """Parse raw text or pre-split sentences.

        Args:
            text: a string (-> its sentences' trees), a list of strings (-> per string its sentences' trees), or
                with ``is_split_into_words=True`` one sentence's words (-> a tree) or a list of them (-> trees).
            tags: with ``is_split_into_words``, PTB tags per word (else spaCy's, when the network reads tags).
        """
        if is_split_into_words:
            single = bool(text) and all(isinstance(w, str) for w in text)
            sentences = [list(text)] if single else [list(s) for s in text]
            if tags is not None and single:
                tags = [list(tags)]
            if tags is None and self.reads_tags:
                tags = self.tag(sentences)
            trees = self.parse_sentences(sentences, tags)
            return trees[0] if single else trees
        if isinstance(text, str):
            return self([text])[0]
        if not all(isinstance(t, str) for t in text):
            raise UserError("give a string or a list of strings (or pass is_split_into_words=True for words)")
        split = self.split(text)
        flat = [sentence for sentences in split for sentence in sentences]
        trees = iter(self.parse_sentences([w for w, _ in flat], [t for _, t in flat]))
        return [[next(trees) for _ in sentences] for sentences in split]

    def evaluate(self, gold: Sequence[Tree], tags: str = "gold"):
        """EVALB (COLLINS.prm, `structattn.tasks.evalb.evalb`) of this parser on ``gold`` trees: their words
        are parsed (``tags="gold"``: the network reads and outputs the gold tags; ``"spacy"``: spaCy's)."""
        from ..tasks.evalb import evalb
        from ..tasks.ptb import tree_to_spans

        if tags not in ("gold", "spacy"):
            raise UserError(f"tags={tags!r}: choose 'gold' or 'spacy'")
        words, gold_tags = zip(*[tree_to_spans(tree)[:2] for tree in gold]) if gold else ((), ())
        use = [list(t) for t in gold_tags] if tags == "gold" else self.tag(words)
        return evalb(gold, self.parse_sentences(list(words), use, output_tags=gold_tags))
