"""Raw text to words with character offsets, for tasks that come as running text (SQuAD passages and
questions, RACE and MCTest stories).

Words are the tokens of spaCy's rule-based English tokenizer (``spacy.blank("en")``: no model, no
statistics, the same answer on every machine), whitespace tokens dropped. It splits punctuation and
clitics off words (``Normandy's`` -> ``Normandy`` ``'s``; ``(1066)`` -> ``(`` ``1066`` ``)``), so a SQuAD
answer usually starts and ends on a word boundary, and the parser sees the words it was trained on. Each
word keeps its ``[start, end)`` character span in the text, so a predicted span of words maps back to the
exact substring of the original text.

Many texts at once (`words_with_offsets_many`) go through an on-disk cache of word spans,
content-addressed per text (``<cache>/words/v1/*.npz``,
[`structattn.settings.cache_dir`][structattn.settings.cache_dir]): SQuAD 1.1 train's 106k texts take about 30 s to
tokenise on one core, and every run, seed and resume reads them again. The cache also lets a machine without spaCy (a
GPU machine that got only the cache folder) build the same features. A shard is used only when it was written by the
spaCy version installed here; where spaCy is not installed, the shards of any version are used (there is nothing to
compare with) and a text they miss is an error that says so. A shard that fails to load is reported and ignored.
"""
from __future__ import annotations

import hashlib
import logging
import os
from functools import lru_cache
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

CACHE_SUBDIR = Path("words") / "v1"
_KEY_BYTES = 16   # of each text's sha256


@lru_cache(maxsize=1)
def _tokenizer():
    import spacy

    return spacy.blank("en").tokenizer


def _tokenize(text: str) -> list[tuple[int, int]]:
    spans = []
    for token in _tokenizer()(text):
        if token.is_space or not token.text.strip():
            continue
        spans.append((token.idx, token.idx + len(token.text)))
    return spans


def words_with_offsets(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """The words of ``text`` and their ``[start, end)`` character spans, in order.

    ``text[start:end] == word`` for every word; whitespace never belongs to a word; a text of only
    whitespace gives no words.
    """
    spans = _tokenize(text)
    return [text[s:e] for s, e in spans], spans


def words_of(text: str) -> list[str]:
    """Just the words of `words_with_offsets`."""
    return words_with_offsets(text)[0]


# ------------------------------------------------------------------------------------------------ cache
def _spacy_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("spacy")
    except Exception:   # not installed
        return None


def _text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()[:_KEY_BYTES]


def _cache_folder() -> Path:
    from ..settings import cache_dir

    return cache_dir() / CACHE_SUBDIR


def _load_shards(folder: Path, spacy_version: str | None) -> dict[bytes, np.ndarray]:
    """Text key -> ``[n_words, 2]`` int32 spans, from every usable shard in ``folder``."""
    index: dict[bytes, np.ndarray] = {}
    for path in sorted(folder.glob("*.npz")):
        try:
            with np.load(path, allow_pickle=False) as shard:
                written_by = str(shard["spacy_version"])
                if spacy_version is not None and written_by != spacy_version:
                    continue
                keys, counts, spans = shard["keys"], shard["counts"], shard["spans"]
        except Exception as exc:   # torn or foreign file: tokenise again
            log.warning("word cache: ignoring %s (%s: %s)", path, type(exc).__name__, exc)
            continue
        ends = np.cumsum(counts)
        for key, end, n in zip(keys, ends, counts):
            index[key.tobytes()] = spans[end - n:end]
    return index


# The shards loaded in this process, kept while the folder's shard list is unchanged (forked workers share it).
_LOADED: dict = {"key": None, "index": {}}


def _shard_list(folder: Path) -> tuple:
    return tuple(sorted((p.name, p.stat().st_size) for p in folder.glob("*.npz"))) if folder.is_dir() else ()


def _index(folder: Path, spacy_version: str | None) -> dict[bytes, np.ndarray]:
    key = (str(folder), spacy_version, _shard_list(folder))
    if _LOADED["key"] != key:
        _LOADED.update(key=key, index=_load_shards(folder, spacy_version) if key[2] else {})
    return _LOADED["index"]


def _write_shard(folder: Path, items: dict[bytes, list[tuple[int, int]]], spacy_version: str) -> None:
    """One new shard holding ``items`` (written to a temporary file and moved into place)."""
    folder.mkdir(parents=True, exist_ok=True)
    keys = np.frombuffer(b"".join(items), dtype=np.uint8).reshape(len(items), _KEY_BYTES)
    counts = np.array([len(s) for s in items.values()], dtype=np.int64)
    spans = np.array([pair for s in items.values() for pair in s], dtype=np.int32).reshape(-1, 2)
    name = hashlib.sha256(keys.tobytes()).hexdigest()[:20] + ".npz"
    tmp = folder / f".{name}.{os.getpid()}.tmp.npz"
    np.savez(tmp, keys=keys, counts=counts, spans=spans, spacy_version=np.array(spacy_version))
    os.replace(tmp, folder / name)


def words_with_offsets_many(texts: list[str]) -> list[tuple[list[str], list[tuple[int, int]]]]:
    """`words_with_offsets` of every text, through the on-disk cache (module docstring).

    Texts the cache misses are tokenised with spaCy and added to it as one new shard.
    """
    from ..errors import UserError

    folder = _cache_folder()
    version = _spacy_version()
    index = _index(folder, version)
    keys = [_text_key(t) for t in texts]
    missing = {k: t for k, t in zip(keys, texts) if k not in index}
    if missing:
        if version is None:
            raise UserError(f"{len(missing):,} of {len(texts):,} texts are not in the word cache ({folder}) and "
                            "spaCy is not installed to tokenise them: install spaCy (pip install -e .), or "
                            "build the cache where it is installed and copy the folder here (STRUCTATTN_CACHE)")
        new = {k: _tokenize(t) for k, t in missing.items()}
        index.update({k: np.asarray(v, dtype=np.int32).reshape(-1, 2) for k, v in new.items()})
        try:
            _write_shard(folder, new, version)
            _LOADED["key"] = (str(folder), version, _shard_list(folder))   # the new shard is in ``index``
        except OSError as exc:   # a read-only cache still gives the words
            log.warning("word cache: could not write to %s (%s)", folder, exc)
    out = []
    for key, text in zip(keys, texts):
        spans = [(int(s), int(e)) for s, e in index[key]]
        out.append(([text[s:e] for s, e in spans], spans))
    return out
