"""Translation set-up: the joint BPE, BPE ids, the source structure for ``sla``, batches by token count,
collation.

Tokenizer: a joint BPE learned on the training source and target text with ``tokenizers`` and wrapped as a
``PreTrainedTokenizerFast``: NFC, whitespace marked by "▁" (Metaspace) and punctuation split off, so
decoding gives back detokenised text exactly (no Moses step). Special tokens: ``<pad>`` 0 (also the
decoder start, Marian's convention), ``<s>`` 1, ``</s>`` 2 (appended to every sequence), ``<unk>`` 3.

Notation: S source tokens, T target tokens of one sentence (``</s>`` included), B sentences in a batch.

Source structure (only the ``sla`` variant and the per-POS gate analysis need it): the English source is
parsed by the structure pipeline's spaCy parser from its raw text; each BPE piece is mapped to the parser
word that holds its first non-space character (tokenizer offsets against the word's character span), so a
word's pieces share its row and column in the expanded mask and ``</s>`` is a special token
([`structattn.structure.expand.token_mask`][structattn.structure.expand.token_mask]). Every variant sees the same BPE
segmentation.
"""
from __future__ import annotations

import random
import unicodedata
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from ..errors import UserError
from ..structure.expand import SPECIAL, ExpansionRules, token_mask

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIAL_TOKENS = (PAD, BOS, EOS, UNK)


def normalise(text: str) -> str:
    """The text form every side of the pipeline sees (NFC), so tokenizer offsets and parser spans agree."""
    return unicodedata.normalize("NFC", text)


def train_bpe_tokenizer(texts: Sequence[str], vocab_size: int = 8000, min_frequency: int = 2):
    """Learn a joint BPE on ``texts`` (source and target training lines) -> ``PreTrainedTokenizerFast``."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    if vocab_size < len(SPECIAL_TOKENS) + 64:
        raise UserError(f"vocab_size={vocab_size} is too small for a BPE vocabulary; use at least 1000")
    tok = Tokenizer(models.BPE(unk_token=UNK))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always"),
                                                 pre_tokenizers.Punctuation("isolated")])
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                  special_tokens=list(SPECIAL_TOKENS), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    eos = tok.token_to_id(EOS)
    tok.post_processor = processors.TemplateProcessing(single=f"$A {EOS}", special_tokens=[(EOS, eos)])
    wrapped = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=PAD, bos_token=BOS, eos_token=EOS,
                                      unk_token=UNK, model_max_length=1024)
    for i, name in enumerate(SPECIAL_TOKENS):
        assert wrapped.convert_tokens_to_ids(name) == i, "special tokens must be the first ids"
    return wrapped


def encode_texts(tokenizer, texts: Sequence[str]) -> list[list[int]]:
    """BPE ids of each text with ``</s>`` appended ([S] per text)."""
    if not texts:
        return []
    return tokenizer([normalise(t) for t in texts], add_special_tokens=True)["input_ids"]


def word_char_spans(text: str, words: Sequence[str]) -> list[tuple[int, int]]:
    """Character span [start, end) of each parser word in ``text`` (words in reading order).

    Words are found left to right; a word the parser changed (a repaired control character) is given the
    next ``len(word)`` non-space characters instead.
    """
    spans, pos = [], 0
    for word in words:
        found = text.find(word, pos)
        if found < 0:
            while pos < len(text) and text[pos].isspace():
                pos += 1
            found = pos
        end = min(found + len(word), len(text))
        spans.append((found, end))
        pos = end
    return spans


def align_pieces_to_words(offsets: Sequence[tuple[int, int]], text: str, spans: Sequence[tuple[int, int]],
                          special: Sequence[bool]) -> np.ndarray:
    """token_word [S] int: the word index of each piece (its first non-space character's word), -1 for
    special tokens. A piece with no non-space character (a lone "▁") takes the next piece's word."""
    starts = np.asarray([s for s, _ in spans], dtype=np.int64)
    out = np.full(len(offsets), SPECIAL, dtype=np.int64)
    pending = []
    for t, ((s, e), is_special) in enumerate(zip(offsets, special)):
        if is_special:
            continue
        c = s
        while c < e and text[c].isspace():
            c += 1
        if c >= e:
            pending.append(t)
            continue
        word = max(int(np.searchsorted(starts, c, side="right")) - 1, 0)
        out[t] = word
        for p in pending:
            out[p] = word
        pending = []
    for p in pending:  # trailing whitespace piece: the last word
        out[p] = max(len(spans) - 1, 0)
    return out


@dataclass
class SourceStructure:
    """Per source sentence: token_word [S] and the word-level structure (``None`` entries when not built)."""

    token_word: list[np.ndarray]
    structures: list  # WordStructure per sentence
    upos: list[list[str]]  # parser POS tag per word


def build_source_structure(tokenizer, texts: Sequence[str], relation: str = "sla", parser_name: str | None = None,
                           **relation_options) -> SourceStructure:
    """Parse ``texts`` (cached) and align BPE pieces to parser words; word structures for ``relation``."""
    from ..dependency.cache import parse_cached
    from ..dependency.spacy_backend import DEFAULT_SPACY_MODEL, SpacyParser
    from ..structure.example import build_word_structures

    texts = [normalise(t) for t in texts]
    empty = [i + 1 for i, t in enumerate(texts) if not t.strip()]
    if empty:
        raise UserError(f"{len(empty)} empty source line(s) (first: line {empty[0]}) cannot be parsed; the training "
                        "filter drops empty pairs, and `structattn translate` passes empty lines through")
    parser = SpacyParser(parser_name or DEFAULT_SPACY_MODEL)
    passages = parse_cached(list(texts), parser, kind="texts")
    structures = build_word_structures(passages, None, relation, **relation_options)
    enc = tokenizer(list(texts), add_special_tokens=True, return_offsets_mapping=True,
                    return_special_tokens_mask=True)
    token_words, upos = [], []
    for i, (text, passage) in enumerate(zip(texts, passages)):
        words = [w for p in passage for w in p.words]
        spans = word_char_spans(text, words)
        special = [bool(x) for x in enc["special_tokens_mask"][i]]
        token_words.append(align_pieces_to_words(enc["offset_mapping"][i], text, spans, special))
        upos.append([u for p in passage for u in p.upos])
    return SourceStructure(token_words, structures, upos)


def token_batches(src_lengths: Sequence[int], tgt_lengths: Sequence[int], max_tokens: int, seed: int | None,
                  ) -> list[list[int]]:
    """Batches of sentence indices holding at most ``max_tokens`` padded tokens on either side.

    Sentences are sorted by (source, target) length, ties broken at random with ``seed`` (None: by index),
    packed greedily, and the batch order is shuffled with ``seed`` (kept in length order for None). A
    sentence longer than ``max_tokens`` by itself gets a batch of its own (the training filter keeps such
    pairs out; evaluation must not drop any).
    """
    n = len(src_lengths)
    rng = random.Random(seed)
    tie = [rng.random() for _ in range(n)] if seed is not None else list(range(n))
    order = sorted(range(n), key=lambda i: (src_lengths[i], tgt_lengths[i], tie[i]))
    batches = _pack(order, src_lengths, tgt_lengths, max_tokens)
    if seed is not None:
        rng.shuffle(batches)
    return batches


def shuffled_token_batches(src_lengths: Sequence[int], tgt_lengths: Sequence[int], max_tokens: int, seed: int,
                           ) -> list[list[int]]:
    """Token batches of sentences in a random order (``seed``), not grouped by length, as Joey NMT and
    fairseq without length sorting draw them: a batch holds about half the real tokens of
    `token_batches`' at the same ``max_tokens``, the rest being padding."""
    order = list(range(len(src_lengths)))
    random.Random(seed).shuffle(order)
    return _pack(order, src_lengths, tgt_lengths, max_tokens)


#: ``NMTConfig.batching`` -> how the training batches of an epoch are drawn
TRAINING_BATCHES = {"length": token_batches, "shuffled": shuffled_token_batches}  # keys: config.BATCHINGS


def _pack(order: Sequence[int], src_lengths: Sequence[int], tgt_lengths: Sequence[int], max_tokens: int,
          ) -> list[list[int]]:
    """Cut ``order`` greedily into batches whose longest side times their size stays within ``max_tokens``."""
    batches, current, longest = [], [], 0
    for i in order:
        size = max(src_lengths[i], tgt_lengths[i])
        if current and max(longest, size) * (len(current) + 1) > max_tokens:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, size)
    if current:
        batches.append(current)
    return batches


class TranslationCollator:
    """Pads a list of sentences into model inputs.

    Returns ``input_ids`` / ``attention_mask`` [B, S], ``labels`` [B, T] (-100 at padding) and, when
    ``structures`` are given, ``structure_mask`` [B, S, S] bool.
    """

    def __init__(self, pad_id: int, rules: ExpansionRules | None = None):
        self.pad_id = pad_id
        self.rules = rules or ExpansionRules()

    def __call__(self, sources: Sequence[Sequence[int]], targets: Sequence[Sequence[int]] | None = None,
                 structure: SourceStructure | None = None, indices: Sequence[int] | None = None) -> dict:
        b = len(sources)
        s_len = max(len(s) for s in sources)
        ids = torch.full((b, s_len), self.pad_id, dtype=torch.long)
        att = torch.zeros((b, s_len), dtype=torch.long)
        for i, s in enumerate(sources):
            ids[i, :len(s)] = torch.as_tensor(s)
            att[i, :len(s)] = 1
        batch = {"input_ids": ids, "attention_mask": att}
        if targets is not None:
            t_len = max(len(t) for t in targets)
            labels = torch.full((b, t_len), -100, dtype=torch.long)
            for i, t in enumerate(targets):
                labels[i, :len(t)] = torch.as_tensor(t)
            batch["labels"] = labels
        if structure is not None:
            if indices is None:
                raise ValueError("indices are needed to look the structures up")
            mask = torch.zeros((b, s_len, s_len), dtype=torch.bool)
            for row, idx in enumerate(indices):
                tw = structure.token_word[idx]
                m = token_mask(structure.structures[idx], tw, self.rules)
                mask[row, :len(tw), :len(tw)] = torch.from_numpy(m)
                mask[row, len(tw):, len(tw):] = torch.eye(s_len - len(tw), dtype=torch.bool)  # padding: itself
            batch["structure_mask"] = mask
        return batch
