"""From texts to a model-ready batch in one call: tokens, padding mask and the mechanism's structure mask.

    processor = structattn.StructureProcessor.from_pretrained(folder)     # tokenizer + mechanism + parser
    batch = processor(["The cat sat.", "It purred."], padding=True, return_tensors="pt")
    model(**batch)                                                         # structure_mask [2, T, T] bool

Like transformers' processors: ``from_pretrained`` / ``save_pretrained`` / ``__call__`` returning a
``BatchEncoding``. The mechanism (and so the word relation and the sub-word rules) is read from the model's
``config.json``; the dependency parser (a spaCy pipeline) is loaded once per processor, on first use, and every
parse goes through the on-disk parse cache.

Raw text is split into words by the dependency parser, whatever the mechanism (so that models compared under
different mechanisms see the same tokens); ``is_split_into_words=True`` takes the words as given.
"""
from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..attention.mechanisms import MechanismConfig, get_mechanism, option_names
from ..errors import UserError
from ..settings import DEFAULT_SPACY_MODEL
from ..structure import build_word_structures, encode_words, token_mask
from ..structure.align import check_fast_tokenizer
from ..structure.spec import StructureSpec

log = logging.getLogger(__name__)

#: the processor's own settings file, beside the tokenizer's files
PROCESSOR_FILE = "structattn_processor.json"
#: truncation values taken (transformers' names; a pair loses tokens from its longer segment first)
_TRUNCATION = {True: True, "longest_first": True, False: False, "do_not_truncate": False, None: False}


class StructureProcessor:
    """Texts (or pre-split words) -> ``input_ids``, ``attention_mask`` (``token_type_ids`` where the model has
    them) and ``structure_mask``.

    Args:
        tokenizer: a fast Hugging Face tokenizer (byte-level BPE ones need ``add_prefix_space=True``).
        mechanism: the model's mechanism (a name of ``structattn.MECHANISMS``, a dict or a
            [`MechanismConfig`][structattn.attention.mechanisms.MechanismConfig]); it decides the word relation.
        parser: an installed spaCy pipeline name or folder (the dependency parser).
        options: mechanism options (``m``, ``k`` ...), as ``structattn.from_pretrained`` takes them.
    """

    def __init__(self, tokenizer, mechanism: str | dict | MechanismConfig, parser: str = DEFAULT_SPACY_MODEL,
                 **options: Any):
        check_fast_tokenizer(tokenizer)
        self.tokenizer = tokenizer
        self.mechanism = get_mechanism(mechanism, **options)
        self.spec = StructureSpec.for_mechanism(self.mechanism)
        self.parser_name = parser
        self._parser = None
        self.model_input_names = [*tokenizer.model_input_names, "structure_mask"]

    # ------------------------------------------------------------------ loading and saving
    @classmethod
    def from_pretrained(cls, name_or_path: str | Path, mechanism: str | dict | MechanismConfig | None = None,
                        parser: str | None = None, **options: Any) -> "StructureProcessor":
        """The processor of a saved model (its tokenizer and the mechanism in its ``config.json``), of a folder
        written by [`save_pretrained`][structattn.models.processor.StructureProcessor.save_pretrained], or of a stock
        model with ``mechanism=`` named.

        ``options``: mechanism options (``m``, ``k`` ...) override the saved ones; the rest go to
        ``AutoTokenizer.from_pretrained``."""
        from transformers import AutoTokenizer

        mech_options = {k: options.pop(k) for k in list(options) if k in option_names()}
        saved = _saved_settings(Path(name_or_path))
        if mechanism is None:
            mechanism = saved.get("mechanism")
        if mechanism is None:
            raise UserError(f"{name_or_path} names no structattn mechanism (no 'structattn' entry in its config.json "
                            f"and no {PROCESSOR_FILE}): pass mechanism='sla' (or another of structattn.MECHANISMS)")
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(name_or_path), **options)
        except OSError as exc:
            raise UserError(f"cannot load a tokenizer from {str(name_or_path)!r}: {exc}") from exc
        return cls(tokenizer, get_mechanism(mechanism, **mech_options),
                   parser=parser or saved.get("parser") or DEFAULT_SPACY_MODEL)

    def save_pretrained(self, folder: str | Path) -> None:
        """Write the tokenizer's files and `PROCESSOR_FILE` (mechanism and parser) into ``folder``."""
        from importlib import metadata

        from ..io import atomic_write_text

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.tokenizer.save_pretrained(str(folder))
        settings = {"mechanism": self.mechanism.to_dict(), "parser": self.parser_name,
                    "structattn_version": metadata.version("structattn")}
        atomic_write_text(folder / PROCESSOR_FILE, json.dumps(settings, indent=2, sort_keys=True) + "\n")

    @property
    def parser(self):
        """The dependency parser ([`SpacyParser`][structattn.dependency.spacy_backend.SpacyParser]), made once."""
        if self._parser is None:
            from ..dependency.spacy_backend import SpacyParser

            self._parser = SpacyParser(model=self.parser_name)
        return self._parser

    def __getstate__(self) -> dict:
        # datasets.map pickles the function it runs (to fingerprint it, and for num_proc): not the loaded pipeline
        return {**self.__dict__, "_parser": None}

    def __repr__(self) -> str:
        return (f"StructureProcessor(tokenizer={type(self.tokenizer).__name__}, mechanism={self.mechanism.name!r}, "
                f"relation={self.spec.relation!r}, parser={self.parser_name!r})")

    # ------------------------------------------------------------------ texts -> batch
    def __call__(self, text, text_pair=None, *, is_split_into_words: bool = False,
                 truncation: bool | str | None = None, max_length: int | None = None,
                 padding: bool | str = False, pad_to_multiple_of: int | None = None,
                 return_tensors: str | None = None):
        """Encode one example or a batch.

        Args:
            text: a string, a list of strings, or with ``is_split_into_words=True`` a list of words (one example)
                or a list of word lists.
            text_pair: the second segments, shaped like ``text``, or None.
            truncation: ``True`` / ``"longest_first"`` cut each example to ``max_length`` tokens (default: the
                tokenizer's ``model_max_length``); ``False`` / None keep every token.
            padding: ``False``, ``True`` / ``"longest"`` (to the longest of the batch) or ``"max_length"``.
            return_tensors: None (lists; ``structure_mask`` a numpy ``[T_i, T_i]`` bool array per example),
                ``"pt"`` or ``"np"`` (padded; ``structure_mask`` ``[B, T, T]`` bool).

        Returns:
            a ``BatchEncoding``: ``input_ids``, ``attention_mask``, ``token_type_ids`` (where the tokenizer has
            them), ``structure_mask`` (True = the query row may attend the key column); unbatched for one example,
            as tokenizers return it.
        """
        from transformers import BatchEncoding

        batched, first = _as_batch(text, is_split_into_words, "text")
        second = None
        if text_pair is not None:
            pair_batched, second = _as_batch(text_pair, is_split_into_words, "text_pair")
            if pair_batched != batched or len(second) != len(first):
                raise UserError(f"text has {len(first)} example(s) and text_pair {len(second)}: give one second "
                                "segment per example")
        features = self.encode(first, second, is_split_into_words=is_split_into_words,
                               max_length=_length_limit(self.tokenizer, truncation, max_length))
        if padding or return_tensors is not None:
            data = self._padded(features, padding, max_length, pad_to_multiple_of, return_tensors)
            if not batched and return_tensors is None:
                data = {k: v[0] for k, v in data.items()}
            return BatchEncoding(data, tensor_type=return_tensors)
        keys = [k for k in (*self.tokenizer.model_input_names, "structure_mask") if k in features[0]]
        data = {k: [f[k] for f in features] for k in keys}
        return BatchEncoding(data if batched else {k: v[0] for k, v in data.items()})

    def encode(self, first: Sequence, second: Sequence | None = None, *, is_split_into_words: bool = False,
               max_length: int | None = None) -> list[dict]:
        """One feature dict per example (``input_ids``, ``attention_mask``, ``token_type_ids`` where the tokenizer
        has them, lists of length T_i; ``structure_mask`` ``[T_i, T_i]`` bool): what `__call__` pads."""
        kind = "words" if is_split_into_words else "texts"
        passages_a = self._parses(first, kind)
        passages_b = None if second is None else self._parses(second, kind)
        structures = build_word_structures(passages_a, passages_b, self.spec.relation or "all", **self.spec.options)
        features, cut = [], 0
        for i, structure in enumerate(structures):
            words_b = None if passages_b is None else _words(passages_b[i])
            (window,) = encode_words(self.tokenizer, _words(passages_a[i]), words_b,
                                     max_length=max_length or sys.maxsize, long_inputs="truncate",
                                     example_index=i)
            cut += bool(window.dropped_tokens)
            feature = {"input_ids": window.input_ids, "attention_mask": window.attention_mask,
                       "structure_mask": token_mask(structure, np.asarray(window.token_word), self.spec.rules)}
            if window.token_type_ids is not None:
                feature["token_type_ids"] = window.token_type_ids
            features.append(feature)
        if cut:
            log.info("structattn: %d of %d example(s) truncated to %d tokens", cut, len(features), max_length)
        return features

    def _parses(self, items: Sequence, kind: str) -> list[list]:
        """Per example its sentences' parses: the parser's (through the cache) where the relation reads the tree
        or the words come as raw text; a placeholder chain over given words otherwise (no parser loaded)."""
        if kind == "texts" or self.spec.needs_parse:
            from ..dependency.cache import parse_cached

            return parse_cached([list(x) if kind == "words" else x for x in items], self.parser, kind=kind)
        from ..dependency import Parse

        return [[Parse.chain(list(words))] for words in items]

    def _padded(self, features: list[dict], padding, max_length, pad_to_multiple_of, return_tensors) -> dict:
        from .data_collator import StructureDataCollator

        if padding not in (False, True, "longest", "max_length", "do_not_pad"):
            raise UserError(f"padding={padding!r} is not one of False, True, 'longest', 'max_length'")
        lengths = {len(f["input_ids"]) for f in features}
        if padding in (False, "do_not_pad") and len(lengths) > 1:
            raise UserError(f"the examples have {len(lengths)} different lengths: pass padding=True to return "
                            f"tensors ({return_tensors!r})")
        length = None
        if padding == "max_length":
            length = max_length or self.tokenizer.model_max_length
            if max(lengths) > length:
                raise UserError(f"an example has {max(lengths)} tokens, more than max_length={length}: pass "
                                "truncation=True or a larger max_length")
        batch = StructureDataCollator(self, pad_to_multiple_of=pad_to_multiple_of, length=length)(features)
        if return_tensors == "pt":
            return batch
        return {k: v.numpy() if return_tensors == "np" else v.tolist() if k != "structure_mask" else list(v.numpy())
                for k, v in batch.items()}


def _saved_settings(folder: Path) -> dict:
    """The mechanism and parser a folder records: `PROCESSOR_FILE`, else ``config.json``'s ``structattn``."""
    from ..config_io import read_json

    if (folder / PROCESSOR_FILE).is_file():
        return read_json(folder / PROCESSOR_FILE, "processor settings")
    if (folder / "config.json").is_file():
        config = read_json(folder / "config.json", "model config")
        if isinstance(config, dict) and isinstance(config.get("structattn"), dict):
            return {"mechanism": config["structattn"]}
    return {}


def _as_batch(value, is_split_into_words: bool, name: str) -> tuple[bool, list]:
    """(batched, examples): one string / one word list becomes a batch of one."""
    if isinstance(value, str):
        if is_split_into_words:
            raise UserError(f"{name} is a string but is_split_into_words=True: give a list of words")
        return False, [value]
    if not isinstance(value, (list, tuple)) or not value:
        raise UserError(f"{name} must be a string, a non-empty list of strings or (is_split_into_words=True) of "
                        f"word lists; got {type(value).__name__}")
    if is_split_into_words:
        if all(isinstance(w, str) for w in value):
            return False, [list(value)]
        if all(isinstance(ws, (list, tuple)) and all(isinstance(w, str) for w in ws) for ws in value):
            return True, [list(ws) for ws in value]
        raise UserError(f"{name}: with is_split_into_words=True give a list of words or a list of word lists")
    if not all(isinstance(t, str) for t in value):
        raise UserError(f"{name}: give strings (or pass is_split_into_words=True for lists of words)")
    return True, list(value)


def _words(passage) -> list[str]:
    return [w for sentence in passage for w in sentence.words]


def _length_limit(tokenizer, truncation, max_length: int | None) -> int | None:
    """Tokens per example under ``truncation`` (None: no limit)."""
    if truncation not in _TRUNCATION:
        raise UserError(f"truncation={truncation!r} is not taken: use True ('longest_first') or False")
    if not _TRUNCATION[truncation]:
        return None
    limit = max_length or tokenizer.model_max_length
    if limit > 1_000_000:  # transformers' "no limit" sentinel
        raise UserError("the tokenizer records no model_max_length: pass max_length with truncation=True")
    return int(limit)
