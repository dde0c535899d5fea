"""A spaCy pipeline component that adds constituency parses, the way benepar users parse::

    import spacy
    import structattn.bna.spacy_component  # noqa: F401  (or installed: the ``spacy_factories`` entry point)
    nlp = spacy.load("en_core_web_sm")
    nlp.add_pipe("structattn_parser", config={"model": "bna-minilm"})  # a shipped parser's name, or a folder
    doc = nlp("The cat sat. It purred.")
    [sent._.parse_string for sent in doc.sents]   # "(S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .))", ...
    doc._.parse_strings                              # the same list, in sentence order

Sentences are the doc's own (``doc.sents``: put the component after the parser or a senter); a doc without
sentence boundaries is parsed as one sentence. Tokens are written in treebank form as ``structattn parse``
writes them (`structattn.bna.ptb_text.treebank_words`: ``(`` -> ``-LRB-``, a straight ``"`` -> ``````
or ``''`` by its tag, or in turn when the doc is not tagged); whitespace tokens are not words and are left out
of the trees (a sentence of whitespace only gets ``""``). Preterminal tags are the doc's ``token.tag_`` when a
tagger ran before the component, else ``XX`` (or spaCy's tags when the parser reads them, ``pos`` spacy or
gold: they are computed with the default pipeline then).

A doc the parser cannot take (a sentence longer than its ``max_words`` or its encoder's sub-word limit):

* ``nlp(text)`` raises [`UserError`][structattn.errors.UserError] naming the sentence;
* ``nlp.pipe(texts)`` leaves that doc unparsed and goes on with the others: its ``doc._.parse_strings`` and
  every ``sent._.parse_string`` stay ``None``, ``doc._.parse_error`` holds the reason, a ``UserWarning`` says
  so, and the component's ``skipped_docs`` counts such docs (``nlp.get_pipe("structattn_parser").skipped_docs``).
"""
from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator

from spacy.language import Language
from spacy.tokens import Doc, Span
from spacy.util import minibatch

from ..errors import UserError

FACTORY = "structattn_parser"

if not Span.has_extension("parse_string"):
    Span.set_extension("parse_string", default=None)
if not Doc.has_extension("parse_strings"):
    Doc.set_extension("parse_strings", default=None)
if not Doc.has_extension("parse_error"):
    Doc.set_extension("parse_error", default=None)  # why nlp.pipe left the doc unparsed, else None


class ChartParserComponent:
    """Runs a saved [`ChartParser`][structattn.bna.model.ChartParser] over every sentence of each doc."""

    def __init__(self, nlp: Language, name: str, model: str, batch_size: int = 32):
        from .parser import Parser

        if not model:
            raise UserError(f"the {FACTORY} component needs a shipped parser's name or a saved parser folder: "
                            f"nlp.add_pipe({FACTORY!r}, config={{'model': 'bna-minilm'}}) "
                            "(`structattn models` lists the names)")
        self.name = name
        self.model = model
        self.batch_size = batch_size
        self.parser = Parser.from_pretrained(model, batch_size=batch_size)
        self.skipped_docs = 0  # docs nlp.pipe left unparsed since the component was made (module docstring)

    def __call__(self, doc: Doc) -> Doc:
        self._parse([doc], skip_bad_docs=False)
        return doc

    def pipe(self, stream: Iterable[Doc], batch_size: int = 128) -> Iterator[Doc]:
        """``nlp.pipe``: the docs of ``stream`` in batches of ``batch_size``, parsed; a doc whose words the parser
        refuses is passed on unparsed and counted in ``skipped_docs``."""
        for docs in minibatch(stream, size=batch_size):
            self._parse(docs, skip_bad_docs=True)
            yield from docs

    def _parse(self, docs: list[Doc], skip_bad_docs: bool) -> None:
        """Parse every sentence of ``docs`` in one call of the parser. ``skip_bad_docs``: a doc whose words the
        parser refuses is left unparsed, recorded and counted (else the refusal is raised)."""
        from .ptb_text import treebank_words

        sentences: list[Span] = []
        words, tags, names = [], [], []
        tagged = all(doc.has_annotation("TAG") for doc in docs)
        for doc in docs:
            doc._.parse_error = None
            doc_sentences, doc_words, doc_tags, doc_names = [], [], [], []
            for sent in _sents(doc):
                tokens = [t for t in sent if not t.is_space]
                if not tokens:
                    sent._.parse_string = ""
                    continue
                doc_sentences.append(sent)
                doc_words.append(treebank_words([t.text for t in tokens], [t.tag_ for t in tokens]))
                doc_tags.append([t.tag_ or "XX" for t in tokens])
                doc_names.append(f"sentence {sent.text[:40]!r}")
            if skip_bad_docs:
                try:
                    self.parser.model.check_words(doc_words, doc_names)
                except UserError as exc:
                    self._skip(doc, str(exc))
                    continue
            sentences += doc_sentences
            words += doc_words
            tags += doc_tags
            names += doc_names
        if not sentences:
            self._collect(docs)
            return
        use_tags = tags if tagged else None
        if use_tags is None and self.parser.model.config.pos == "gold":
            use_tags = self.parser.tag(words)  # no gold tags in a pipeline: spaCy's stand in
        trees = self.parser.parse_sentences(words, use_tags, names=names)
        for sent, tree in zip(sentences, trees):
            sent._.parse_string = tree.to_string()
        self._collect(docs)

    def _skip(self, doc: Doc, reason: str) -> None:
        """Leave ``doc`` unparsed (its parse strings None), record why, count it and warn."""
        for sent in _sents(doc):
            sent._.parse_string = None
        doc._.parse_error = reason
        self.skipped_docs += 1
        warnings.warn(f"{FACTORY}: doc {doc.text[:40]!r} left unparsed ({reason}); the other docs are parsed; "
                      f"{self.skipped_docs} doc(s) skipped so far", UserWarning, stacklevel=2)

    @staticmethod
    def _collect(docs: list[Doc]) -> None:
        """``doc._.parse_strings`` from the sentences' strings (None for a doc left unparsed)."""
        for doc in docs:
            doc._.parse_strings = None if doc._.parse_error else [s._.parse_string for s in _sents(doc)]


def _sents(doc: Doc) -> list[Span]:
    return list(doc.sents) if doc.has_annotation("SENT_START") else [doc[:]]


@Language.factory(FACTORY, default_config={"model": "", "batch_size": 32})
def create_component(nlp: Language, name: str, model: str, batch_size: int) -> ChartParserComponent:
    """The ``structattn_parser`` factory: ``model`` is a shipped parser's name (``structattn models``) or a folder
    written by ChartParser.save_pretrained."""
    return ChartParserComponent(nlp, name, model, batch_size)
