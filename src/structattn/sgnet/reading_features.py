"""Span-QA features: SQuAD questions -> windows ``[CLS] question [SEP] passage [SEP]`` with answer positions.

Segment 0 is the question's words, segment 1 the passage's (words from
`words_with_offsets`, so every passage word keeps its character span). A
question whose input does not fit in ``max_length`` tokens is split by
[`encode_words`][structattn.structure.align.encode_words] (``long_inputs="windows"``): the passage slides in windows
over whole words that share at most ``stride`` sub-words, and the question is repeated in every window.

Parses: every question is parsed, and every *paragraph* once however many questions share it (through the
on-disk parse cache); the word structures of a question pair its question parse with its paragraph's parse
([`build_word_structures`][structattn.structure.example.build_word_structures]).

Labels (BERT's run_squad): ``start_positions`` / ``end_positions`` are the token positions of the answer's first
word's first sub-word and last word's last sub-word when the whole answer lies in the window's passage part,
else 0 (the leading [CLS]); unanswerable questions get 0 in every window. The answer is the first gold answer
that aligns to whole words (`answer_word_span`); a first answer that does not
align is counted, and the next gold answer that does is used instead (counted too). An answerable question with
no alignable gold answer is counted; training leaves its windows out (a 0 label would teach "no answer"), the
other splits keep them, labelled 0, so every question gets a prediction.

Windows cut dependency links: a word near a window edge may have an ancestor outside the window, and then the
SG-Net SDOI mask, built from the window's words, silently loses that link (the official SG-Net code drops them
the same way). The number of such (word, ancestor) pairs, summed over windows, is reported per split.
"""
from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch

from ..errors import UserError
from .span_qa import QAContext
from ..dependency import Parse
from ..settings import DEFAULT_SPACY_MODEL
from ..structure import ExpansionRules, StructureCollator, WordStructure, build_word_structures, encode_words
from ..structure.expand import SPECIAL
from ..structure.relations import ancestor_matrices
from ..tasks.text_words import words_with_offsets_many
from ..structure.spec import StructureSpec
from ..train.forking import contiguous_chunks, forked_map, forks_pay
from .loading import sg_tensors

log = logging.getLogger(__name__)


@dataclass
class QAParses:
    """Dependency parses of a split: per question its question's sentences, per paragraph its passage's.

    Attributes:
        questions: one list of [`Parse`][structattn.dependency.record.Parse] (sentences) per question, in the questions'
            order.
        paragraphs: paragraph index (``SquadQuestion.paragraph``) -> that passage's sentences.
    """

    questions: list[list[Parse]]
    paragraphs: dict[int, list[Parse]]


@dataclass
class QACounts:
    """What happened to one split's questions on the way to features (all counts of questions unless named)."""

    split: str
    max_length: int
    questions: int = 0
    answerable: int = 0
    windows: int = 0
    long: int = 0  # inputs longer than max_length (split into windows)
    lost_tokens: int = 0  # sub-words in no window (a word longer than a window; a question cut beside the passage)
    unaligned: int = 0  # answerable questions whose first gold answer does not align to words
    relabelled: int = 0  # ... of which labelled with a later gold answer that aligns
    unlabelled: int = 0  # answerable questions without any alignable gold answer
    left_out_windows: int = 0  # training: the windows of unlabelled questions, not used
    answer_outside: int = 0  # windows of labelled answerable questions whose answer is not whole inside: label 0
    cut_links: int | None = None  # (word, SDOI ancestor) pairs cut by window edges; None = no parse to count on

    def summary(self) -> str:
        text = (f"{self.split}: {self.questions:,} questions ({self.answerable:,} answerable) -> {self.windows:,} "
                f"windows; {self.long:,} inputs longer than {self.max_length} tokens split into windows")
        if self.lost_tokens:
            text += f" ({self.lost_tokens:,} sub-word tokens in no window)"
        text += f"; {self.answer_outside:,} windows of answerable questions hold no whole answer (labelled [CLS])"
        text += f"; {self.unaligned:,} first gold answers do not align to word boundaries"
        if self.unaligned:
            text += f" ({self.relabelled:,} labelled with a later gold answer, {self.unlabelled:,} without label"
            text += (f": {self.left_out_windows:,} training windows left out)" if self.left_out_windows else
                     ": kept, labelled [CLS])")
        if self.cut_links is None:
            text += "; ancestor links cut by windows: not counted (no parse)"
        else:
            text += f"; {self.cut_links:,} (word, dependency ancestor) links cut by window edges"
        return text


@dataclass
class QAFeatures:
    """Features of one split and what decoding needs to map them back.

    Attributes:
        features: one dict per window: ``input_ids``, ``attention_mask``, ``token_type_ids`` (or None),
            ``token_word`` ``[T]`` (global word index: question words first, -1 for special tokens),
            ``example_index`` (index into the questions), ``structure`` (WordStructure or None), ``sg_structure``
            (only when an SG spec was given), ``start_positions`` / ``end_positions`` (ints).
        contexts: per question the passage text, its words and their character spans, and the passage's
            first global word index ([`QAContext`][structattn.sgnet.span_qa.QAContext], what
            [`predict_answers`][structattn.sgnet.span_qa.predict_answers] takes).
        answers: per question the passage word span ``(first, last)`` its labels mark, or None (unanswerable
            or unlabelled).
        counts: the split's counts (also logged).
    """

    features: list[dict]
    contexts: list[QAContext]
    answers: list[tuple[int, int] | None]
    counts: QACounts
    parses: QAParses | None = field(default=None, repr=False)


# ---------------------------------------------------------------------------------------------------- words
def _paragraph_words(questions: Sequence) -> dict[int, tuple[list[str], list[tuple[int, int]]]]:
    """Paragraph index -> (words, character spans) of its passage, tokenised once per paragraph (through the
    word cache of `words_with_offsets_many`)."""
    context_of: dict[int, str] = {}
    first_question: dict[int, str] = {}  # named in the error for an empty passage
    for q in questions:
        if q.paragraph in context_of:
            if context_of[q.paragraph] != q.context:  # the sharing below would give this question the wrong text
                raise ValueError(f"question {q.qid!r}: paragraph {q.paragraph} has another context than its "
                                 "earlier questions; paragraph indices must name one passage")
            continue
        context_of[q.paragraph], first_question[q.paragraph] = q.context, q.qid
    out = dict(zip(context_of, words_with_offsets_many(list(context_of.values()))))
    for k, (words, _) in out.items():
        if not words:
            raise UserError(f"question {first_question[k]!r}: its context has no words; remove the paragraph or "
                            "give it text")
    return out


def _questions_words(questions: Sequence) -> list[list[str]]:
    """The words of every question (through the word cache)."""
    out = [words for words, _ in words_with_offsets_many([q.question for q in questions])]
    for q, words in zip(questions, out):
        if not words:
            raise UserError(f"question {q.qid!r} has no words; remove it or give it text")
    return out


# ---------------------------------------------------------------------------------------------------- parsing
def parse_questions(questions: Sequence, parser_name: str = DEFAULT_SPACY_MODEL, *,
                    show_progress: bool = True, parser=None) -> QAParses:
    """Parse every question, and every paragraph once, through the on-disk parse cache, with ``parser`` (a
    ``SpacyParser`` kept by the caller, which loads its pipeline once) or a new parser for ``parser_name``."""
    from tqdm.auto import tqdm

    from ..dependency.cache import parse_cached
    from ..dependency.spacy_backend import SpacyParser

    parser = parser if parser is not None else SpacyParser(model=parser_name)
    paragraphs = _paragraph_words(questions)

    def parse(items, desc):
        with tqdm(total=len(items), desc=desc, disable=not show_progress, leave=False) as bar:
            return parse_cached(items, parser, kind="words", progress=bar.update)

    q_parses = parse(_questions_words(questions), "parse questions")
    keys = list(paragraphs)
    p_parses = parse([paragraphs[k][0] for k in keys], "parse paragraphs")
    return QAParses(questions=q_parses, paragraphs=dict(zip(keys, p_parses)))


def _check_parses(questions: Sequence, q_words: list[list[str]], paragraphs: dict, parses: QAParses) -> None:
    """The parses must hold exactly the words the features are built from (the masks index words)."""
    if len(parses.questions) != len(questions):
        raise ValueError(f"{len(parses.questions)} question parses for {len(questions)} questions")
    for q, words, passage in zip(questions, q_words, parses.questions):
        if tuple(w for p in passage for w in p.words) != tuple(words):
            raise ValueError(f"question {q.qid!r}: its parse holds other words than the question; parse the same "
                             "questions (parse_questions)")
    for k, (words, _) in paragraphs.items():
        passage = parses.paragraphs.get(k)
        if passage is None or sum(len(p) for p in passage) != len(words):
            raise ValueError(f"paragraph {k}: its parse is missing or holds another number of words than the "
                             "passage; parse the same questions (parse_questions)")


def _structures(spec: StructureSpec | None, questions, q_words, paragraphs, parses: QAParses | None
                ) -> list[WordStructure | None]:
    """One WordStructure per question for ``spec`` (None where the spec needs no word structure)."""
    if spec is None or not spec.needs_word_structures:
        return [None] * len(questions)
    if spec.needs_parse:
        pa = parses.questions
        pb = [parses.paragraphs[q.paragraph] for q in questions]  # shared lists: one parse per paragraph
    else:
        pa = [[Parse.chain(w)] for w in q_words]
        chains = {k: [Parse.chain(words)] for k, (words, _) in paragraphs.items()}
        pb = [chains[q.paragraph] for q in questions]
    return build_word_structures(pa, pb, spec.relation or "all", **spec.options)


# ---------------------------------------------------------------------------------------------------- cut links
def _sentence_ancestors(passage: Sequence[Parse], offset: int) -> list[tuple[int, np.ndarray]]:
    """Per sentence (global index of its first word, ``[n, n]`` bool: j is i or an ancestor of i)."""
    out = []
    for p in passage:
        out.append((offset, ancestor_matrices(np.asarray([p.heads], dtype=np.int64))[0]))
        offset += len(p)
    return out


def cut_ancestor_links(token_word: np.ndarray, sentences: Sequence[tuple[int, np.ndarray]]) -> int:
    """Pairs (i, j), i != j, j an ancestor of i, with i's word in the window and j's word not.

    Args:
        token_word: ``[T]`` the window's global word index per token (-1/-2 for special/padding).
        sentences: (first global word, ``[n, n]`` ancestor-or-self matrix) of every sentence of the example.
    """
    tw = np.asarray(token_word)
    words = tw[tw >= 0]
    total = 0
    for start, anc in sentences:
        n = anc.shape[0]
        inside = np.zeros(n, dtype=bool)
        local = words[(words >= start) & (words < start + n)] - start
        inside[local] = True
        if inside.all() or not inside.any():  # nothing crosses the edge of this sentence
            continue
        total += int(anc[inside][:, ~inside].sum())
    return total


# ---------------------------------------------------------------------------------------------------- labels
def _label_span(q, spans, counts: QACounts) -> tuple[int, int] | None:
    """The passage word span the labels mark: the first gold answer that aligns; None if none (counted)."""
    from ..tasks.squad import answer_word_span

    if q.is_impossible:
        return None
    counts.answerable += 1
    for k, (text, start) in enumerate(q.answers):
        span = answer_word_span(spans, start, text, context=q.context)
        if span is not None:
            if k > 0:
                counts.relabelled += 1
            return span
        if k == 0:
            counts.unaligned += 1
    if not q.answers:  # an answerable question given without its answer
        counts.unaligned += 1
    counts.unlabelled += 1
    return None


def _positions(token_word: np.ndarray, offset: int, span: tuple[int, int] | None) -> tuple[int, int] | None:
    """(start, end) token positions of the answer in this window; None when it is not whole inside."""
    if span is None:
        return None
    first, last = span[0] + offset, span[1] + offset
    starts = np.nonzero(token_word == first)[0]
    ends = np.nonzero(token_word == last)[0]
    if len(starts) == 0 or len(ends) == 0:
        return None
    return int(starts[0]), int(ends[-1])


# ---------------------------------------------------------------------------------------------------- features
def build_qa_features(questions: Sequence, tokenizer, structure: StructureSpec | None = None, *,
                      sg_structure: StructureSpec | None = None, max_length: int = 384, stride: int = 128,
                      parser_name: str = DEFAULT_SPACY_MODEL, training: bool = False, split: str = "questions",
                      parses: QAParses | None = None, show_progress: bool = True) -> QAFeatures:
    """Window features for span QA (module docstring).

    Args:
        questions: ``SquadQuestion`` records (``qid, question, context, answers, is_impossible, paragraph``).
        tokenizer: a fast tokenizer that puts a special token first ([CLS] / ``<s>``).
        structure: the encoder mechanism's structure (None or a spec without relation: no ``structure``).
        sg_structure: the SG-Net layer's structure (``StructureSpec`` with relation ``sdoi``), stored as
            ``sg_structure``; None = none.
        max_length, stride: window size in tokens and most sub-words two windows share.
        parser_name: spaCy pipeline for the parses (used when a spec needs a parse and ``parses`` is None).
        training: leave out the windows of answerable questions without an alignable answer.
        split: name used in the counts.
        parses: parses from `parse_questions` for these questions (reuse them across splits' specs).
    Returns:
        `QAFeatures`; its counts are logged, and printed beside the progress bars when ``show_progress``.
    """
    specs = [s for s in (structure, sg_structure) if s is not None]
    q_words = _questions_words(questions)
    paragraphs = _paragraph_words(questions)
    if parses is None and any(s.needs_parse for s in specs):
        parses = parse_questions(questions, parser_name, show_progress=show_progress)
    if parses is not None:
        _check_parses(questions, q_words, paragraphs, parses)
    main = _structures(structure, questions, q_words, paragraphs, parses)
    sg = _structures(sg_structure, questions, q_words, paragraphs, parses) if sg_structure is not None else None

    counts = QACounts(split, max_length, cut_links=None if parses is None else 0)
    passage_anc: dict[int, list] = {}
    features, contexts, answers = [], [], []
    for idx, q in enumerate(questions):
        words, spans = paragraphs[q.paragraph]
        offset = len(q_words[idx])
        contexts.append(QAContext(qid=q.qid, context=q.context, spans=spans, offset=offset, words=words))
        span = _label_span(q, spans, counts)
        answers.append(span)
        windows = encode_words(tokenizer, q_words[idx], words, max_length=max_length, stride=stride,
                               long_inputs="windows", example_index=idx, where=f"question {q.qid!r}")
        if windows[0].token_word[0] != SPECIAL:
            raise UserError(f"{type(tokenizer).__name__} puts no special token first; span QA scores 'no answer' at "
                            "position 0 ([CLS]), so use a tokenizer of the BERT/RoBERTa kind")
        counts.questions += 1
        counts.windows += len(windows)
        counts.long += windows[0].example_length > max_length
        counts.lost_tokens += windows[0].dropped_tokens
        unlabelled = not q.is_impossible and span is None
        if training and unlabelled:
            counts.left_out_windows += len(windows)
            continue
        sentences = None
        if parses is not None:
            if q.paragraph not in passage_anc:
                passage_anc[q.paragraph] = _sentence_ancestors(parses.paragraphs[q.paragraph], 0)
            sentences = (_sentence_ancestors(parses.questions[idx], 0)
                         + [(offset + s, a) for s, a in passage_anc[q.paragraph]])
        for win in windows:
            pos = _positions(win.token_word, offset, span)
            if span is not None and pos is None:
                counts.answer_outside += 1
            start, end = pos if pos is not None else (0, 0)
            feat = {"input_ids": win.input_ids, "attention_mask": win.attention_mask,
                    "token_type_ids": win.token_type_ids, "token_word": win.token_word, "example_index": idx,
                    "structure": main[idx], "start_positions": start, "end_positions": end}
            if sg is not None:
                feat["sg_structure"] = sg[idx]
            if sentences is not None:
                counts.cut_links += cut_ancestor_links(win.token_word, sentences)
            features.append(feat)
    _report(counts, show_progress)
    return QAFeatures(features=features, contexts=contexts, answers=answers, counts=counts, parses=parses)


# Worker processes inherit what they need by fork (a tokenizer is costly to pickle): set just before the pool.
def _chunks(questions: Sequence, parts: int) -> list[tuple[int, int]]:
    """About ``parts`` contiguous ``[start, end)`` ranges of ``questions``, cut only between paragraphs."""
    return contiguous_chunks([q.paragraph for q in questions], parts)


def build_qa_features_parallel(questions: Sequence, tokenizer, structure: StructureSpec | None = None, *,
                               workers: int, show_progress: bool = True, **options) -> QAFeatures:
    """`build_qa_features` in ``workers`` forked processes, over contiguous chunks of whole paragraphs;
    the same features, contexts, answers and counts as one process builds (tested), in the same order.

    SQuAD 1.1 train (88k questions) takes 4-7 minutes in one process; a GPU machine's cores cut that to seconds.
    ``workers`` <= 1, or a platform without fork, builds in this process.
    """
    if options.get("parses") is not None:
        raise ValueError("parses are per question list; build in one process (workers=1) when giving them")
    options = {"structure": structure, **options}
    if not forks_pay(len(questions), workers):
        return build_qa_features(questions, tokenizer, show_progress=show_progress, **options)
    # tokenise every text here first: one cache shard for the misses, and the loaded cache shared by the workers
    words_with_offsets_many(list(dict.fromkeys([q.context for q in questions] + [q.question for q in questions])))
    parts = forked_map(lambda b: build_qa_features(questions[b[0]:b[1]], tokenizer, show_progress=False, **options),
                       _chunks(questions, 4 * workers), workers)
    return _merge(parts, show_progress)


def _merge(parts: list[QAFeatures], show_progress: bool) -> QAFeatures:
    """One `QAFeatures` of consecutive chunks' (example indices shifted, counts added)."""
    from dataclasses import fields as dc_fields

    counts = QACounts(parts[0].counts.split, parts[0].counts.max_length)
    for f in dc_fields(QACounts):
        if f.name in ("split", "max_length"):
            continue
        values = [getattr(p.counts, f.name) for p in parts]
        setattr(counts, f.name, None if any(v is None for v in values) else sum(values))
    features, contexts, answers = [], [], []
    for part in parts:
        shift = len(contexts)
        for feat in part.features:
            feat["example_index"] += shift
            features.append(feat)
        contexts.extend(part.contexts)
        answers.extend(part.answers)
    _report(counts, show_progress)
    return QAFeatures(features=features, contexts=contexts, answers=answers, counts=counts,
                      parses=None if any(p.parses is None for p in parts) else _merge_parses(parts))


def _merge_parses(parts: list[QAFeatures]) -> QAParses:
    """The chunks' parses as one (paragraph indices are the question records', shared by all chunks)."""
    questions, paragraphs = [], {}
    for part in parts:
        questions.extend(part.parses.questions)
        paragraphs.update(part.parses.paragraphs)
    return QAParses(questions, paragraphs)


def _report(counts: QACounts, show_progress: bool) -> None:
    message = counts.summary()
    log.info(message)
    if show_progress:
        from tqdm.auto import tqdm

        tqdm.write(message, file=sys.stderr)


# ---------------------------------------------------------------------------------------------------- batching
class SpanQACollator:
    """Batch span-QA features: the `StructureCollator` tensors plus SG-Net's mask and the labels.

    Output: ``input_ids`` / ``attention_mask`` / ``token_type_ids`` ``[B, T]``; ``structure_mask`` ``[B, T, T]``
    bool when ``rules`` is given (from each feature's ``structure``); with ``sg_rules``, ``sg_mask`` ``[B, T, T]``
    bool (from ``sg_structure``) and ``sg_tokens`` ``[B, T]`` bool (True on word tokens: the special tokens,
    which see only themselves under SG-Net's rules, and padding keep the encoder's output); ``start_positions`` /
    ``end_positions`` ``[B]`` long when the features have them.
    """

    def __init__(self, pad_token_id: int, rules: ExpansionRules | None = None, sg_rules: ExpansionRules | None = None,
                 *, pad_to_multiple_of: int | None = None):
        self.base = StructureCollator(pad_token_id, rules, with_structure=rules is not None,
                                      pad_to_multiple_of=pad_to_multiple_of)
        self.sg_rules = sg_rules

    def __call__(self, features: Sequence[dict]) -> dict[str, torch.Tensor]:
        batch = self.base(features)
        T = batch["input_ids"].shape[1]
        if self.sg_rules is not None:
            batch["sg_mask"], batch["sg_tokens"] = sg_tensors(features, T, self.sg_rules)
        if features[0].get("start_positions") is not None:
            batch["start_positions"] = torch.tensor([f["start_positions"] for f in features], dtype=torch.long)
            batch["end_positions"] = torch.tensor([f["end_positions"] for f in features], dtype=torch.long)
        return batch
