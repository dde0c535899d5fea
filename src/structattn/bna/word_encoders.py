"""Word encoders of the chart parser: sentences of words -> ``[START, w_1 .. w_L, STOP]`` vectors.

Notation: b sentences, L words of the longest, T = L + 2 positions (rows past a sentence's ``L_b + 1`` are
padding, zeros), d the encoder's output size.

* `PretrainedWordEncoder` - a Hugging Face encoder; a word's vector is its first, last or mean
  sub-word state; START / STOP are the states of the first and last tokens the tokenizer emits
  (``[CLS]`` / ``[SEP]`` for BERT-style tokenizers).
* `CharWordEncoder` - no pretraining: a word embedding plus a character BiLSTM, learned position
  embeddings and learned START / STOP vectors (Kitaev & Klein 2018's character model).

Both take words as the parser receives them (treebank tokens such as ``-LRB-``); the pretrained encoder
unescapes them (`structattn.tasks.ptb.unescape_word`) because its tokenizer was trained on raw text.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import torch
from torch import nn

from ..errors import UserError
from .config import POOLINGS

Tensor = torch.Tensor


# Reserved entries of the CharWordEncoder vocabularies (their order is part of a saved model).
PAD, UNK = "<pad>", "<unk>"
CHAR_START, CHAR_STOP = "<w>", "</w>"


def _item_name(index: int, names: Sequence[str] | None) -> str:
    """How an error message names sentence ``index``: the caller's name (``line 7``) or ``sentence 3``."""
    return names[index] if names is not None else f"sentence {index}"


# --------------------------------------------------------------------------- pretrained encoder
class PretrainedWordEncoder(nn.Module):
    """Word vectors from a Hugging Face encoder.

    Args:
        name_or_path: model name or folder; "" =
            [`structattn.settings.default_encoder`][structattn.settings.default_encoder] (offline MiniLM).
        pooling: which sub-word state gives a word's vector: "first", "last" or "mean".
        fine_tune: False = the encoder is frozen: run under ``torch.no_grad`` and kept in eval mode.
        model, tokenizer: already built parts (used by `ChartParser.from_pretrained`); when given,
            ``name_or_path`` only names the encoder.

    ``forward(words)`` -> ``[b, T, d]`` with ``d = model.config.hidden_size``. A sentence whose sub-words
    (special tokens included) exceed `max_subwords` raises [`UserError`][structattn.errors.UserError] naming it.
    """

    def __init__(self, name_or_path: str = "", pooling: str = "first", fine_tune: bool = True, *,
                 model: nn.Module | None = None, tokenizer=None):
        super().__init__()
        if pooling not in POOLINGS:
            raise UserError(f"unknown sub-word pooling {pooling!r}; valid: {', '.join(POOLINGS)}")
        from transformers import AutoModel, AutoTokenizer

        if not name_or_path and (model is None or tokenizer is None):
            from ..settings import default_encoder
            name_or_path = default_encoder()
        self.name_or_path = name_or_path
        self.pooling = pooling
        self.fine_tune = fine_tune
        try:
            if tokenizer is None:
                tokenizer = AutoTokenizer.from_pretrained(name_or_path)
                if getattr(tokenizer, "add_prefix_space", None) is False:
                    # byte-level BPE (RoBERTa, GPT-2) refuses pre-split words unless each word gets its space
                    tokenizer = AutoTokenizer.from_pretrained(name_or_path, add_prefix_space=True)
            self.tokenizer = tokenizer
            self.model = model if model is not None else AutoModel.from_pretrained(name_or_path)
        except OSError as exc:
            raise UserError(f"could not load the encoder {name_or_path!r}: {exc}") from exc
        if not getattr(self.tokenizer, "is_fast", False):
            raise UserError(f"encoder {name_or_path!r} has no fast tokenizer; the parser needs word_ids() "
                            "to align words and sub-words")
        self.tokenizer.padding_side = "right"  # START is position 0, STOP the last real token
        self.model.float()  # transformers may load a checkpoint's half precision; the parser computes in float32
        if not fine_tune:
            for p in self.model.parameters():
                p.requires_grad_(False)
            self.model.eval()

    @property
    def output_size(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def max_subwords(self) -> int:
        """The most tokens (special tokens included) the model accepts in one sequence."""
        limits = [int(n) for n in (getattr(self.tokenizer, "model_max_length", None),
                                   getattr(self.model.config, "max_position_embeddings", None))
                  if n is not None and 0 < n < 1_000_000]  # tokenizers without a limit say 1e30
        return min(limits) if limits else 512

    def train(self, mode: bool = True):
        super().train(mode)
        if not self.fine_tune:  # a frozen encoder never runs dropout
            self.model.eval()
        return self

    def _tokenize(self, words: Sequence[Sequence[str]], names: Sequence[str] | None):
        """Sub-words of every sentence (unpadded), with word_ids; words with no sub-word become UNK."""
        from ..tasks.ptb import unescape_word

        raw = [[unescape_word(w) for w in sent] for sent in words]
        enc = self.tokenizer(raw, is_split_into_words=True, add_special_tokens=True, truncation=False)
        unk = self.tokenizer.unk_token
        redo = False
        for k, sent in enumerate(raw):
            seen = {w for w in enc.word_ids(k) if w is not None}
            if len(seen) < len(sent):  # the normaliser deleted a word (e.g. a lone control character)
                if unk is None:
                    missing = min(set(range(len(sent))) - seen)
                    raise UserError(f"{_item_name(k, names)}: word {missing + 1} ({words[k][missing]!r}) gives the "
                                    f"tokenizer of {self.name_or_path} no sub-word; remove or replace it")
                raw[k] = [w if i in seen else unk for i, w in enumerate(sent)]
                redo = True
        if redo:
            enc = self.tokenizer(raw, is_split_into_words=True, add_special_tokens=True, truncation=False)
        wid = enc.word_ids(0)
        if wid[0] is not None or wid[-1] is not None:  # START / STOP are read from the special tokens
            raise UserError(f"the tokenizer of {self.name_or_path} adds no special token before and after a "
                            "sentence; the parser needs them (BERT-style [CLS] ... [SEP] or <s> ... </s>)")
        return enc

    def check(self, words: Sequence[Sequence[str]], names: Sequence[str] | None = None) -> list[int]:
        """Sub-word counts per sentence; [`UserError`][structattn.errors.UserError] for the first one over
        `max_subwords`."""
        return self._counts_within_limit(self._tokenize(words, names), words, names)

    def _counts_within_limit(self, enc, words: Sequence[Sequence[str]], names: Sequence[str] | None) -> list[int]:
        counts = [len(ids) for ids in enc["input_ids"]]
        limit = self.max_subwords
        for k, n in enumerate(counts):
            if n > limit:
                raise UserError(f"{_item_name(k, names)}: {len(words[k])} words make {n} sub-words (special tokens "
                                f"included) but the encoder {self.name_or_path} takes at most {limit}; "
                                "split the sentence")
        return counts

    def forward(self, words: Sequence[Sequence[str]], names: Sequence[str] | None = None) -> Tensor:
        """words: b lists of words -> [b, T, d] (T = max words + 2).

        A frozen encoder (``fine_tune=False``) remembers each sentence's rows while training (grad enabled):
        its weights never change, so a sentence seen in an earlier epoch is not encoded again (this makes
        feature-based training several times faster on a CPU). Each such sentence is encoded on its own, so its
        vectors never depend on which other sentences shared its batch (a resumed run computes exactly what an
        uninterrupted one did). Without grad (parsing, evaluation) batches are encoded together, uncached.
        """
        if not self.fine_tune and torch.is_grad_enabled():
            return self._frozen_forward(words, names)
        return self._encode(words, names)

    def _frozen_forward(self, words: Sequence[Sequence[str]], names: Sequence[str] | None) -> Tensor:
        """Frozen path of `forward`: cached per-sentence rows [L_b + 2, d], padded to [b, T, d]."""
        cache = self.__dict__.setdefault("_frozen_rows", {})  # not a buffer: never saved with the weights
        rows = []
        for k, sent in enumerate(words):
            key = tuple(sent)
            if key not in cache:
                one = self._encode([sent], None if names is None else [names[k]])
                cache[key] = one[0].detach()
            rows.append(cache[key])
        T = max(r.shape[0] for r in rows)
        out = rows[0].new_zeros(len(rows), T, rows[0].shape[-1])
        for k, r in enumerate(rows):
            out[k, : r.shape[0]] = r
        return out

    def _encode(self, words: Sequence[Sequence[str]], names: Sequence[str] | None) -> Tensor:
        """Run the encoder on one batch: words -> [b, T, d]."""
        enc = self._tokenize(words, names)
        n_sub = max(self._counts_within_limit(enc, words, names))
        b = len(words)
        device = next(self.model.parameters()).device
        padded = self.tokenizer.pad({"input_ids": enc["input_ids"]}, return_tensors="pt")
        ids = padded["input_ids"].to(device)
        att = padded["attention_mask"].to(device)

        if self.fine_tune and torch.is_grad_enabled():
            states = self.model(input_ids=ids, attention_mask=att).last_hidden_state
        else:
            with torch.no_grad():
                states = self.model(input_ids=ids, attention_mask=att).last_hidden_state
        # states [b, n_sub, d]

        L = max(len(sent) for sent in words)
        T = L + 2
        # sub-word -> output row (1 + word index); rows 0 / L_b + 1 get START / STOP, padding goes to a spare row T.
        target = torch.full((b, n_sub), T, dtype=torch.long)
        for k in range(b):
            wid = enc.word_ids(k)
            n_words = len(words[k])
            first_pos: dict[int, int] = {}
            last_pos: dict[int, int] = {}
            for pos, w in enumerate(wid):
                if w is None:
                    continue
                first_pos.setdefault(w, pos)
                last_pos[w] = pos
            if self.pooling == "mean":
                for pos, w in enumerate(wid):
                    if w is not None:
                        target[k, pos] = w + 1
            else:
                chosen = first_pos if self.pooling == "first" else last_pos
                for w, pos in chosen.items():
                    target[k, pos] = w + 1
            target[k, 0] = 0  # START = the first token (CLS)
            target[k, len(wid) - 1] = n_words + 1  # STOP = the last token (SEP)
        target = target.to(device)
        out = states.new_zeros(b, T + 1, states.shape[-1])
        out.scatter_add_(1, target.unsqueeze(-1).expand_as(states), states)
        if self.pooling == "mean":
            counts = states.new_zeros(b, T + 1)
            counts.scatter_add_(1, target, states.new_ones(b, n_sub))
            out = out / counts.clamp(min=1).unsqueeze(-1)
        return out[:, :T]


# --------------------------------------------------------------------------- character encoder
def build_vocabularies(word_lists: Iterable[Sequence[str]], min_count: int = 2) -> tuple[list[str], list[str]]:
    """(words, chars) vocabularies from training sentences, sorted for determinism.

    Words are lower-cased and kept when seen at least ``min_count`` times, so the UNK embedding is trained
    on the rare words (their characters still reach the char BiLSTM). Every character seen is kept.
    Index 0 is ``<pad>``, 1 ``<unk>``; chars also reserve 2 ``<w>`` and 3 ``</w>`` (word start / end).
    """
    word_counts: Counter[str] = Counter()
    chars: set[str] = set()
    for sent in word_lists:
        for w in sent:
            word_counts[w.lower()] += 1
            chars.update(w)
    words = sorted(w for w, n in word_counts.items() if n >= min_count)
    return [PAD, UNK] + words, [PAD, UNK, CHAR_START, CHAR_STOP] + sorted(chars)


class CharWordEncoder(nn.Module):
    """Word embeddings + a character BiLSTM, for parsers without a pretrained encoder.

    A word's vector is ``Linear([word_emb(lower(w)) ; charBiLSTM(<w> c_1 .. c_n </w>)])`` (the BiLSTM's two
    final states), with dropout ``char_dropout``; a learned position embedding is added to every row, and
    rows 0 / L_b + 1 are learned START / STOP vectors (plus their positions).

    Args:
        chars, words: the vocabularies of `build_vocabularies` (saved with the model).
        d_out: output size; char_dim: character embedding size; word_dim: word embedding size;
        char_dropout: dropout on the word vectors; max_words: longest sentence (position embeddings: max_words + 2);
        char_hidden: the BiLSTM's output size, both directions together (0 = d_out).

    ``forward(words)`` -> ``[b, T, d_out]``.
    """

    def __init__(self, chars: Sequence[str], words: Sequence[str], d_out: int, char_dim: int = 64,
                 word_dim: int = 100, char_dropout: float = 0.1, max_words: int = 300, char_hidden: int = 0):
        super().__init__()
        self.chars = list(chars)
        self.words = list(words)
        self.char_index = {c: i for i, c in enumerate(self.chars)}
        self.word_index = {w: i for i, w in enumerate(self.words)}
        self.max_words = max_words
        char_hidden = max(1, (char_hidden or d_out) // 2)  # per direction
        self.char_embedding = nn.Embedding(len(self.chars), char_dim, padding_idx=0)
        self.char_lstm = nn.LSTM(char_dim, char_hidden, batch_first=True, bidirectional=True)
        self.word_embedding = nn.Embedding(len(self.words), word_dim, padding_idx=0)
        self.project = nn.Linear(word_dim + 2 * char_hidden, d_out)
        self.dropout = nn.Dropout(char_dropout)
        self.position = nn.Embedding(max_words + 2, d_out)
        self.start = nn.Parameter(torch.randn(d_out) * 0.02)
        self.stop = nn.Parameter(torch.randn(d_out) * 0.02)

    @property
    def output_size(self) -> int:
        return self.position.embedding_dim

    def _char_ids(self, word: str) -> list[int]:
        unk = self.char_index[UNK]
        inner = [self.char_index.get(c, unk) for c in word]
        return [self.char_index[CHAR_START]] + inner + [self.char_index[CHAR_STOP]]

    def _char_vectors(self, char_lists: Sequence[Sequence[int]], device: torch.device) -> Tensor:
        """N lists of character ids -> [N, 2 * char_hidden]: the BiLSTM's forward and backward final states.

        Words of one length go through the LSTM together, unpacked. A packed batch gives the same states, but on
        the CPU its backward pass writes a zero tensor the size of the whole packed input for every time step
        (one slice each); the groups cost one LSTM call per distinct length instead (about 20).
        """
        lengths = torch.tensor([len(c) for c in char_lists], dtype=torch.long)
        ids = torch.zeros(len(char_lists), int(lengths.max()), dtype=torch.long)
        for n, word in enumerate(char_lists):
            ids[n, :len(word)] = torch.tensor(word, dtype=torch.long)
        order = torch.argsort(lengths, stable=True)
        states = []
        for length, count in zip(*torch.unique_consecutive(lengths[order], return_counts=True)):
            rows, order = order[:int(count)], order[int(count):]
            # embedded per group: slicing one embedded [N, chars, char_dim] tensor would cost a zero tensor of
            # that size per group in the backward pass
            emb = self.char_embedding(ids[rows, :int(length)].to(device))  # [n, length, char_dim]
            _, (h_n, _) = self.char_lstm(emb)  # h_n [2, n, char_hidden]
            states.append((rows.to(device), torch.cat([h_n[0], h_n[1]], dim=-1)))
        rows = torch.cat([r for r, _ in states])
        out = torch.cat([v for _, v in states])  # [N, 2 * char_hidden], rows in length order
        return out.new_empty(out.shape).index_copy(0, rows, out)

    def forward(self, words: Sequence[Sequence[str]], names: Sequence[str] | None = None) -> Tensor:
        """words: b lists of words -> [b, T, d_out] (T = max words + 2)."""
        device = self.position.weight.device
        b = len(words)
        L = max(len(sent) for sent in words)
        for k, sent in enumerate(words):
            if len(sent) > self.max_words:
                raise UserError(f"{_item_name(k, names)}: {len(sent)} words, more than the parser's "
                                f"max_words={self.max_words}; split the sentence")
        flat = [w for sent in words for w in sent]  # N words in all
        unk = self.word_index[UNK]
        word_ids = torch.tensor([self.word_index.get(w.lower(), unk) for w in flat], dtype=torch.long, device=device)
        char_vec = self._char_vectors([self._char_ids(w) for w in flat], device)
        word_vec = self.dropout(self.project(torch.cat([self.word_embedding(word_ids), char_vec], dim=-1)))  # [N, d]

        out = word_vec.new_zeros(b, L + 2, word_vec.shape[-1])
        lengths = torch.tensor([len(sent) for sent in words], dtype=torch.long, device=device)
        rows = torch.arange(L + 2, device=device).unsqueeze(0)  # [1, T]
        is_word = (rows >= 1) & (rows <= lengths.unsqueeze(1))  # [b, T]
        out[is_word] = word_vec  # row-major order of is_word = sentence by sentence, word by word
        out[:, 0] = self.start
        # index_put wants one dtype; under bf16/fp16 autocast word_vec (and out) are 16-bit, the parameter is not
        out[torch.arange(b, device=device), lengths + 1] = self.stop.to(out.dtype)
        real = rows <= lengths.unsqueeze(1) + 1
        return (out + self.position(rows.expand(b, -1))) * real.unsqueeze(-1)

