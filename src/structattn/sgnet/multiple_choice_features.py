"""From multiple-choice questions (RACE, MCTest) to model-ready features, and their collator.

One input per option, as SG-Net and BERT's multiple-choice set-up::

    [CLS] passage [SEP] question-with-option [SEP]

* Segment 0 = the passage's words; segment 1 = the question with the option (`question_option_words`):
  when the question holds a blank (a run of ``_``, RACE's cloze questions such as ``He went there
  because_.``) the option's words take the place of the **first** blank (any later blank stays as a
  ``_`` word); otherwise the question's words are followed by the option's words. Words come from
  `structattn.tasks.text_words.words_with_offsets` (text pieces around a blank are split
  separately, so ``because_.`` gives ``because`` + option + ``.``).
* Structure (optional, from a `StructureSpec`): each passage is parsed
  once however many questions and options share it, each question-option segment once (the parse
  cache also skips anything parsed before); the word relation is computed per sentence, and an
  option's [`WordStructure`][structattn.structure.example.WordStructure] is the passage's blocks (segment 0, shared, not
  copied) followed by its own (segment 1): `join_structures`.
* Long inputs: the question and the option are always kept whole; the passage loses whole words
  from its **end** until the input fits in ``max_length`` tokens. Global word indices are those of the
  whole passage (segment 1 starts after the passage's last word), so the structure mask is cut to the
  kept words through ``token_word`` without touching the structure. How many inputs were cut and how
  many passage words they lost is logged (and printed when ``show_progress``); per question the
  feature keeps ``passage_words_dropped``. A question with an option that does not fit beside at
  least one passage word raises [`UserError`][structattn.errors.UserError] (before anything is parsed).
* Encoding: the cut is planned from per-word sub-word counts, then inputs are tokenised in batched calls
  (`encode_pairs`; the same tokens, token types and ``token_word`` as
  [`structattn.structure.encode_words`][structattn.structure.align.encode_words] gives an input that fits, in far fewer
  tokenizer calls), with a word that has no sub-word replaced by the unknown token as there.

`MultipleChoiceCollator` pads every option of every question of a batch to one length T and
returns ``[B, C, T]`` inputs, an optional ``[B, C, T, T]`` ``structure_mask`` and ``labels`` ``[B]``.
"""
from __future__ import annotations

import logging
import re
import sys
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
import torch

from ..errors import UserError
from ..settings import DEFAULT_SPACY_MODEL
from ..structure import ExpansionRules, StructureCollator, WordStructure, build_word_structures
from ..structure.align import check_fast_tokenizer, repair_words, token_counts
from ..structure.expand import SPECIAL
from ..tasks.text_words import words_of, words_with_offsets_many
from ..train.forking import contiguous_chunks, forked_map, forks_pay

if TYPE_CHECKING:
    from ..tasks.multiple_choice import MCQuestion
    from ..structure.spec import StructureSpec

log = logging.getLogger(__name__)

_BLANK = re.compile(r"_+")
_ENCODE_CHUNK = 256  # questions per batched tokenizer call


def question_option_words(question: str, option: str) -> list[str]:
    """The words of segment 1: the option in the question's first blank, else the question then the option."""
    return question_option_span(question, option)[0]


def question_option_pieces(question: str, option: str) -> tuple[str, str, str]:
    """(before, option, after): segment 1's texts, the option put in the question's first blank (or at its end)."""
    blank = _BLANK.search(question)
    before, after = (question, "") if blank is None else (question[:blank.start()], question[blank.end():])
    return before, option, after


def question_option_span(question: str, option: str,
                         words: Callable[[str], list[str]] = words_of) -> tuple[list[str], int, int]:
    """(segment 1's words, first, stop): the option's words are ``words[first:stop]``
    (`question_option_words`); ``words`` splits a text into words."""
    before, option, after = question_option_pieces(question, option)
    head, middle = words(before), words(option)
    return head + middle + words(after), len(head), len(head) + len(middle)


def _cached_words(questions: Sequence["MCQuestion"]) -> Callable[[str], list[str]]:
    """Word splitter for every text of ``questions``, through the word cache (no spaCy needed where it is full)."""
    texts = dict.fromkeys([q.passage for q in questions]
                          + [piece for q in questions for o in q.options for piece in question_option_pieces(q.question, o)])
    known = {text: words for text, (words, _) in zip(texts, words_with_offsets_many(list(texts)))}
    return known.__getitem__


def join_structures(passage: WordStructure, second: WordStructure) -> WordStructure:
    """One example's structure from its passage's (segment 0) and its second segment's (built alone).

    The passage's blocks are shared, not copied; the second segment's parents are moved past the
    passage's words. Equal to ``build_word_structures([passage parses], [second parses], ...)``.
    """
    n_a = passage.num_words
    parents = np.where(second.parents >= 0, second.parents + n_a, -1)
    return WordStructure(blocks=passage.blocks + second.blocks,
                         segments=[0] * len(passage.blocks) + [1] * len(second.blocks),
                         punct=np.concatenate([passage.punct, second.punct]),
                         parents=np.concatenate([passage.parents, parents]).astype(np.int64))


def passage_words_kept(passage_cum: np.ndarray, second_tokens: int, room: int, *, max_length: int,
                       where: str) -> int:
    """How many passage words (from its start) fit beside a whole second segment.

    Args:
        passage_cum: ``[N_a + 1]`` cumulative sub-word counts (``cum[k]`` = tokens of the first k words).
        second_tokens: sub-words of the second segment.
        room: non-special tokens an input holds (``max_length`` minus the pair's special tokens).
    Raises:
        UserError: the second segment alone leaves no room for a passage word, or the first word does not fit.
    """
    if second_tokens >= room:
        raise UserError(f"{where}: the question with this option alone needs {second_tokens} sub-word tokens, but "
                        f"max_length={max_length} leaves {room} beside the special tokens, and at least one for the "
                        "passage; raise max_length (the question and the option are never cut)")
    keep = int(np.searchsorted(passage_cum, room - second_tokens, side="right")) - 1  # cum[keep] <= room - second
    if keep < 1:
        raise UserError(f"{where}: the passage's first word needs {int(passage_cum[1])} sub-word tokens, but only "
                        f"{room - second_tokens} are left beside the question with this option "
                        f"(max_length={max_length}); raise max_length")
    return min(keep, len(passage_cum) - 1)


def encode_pairs(tokenizer, firsts: Sequence[list[str]], seconds: Sequence[list[str]],
                 second_offsets: Sequence[int]) -> list[dict]:
    """Encode word-list pairs in one batched call, without truncation (they were cut to fit before).

    Args:
        firsts, seconds: per input, the words of segment 0 and segment 1.
        second_offsets: per input, the global index of segment 1's first word (the whole passage's length,
            so that a cut passage leaves segment 1's numbering, and the structure's, unchanged).
    Returns:
        per input ``input_ids`` ``[T]`` int32, ``attention_mask`` ``[T]`` int8, ``token_type_ids`` ``[T]`` int8 (None
        for models without them), ``token_word`` ``[T]`` int32 (segment 0 words from 0, segment 1 words from the
        offset, -1 for special tokens).
    """
    check_fast_tokenizer(tokenizer)
    enc = tokenizer(list(firsts), list(seconds), is_split_into_words=True, return_token_type_ids=True)
    has_types = "token_type_ids" in getattr(tokenizer, "model_input_names", ())
    out = []
    for i, offset in enumerate(second_offsets):
        word = np.array([-1 if w is None else w for w in enc.word_ids(i)], dtype=np.int32)
        seq = np.array([-1 if s is None else s for s in enc.sequence_ids(i)], dtype=np.int32)
        token_word = np.where(word < 0, SPECIAL, word + np.where(seq == 1, offset, 0)).astype(np.int32)
        out.append({"input_ids": np.asarray(enc["input_ids"][i], dtype=np.int32),
                    "attention_mask": np.asarray(enc["attention_mask"][i], dtype=np.int8),
                    "token_type_ids": np.asarray(enc["token_type_ids"][i], dtype=np.int8) if has_types else None,
                    "token_word": token_word})
    return out


def encode_option(tokenizer, passage_words: list[str], second_words: list[str], *, max_length: int,
                  where: str = "input") -> tuple[dict, int]:
    """Encode one ``passage + question-with-option`` input, cutting the passage's end to fit ``max_length``.

    Returns:
        (feature, dropped): the feature (as `encode_pairs`; segment 1's words numbered from N_a, the
        whole passage's word count) and how many passage words were left out.
    """
    if not passage_words or not second_words:
        raise UserError(f"{where}: the passage or the question with this option has no words")
    first, counts_a = repair_words(tokenizer, passage_words, token_counts(tokenizer, [passage_words])[0], where)
    second, counts_b = repair_words(tokenizer, second_words, token_counts(tokenizer, [second_words])[0], where)
    room = max_length - tokenizer.num_special_tokens_to_add(pair=True)
    keep = passage_words_kept(np.concatenate([[0], np.cumsum(counts_a)]), int(counts_b.sum()), room,
                              max_length=max_length, where=where)
    (feature,) = encode_pairs(tokenizer, [first[:keep]], [second], [len(first)])
    _check_length(feature, max_length, where)
    return feature, len(first) - keep


def _check_length(feature: dict, max_length: int, where: str) -> None:
    if len(feature["input_ids"]) > max_length:  # pragma: no cover - the counts disagree with the pair encoding
        raise RuntimeError(f"{where}: the input needs {len(feature['input_ids'])} tokens after the passage was cut "
                           f"(max_length={max_length}); please report this with the tokenizer name")


@lru_cache(maxsize=2)
def _parser(name: str):
    """One parser per pipeline name: passages and question segments share the loaded pipeline."""
    from ..dependency.spacy_backend import SpacyParser

    return SpacyParser(model=name)


def _parse(word_lists: list[list[str]], parser_name: str, desc: str, show_progress: bool):
    from tqdm.auto import tqdm

    from ..dependency.cache import parse_cached

    with tqdm(total=len(word_lists), desc=desc, disable=not show_progress, leave=False) as bar:
        passages = parse_cached(word_lists, _parser(parser_name), kind="words", progress=bar.update)
    for i, (words, parses) in enumerate(zip(word_lists, passages)):
        n = sum(len(p) for p in parses)
        if n != len(words):  # the cache returns what the parser returned for these very words
            raise RuntimeError(f"{desc}: item {i}: the parser returned {n} words for {len(words)}; use a spaCy "
                               "pipeline that keeps the words it is given, or report this as a bug")
    return passages


def _structures(word_lists: list[list[str]], structure: "StructureSpec", parser_name: str, desc: str,
                show_progress: bool) -> list[WordStructure]:
    if structure.needs_parse:
        parses = _parse(word_lists, parser_name, desc, show_progress)
    else:
        from ..dependency import Parse

        parses = [[Parse.chain(words)] for words in word_lists]
    return build_word_structures(parses, None, structure.relation or "all", **structure.options)


def build_mc_features(questions: Sequence["MCQuestion"], tokenizer, structure: "StructureSpec | None" = None, *,
                      sg_structure: "StructureSpec | None" = None, max_length: int = 512,
                      parser_name: str = DEFAULT_SPACY_MODEL, split: str = "questions",
                      show_progress: bool = True) -> list[dict]:
    """Features for ``questions``, one dict per question.

    Each dict: ``options`` (C feature dicts as `StructureCollator` takes them: ``input_ids``,
    ``attention_mask``, ``token_type_ids`` (None for models without them), ``token_word`` ``[T_c]`` (numpy
    arrays, see `encode_pairs`: small dtypes, RACE's train split holds 350k inputs), ``structure``
    ([`WordStructure`][structattn.structure.example.WordStructure], or None without a word relation), ``option_words``
    (global indices ``(first, stop)`` of the option's words in ``token_word``: what ``pool="option"`` reads), and
    ``sg_structure`` when asked), ``label`` (option index or None), ``example_index`` (position in ``questions``),
    ``qid`` and ``passage_words_dropped`` (per option, passage words cut to fit ``max_length``).

    Args:
        structure: the word relation to build (``StructureSpec.for_mechanism``; SG-Net's SDOI:
            ``StructureSpec("sdoi", {}, ExpansionRules.for_relation("sdoi"))``); None = no structure.
        sg_structure: a second relation built from the same inputs and parses, as ``sg_structure`` (SG-Net's
            layer beside a mechanism's ``structure``); None = none.
        parser_name: spaCy pipeline for the parses (cached on disk, see `structattn.dependency.cache`).
        split: names the split in the log line about long inputs.
    """
    from tqdm.auto import tqdm

    words_of_text = _cached_words(questions)
    passage_index: dict[str, int] = {}  # passage text -> its place in passage_words
    passage_words: list[list[str]] = []
    for q in questions:
        if q.passage not in passage_index:
            passage_index[q.passage] = len(passage_words)
            words = words_of_text(q.passage)
            if not words:
                raise UserError(f"{q.qid}: the passage has no words")
            passage_words.append(words)
    spans = [[question_option_span(q.question, o, words_of_text) for o in q.options] for q in questions]
    second_words = [[words for words, _, _ in per_option] for per_option in spans]
    for q, per_option in zip(questions, second_words):
        for c, words in enumerate(per_option):
            if not words:
                raise UserError(f"{q.qid}: option {c} with its question has no words")

    # Sub-word counts (two batched calls) and how much of each passage every input keeps, before any
    # parsing, so a max_length that is too small fails at once. Words without a sub-word become [UNK].
    passage_tok, cums = [], []
    for words, counts in zip(passage_words, token_counts(tokenizer, passage_words)):
        fixed, counts = repair_words(tokenizer, words, counts, f"{split}: passage {len(passage_tok)}")
        passage_tok.append(fixed)
        cums.append(np.concatenate([[0], np.cumsum(counts)]))
    flat_counts = iter(token_counts(tokenizer, [w for ws in second_words for w in ws]))
    room = max_length - tokenizer.num_special_tokens_to_add(pair=True)
    second_tok: list[list[list[str]]] = []
    keeps: list[list[int]] = []
    for q, ws in zip(questions, second_words):
        p = passage_index[q.passage]
        second_tok.append([])
        keeps.append([])
        for c, words in enumerate(ws):
            fixed, counts = repair_words(tokenizer, words, next(flat_counts), f"{q.qid} option {c}")
            second_tok[-1].append(fixed)
            keeps[-1].append(passage_words_kept(cums[p], int(counts.sum()), room, max_length=max_length,
                                                where=f"{q.qid} option {c}"))

    def structures_of(spec):
        """(per passage, per question and option) word structures of ``spec``, or None without a word relation."""
        if spec is None or not spec.needs_word_structures:
            return None
        passage = _structures(passage_words, spec, parser_name, f"{split}: parse passages", show_progress)
        flat = [w for per_option in second_words for w in per_option]
        flat_st = iter(_structures(flat, spec, parser_name, f"{split}: parse questions with options", show_progress))
        return passage, [[next(flat_st) for _ in per_option] for per_option in second_words]

    built = {"structure": structures_of(structure)}
    if sg_structure is not None:
        built["sg_structure"] = structures_of(sg_structure)

    features = []
    bar = tqdm(total=len(questions), desc=f"{split}: encode", disable=not show_progress, leave=False)
    for start in range(0, len(questions), _ENCODE_CHUNK):
        chunk = range(start, min(start + _ENCODE_CHUNK, len(questions)))
        firsts, seconds, offsets = [], [], []
        for i in chunk:
            p = passage_index[questions[i].passage]
            for words, keep in zip(second_tok[i], keeps[i]):
                firsts.append(passage_tok[p][:keep])
                seconds.append(words)
                offsets.append(len(passage_tok[p]))
        encoded = iter(encode_pairs(tokenizer, firsts, seconds, offsets))
        for i in chunk:
            q, p = questions[i], passage_index[questions[i].passage]
            options = []
            for c in range(len(q.options)):
                feat = next(encoded)
                _check_length(feat, max_length, f"{q.qid} option {c}")
                for key, st in built.items():
                    feat[key] = None if st is None else join_structures(st[0][p], st[1][i][c])
                _, first, stop = spans[i][c]
                feat["option_words"] = (len(passage_tok[p]) + first, len(passage_tok[p]) + stop)
                options.append(feat)
            features.append({"options": options, "label": q.label, "example_index": i, "qid": q.qid,
                             "passage_words_dropped": [len(passage_tok[p]) - k for k in keeps[i]]})
        bar.update(len(chunk))
    bar.close()
    _report(truncation_summary(features, split, max_length), features, show_progress)
    return features


def passage_chunks(questions: Sequence["MCQuestion"], parts: int) -> list[tuple[int, int]]:
    """About ``parts`` contiguous ``[start, end)`` ranges of ``questions``, cut only where the passage changes (so a
    passage is parsed and split into words in one chunk)."""
    return contiguous_chunks([q.passage for q in questions], parts)


def build_mc_features_parallel(questions: Sequence["MCQuestion"], tokenizer, structure: "StructureSpec | None" = None,
                               *, workers: int, show_progress: bool = True, **options) -> list[dict]:
    """`build_mc_features` in ``workers`` forked processes over contiguous chunks of whole passages: the same
    features in the same order as one process builds (tested), ``example_index`` counted over all ``questions``.

    RACE-M train (25,421 questions, 101,684 inputs) takes 2-3 minutes in one process (tokenising and aligning words
    dominate; SG-Net's structures add about half); on 16 cores the whole start of a RACE-M run, dev features and
    model loading included, takes about 55 s against about 170 s in one process (results/README.md, RACE-M).
    ``workers`` <= 1, too few questions, or a platform without fork builds in this process. Parses missing from the cache are
    parsed in the workers (the cache keeps every process's additions).
    """
    if not forks_pay(len(questions), workers):
        return build_mc_features(questions, tokenizer, structure, show_progress=show_progress, **options)
    _cached_words(questions)   # every text split here first: one word-cache shard for the misses, shared after the fork
    bounds = passage_chunks(questions, 4 * workers)
    parts = forked_map(lambda b: build_mc_features(questions[b[0]:b[1]], tokenizer, structure, show_progress=False,
                                                   **options), bounds, workers)
    features = []
    for (start, _), part in zip(bounds, parts):
        for feature in part:
            feature["example_index"] += start
            features.append(feature)
    _report(truncation_summary(features, options.get("split", "questions"), options.get("max_length", 512)),
            features, show_progress)
    return features


def truncation_summary(features: Sequence[dict], split: str, max_length: int) -> str:
    """One line: how many questions and option inputs had their passage cut, and the passage words dropped."""
    cut = [d for f in features for d in f["passage_words_dropped"]]
    inputs = sum(d > 0 for d in cut)
    questions = sum(any(d > 0 for d in f["passage_words_dropped"]) for f in features)
    return (f"{split}: {questions:,} of {len(features):,} questions ({inputs:,} of {len(cut):,} question-option "
            f"inputs) longer than {max_length} tokens: passage cut from its end, {sum(cut):,} passage words "
            "dropped in all (questions and options kept whole)")


def _report(message: str, features: Sequence[dict], show_progress: bool) -> None:
    log.info(message)
    if show_progress and any(d > 0 for f in features for d in f["passage_words_dropped"]):
        from tqdm.auto import tqdm

        tqdm.write(message, file=sys.stderr)


class MultipleChoiceCollator:
    """Batch question features (from `build_mc_features`) into ``[B, C, T]`` tensors.

    Every option of every question is padded to one T (the longest option input of the batch, rounded up
    to ``pad_to_multiple_of``). Output: ``input_ids``, ``attention_mask`` and (when the tokenizer has
    them) ``token_type_ids`` ``[B, C, T]`` long; ``structure_mask`` ``[B, C, T, T]`` bool (True = may
    attend; padding rows see the real tokens, so no row is all False) when ``rules`` is given;
    ``labels`` ``[B]`` long when every question is labelled; ``pool_mask`` ``[B, C, T]`` bool (True on the
    option's tokens) when ``option_mask``.

    Args:
        pad_token_id: the tokenizer's padding id.
        rules: how special tokens, segments and sentences are treated in the mask
            (``ExpansionRules.for_relation("sdoi")`` for SG-Net); None = no ``structure_mask``.
        option_mask: add ``pool_mask`` (the tokens ``pool="option"`` averages).
    """

    def __init__(self, pad_token_id: int, rules: ExpansionRules | None = None, *,
                 pad_to_multiple_of: int | None = None, option_mask: bool = False):
        self.rules = rules
        self.option_mask = option_mask
        self._flat = StructureCollator(pad_token_id, rules, with_structure=rules is not None,
                                       pad_to_multiple_of=pad_to_multiple_of)

    def __call__(self, features: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        counts = sorted({len(f["options"]) for f in features})
        if len(counts) != 1:
            raise UserError(f"questions of one batch have {' and '.join(map(str, counts))} options; every question "
                            "of a batch needs the same number of options")
        B, C = len(features), counts[0]
        flat = [opt for f in features for opt in f["options"]]
        if self.rules is not None and self.rules.token_window is None and any(o["structure"] is None for o in flat):
            raise UserError("a structure mask was asked for (rules given) but the features carry no word structures; "
                            "build them with build_mc_features(..., structure=StructureSpec(...)) or pass rules=None")
        batch = self._flat(flat)  # [B * C, T] (+ [B * C, T, T])
        out = {name: value.view(B, C, *value.shape[1:]) for name, value in batch.items()}
        if self.option_mask:
            out["pool_mask"] = option_token_mask(features, out["input_ids"].shape[-1])
        labels = [f["label"] for f in features]
        if all(label is not None for label in labels):
            out["labels"] = torch.tensor(labels, dtype=torch.long)
        elif any(label is not None for label in labels):
            raise UserError("some questions of the batch are labelled and some are not; do not mix labelled and "
                            "unlabelled splits")
        return out


def option_token_mask(features: Sequence[dict[str, Any]], T: int) -> torch.Tensor:
    """``[B, C, T]`` bool: True on the tokens of each input's option words (``option_words``), padding False."""
    B, C = len(features), len(features[0]["options"])
    mask = np.zeros((B, C, T), dtype=bool)
    for b, f in enumerate(features):
        for c, option in enumerate(f["options"]):
            first, stop = option["option_words"]
            tw = np.asarray(option["token_word"])
            mask[b, c, :len(tw)] = (tw >= first) & (tw < stop)
            if not mask[b, c].any():
                raise UserError(f"{f.get('qid', b)} option {c}: the option has no word to pool (pool 'option'); "
                                "give it text, or use pool 'first'")
    return torch.from_numpy(mask)


__all__ = ["question_option_words", "question_option_span", "join_structures", "token_counts", "repair_words",
           "passage_words_kept", "encode_pairs", "encode_option", "build_mc_features", "build_mc_features_parallel",
           "truncation_summary",
           "MultipleChoiceCollator", "option_token_mask"]
