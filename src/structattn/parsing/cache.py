"""On-disk cache of parses, keyed by the inputs' content and the parser's fingerprint.

Layout: ``<directory>/<key[:32]>/<shard number>.parses.jsonl``, one file per block of
``shard_size`` consecutive items (4096 by default, so SST-2 train's 67,349 items are 17 files).

Each shard file is:

* line 1, a JSON header: format name and version, full key, fingerprint, kind, shard number and
  count, index of its first item, number of items, sha256 of its items' JSON, sha256 of the payload;
* the payload: one JSON line with the label tables ``{"deprel": [...], "upos": [...]}``, then one
  JSON line per item, a list of sentences ``[sent_id, words, heads, deprel ids, upos ids]``.

Every header field is compared with what this run expects and the payload with its checksum, so a
missing, truncated, corrupt (bit flip, unparsable) or stale (other fingerprint or format version)
shard is logged as a warning and rebuilt - never reused. Files are written to a temporary file in
the same folder and moved into place with ``os.replace``, so a crash leaves either the old file or
the new one, never half a file. Complete shards are written as soon as their items are parsed, so
an interrupted run resumes where it stopped.
"""
from __future__ import annotations

import gc
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .. import settings
from .record import Parse

log = logging.getLogger(__name__)

FORMAT_NAME = "structattn-parses"
FORMAT_VERSION = 1
DEFAULT_SHARD_SIZE = 4096

# parse_fn(items, indices) -> one passage (list[Parse]) per item, in order; indices are the items'
# positions in the whole input (used in sentence ids).
ParseFn = Callable[[list, list[int]], Iterable[list[Parse]]]


@dataclass
class CacheStats:
    """What the last :meth:`ParseCache.get_or_parse` did, counted in shards and items."""

    directory: Path | None = None
    shards: int = 0
    hits: int = 0          # shards loaded from disk
    misses: int = 0        # shards absent
    rebuilt: int = 0       # shards present but corrupt or stale, parsed again
    parsed_items: int = 0  # items sent to the parser
    write_errors: int = 0  # shards that could not be written (results still returned)

    def summary(self) -> str:
        return (f"{self.hits} of {self.shards} shards from cache, {self.misses} missing, "
                f"{self.rebuilt} rebuilt (corrupt/stale); {self.parsed_items:,} items parsed")


class CacheInvalid(Exception):
    """A shard file that must not be used; the message says why."""


class ParseCache:
    """Sharded, checksummed, atomically written parse cache.

    Args:
        directory: where the cache lives; default ``settings.cache_dir() / "parses"``.
        shard_size: items per shard file.
    """

    def __init__(self, directory: str | Path | None = None, shard_size: int = DEFAULT_SHARD_SIZE):
        if shard_size < 1:
            raise ValueError("shard_size must be positive")
        self.directory = Path(directory) if directory is not None else settings.cache_dir() / "parses"
        self.shard_size = shard_size
        self.last_stats = CacheStats()

    # ------------------------------------------------------------------ keys
    def _shard_digests(self, items: Sequence) -> list[str]:
        """sha256 of each shard's items, as compact JSON (one ``json.dumps`` per shard)."""
        return [hashlib.sha256(_dumps(list(items[s:s + self.shard_size])).encode()).hexdigest()
                for s in range(0, len(items), self.shard_size)]

    def key(self, items: Sequence, fingerprint: str, kind: str, options: dict | None = None) -> str:
        """The cache key of ``items`` parsed by a parser with this fingerprint (hex sha256)."""
        return self._key(self._shard_digests(items), len(items), fingerprint, kind, options)

    def _key(self, digests, n_items, fingerprint, kind, options) -> str:
        h = hashlib.sha256()
        h.update(_dumps([FORMAT_NAME, FORMAT_VERSION, kind, fingerprint, options or {},
                         self.shard_size, n_items, digests]).encode())
        return h.hexdigest()

    def folder(self, key: str) -> Path:
        return self.directory / key[:32]

    # ------------------------------------------------------------------ main entry
    def get_or_parse(self, items: Sequence, parse_fn: ParseFn, fingerprint: str, kind: str,
                     options: dict | None = None,
                     progress: Callable[[int], None] | None = None) -> list[list[Parse]]:
        """Passages for ``items`` (``len(items)`` lists of :class:`Parse`), from disk where possible.

        Args:
            items: texts (``kind="texts"``) or word lists (``kind="words"``), or anything JSON-able.
            parse_fn: called once with the items of every shard not usable from disk and their
                global indices; must yield one passage per item, in order.
            fingerprint: the parser's fingerprint (model, versions, options).
            progress: called with the number of items done (loaded or parsed).
        """
        items = list(items)
        digests = self._shard_digests(items)
        key = self._key(digests, len(items), fingerprint, kind, options)
        folder = self.folder(key)
        n_shards = len(digests)
        stats = CacheStats(directory=folder, shards=n_shards)
        self.last_stats = stats
        results: list[list[Parse] | None] = [None] * len(items)

        def expected_header(shard: int) -> dict:
            start = shard * self.shard_size
            return {"format": FORMAT_NAME, "version": FORMAT_VERSION, "key": key, "fingerprint": fingerprint,
                    "kind": kind, "shard": shard, "shards": n_shards, "first_index": start,
                    "count": min(self.shard_size, len(items) - start), "items_sha256": digests[shard]}

        todo: list[int] = []
        for shard in range(n_shards):
            path = self._shard_path(folder, shard)
            if not path.exists():
                stats.misses += 1
                todo.append(shard)
                continue
            try:
                passages = read_shard(path, expected_header(shard))
            except CacheInvalid as exc:
                log.warning("parse cache: %s is unusable (%s); parsing these items again", path, exc)
                stats.rebuilt += 1
                todo.append(shard)
                continue
            start = shard * self.shard_size
            results[start:start + len(passages)] = passages
            stats.hits += 1
            if progress is not None:
                progress(len(passages))

        if todo:
            self._parse_missing(items, todo, parse_fn, expected_header, folder, results, stats, progress)
        return results  # type: ignore[return-value]

    def _parse_missing(self, items, todo, parse_fn, expected_header, folder, results, stats, progress):
        indices = [i for shard in todo
                   for i in range(shard * self.shard_size, min((shard + 1) * self.shard_size, len(items)))]
        stats.parsed_items = len(indices)
        pending = iter(todo)
        shard = next(pending)
        shard_end = min((shard + 1) * self.shard_size, len(items))
        produced = 0
        stream = iter(parse_fn([items[i] for i in indices], indices))
        for index in indices:
            try:
                passage = next(stream)
            except StopIteration:
                raise RuntimeError(f"parse_fn returned {produced} passages for {len(indices)} items") from None
            results[index] = list(passage)
            produced += 1
            if progress is not None:
                progress(1)
            if index + 1 == shard_end:  # this shard is complete: write it now (resumable runs)
                start = shard * self.shard_size
                try:
                    write_shard(self._shard_path(folder, shard), expected_header(shard), results[start:shard_end])
                except OSError as exc:
                    stats.write_errors += 1
                    log.warning("parse cache: could not write %s (%s); results are not cached",
                                self._shard_path(folder, shard), exc)
                shard = next(pending, None)
                if shard is not None:
                    shard_end = min((shard + 1) * self.shard_size, len(items))

    @staticmethod
    def _shard_path(folder: Path, shard: int) -> Path:
        return folder / f"{shard:05d}.parses.jsonl"


# ---------------------------------------------------------------------- file format
def _dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def encode_payload(passages: Sequence[Sequence[Parse]]) -> bytes:
    """Label tables line + one line per passage (see the module docstring)."""
    deprel_ids: dict[str, int] = {}
    upos_ids: dict[str, int] = {}
    lines = []
    for passage in passages:
        row = []
        for p in passage:
            d = [deprel_ids.setdefault(x, len(deprel_ids)) for x in p.deprels]
            u = [upos_ids.setdefault(x, len(upos_ids)) for x in p.upos]
            row.append([p.sent_id, list(p.words), list(p.heads), d, u])
        lines.append(_dumps(row))
    table = _dumps({"deprel": list(deprel_ids), "upos": list(upos_ids)})
    return ("\n".join([table, *lines]) + "\n").encode("utf-8")


def decode_payload(payload: bytes, count: int) -> list[list[Parse]]:
    """Inverse of :func:`encode_payload`; raises ValueError/KeyError/TypeError/IndexError on bad data."""
    lines = payload.decode("utf-8").split("\n")
    if lines[-1] != "":
        raise ValueError("payload does not end with a newline")
    table = json.loads(lines[0])
    deprels, upos = table["deprel"], table["upos"]
    rows = lines[1:-1]
    if len(rows) != count:
        raise ValueError(f"{len(rows)} items in payload, header says {count}")
    # Decoding makes millions of small acyclic objects; with the cyclic GC running it would rescan
    # them over and over (half of the load time on SST-2), so it is paused meanwhile.
    with _gc_paused():
        decoded = json.loads("[" + ",".join(rows) + "]")
        return [[Parse(tuple(words), tuple(heads), tuple([deprels[i] for i in d]),
                       tuple([upos[i] for i in u]), sent_id)
                 for sent_id, words, heads, d, u in item] for item in decoded]


@contextmanager
def _gc_paused():
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def write_shard(path: Path, header: dict, passages: Sequence[Sequence[Parse]]) -> None:
    """Write one shard file atomically."""
    payload = encode_payload(passages)
    full = dict(header, payload_sha256=hashlib.sha256(payload).hexdigest())
    write_atomic(path, [(_dumps(full) + "\n").encode("utf-8"), payload])


def read_shard(path: Path, expected: dict) -> list[list[Parse]]:
    """Load a shard; raise :class:`CacheInvalid` unless header and checksum match ``expected``."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CacheInvalid(f"unreadable: {exc}") from exc
    newline = data.find(b"\n")
    if newline < 0:
        raise CacheInvalid("truncated: no header line")
    try:
        header = json.loads(data[:newline])
    except ValueError as exc:
        raise CacheInvalid(f"corrupt header: {exc}") from exc
    if not isinstance(header, dict):
        raise CacheInvalid("corrupt header: not an object")
    checksum = header.pop("payload_sha256", None)
    if header.get("format") != FORMAT_NAME or header.get("version") != FORMAT_VERSION:
        raise CacheInvalid(f"stale: format {header.get('format')!r} version {header.get('version')!r}, "
                           f"expected {FORMAT_NAME!r} version {FORMAT_VERSION}")
    if header.get("fingerprint") != expected["fingerprint"]:
        raise CacheInvalid(f"stale: made by {header.get('fingerprint')!r}, expected {expected['fingerprint']!r}")
    if header != expected:
        wrong = sorted(k for k in set(header) | set(expected) if header.get(k) != expected.get(k))
        raise CacheInvalid(f"header does not match this input (fields {', '.join(wrong)})")
    payload = data[newline + 1:]
    if hashlib.sha256(payload).hexdigest() != checksum:
        raise CacheInvalid("checksum mismatch (truncated or corrupt payload)")
    try:
        return decode_payload(payload, expected["count"])
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise CacheInvalid(f"corrupt payload: {exc}") from exc


def write_atomic(path: Path, chunks: Iterable[bytes]) -> None:
    """Write ``chunks`` to ``path`` via a temporary file in the same folder and ``os.replace``.

    On any exception the temporary file is removed and ``path`` is left as it was.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            for chunk in chunks:
                handle.write(chunk)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; cache files are not secret
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


# ---------------------------------------------------------------------- convenience
def parse_cached(items: Sequence, parser, cache: ParseCache | None = None, kind: str | None = None,
                 progress: Callable[[int], None] | None = None) -> list[list[Parse]]:
    """Parse ``items`` with ``parser`` (e.g. :class:`~structattn.parsing.spacy_backend.SpacyParser`)
    through ``cache`` (default: a :class:`ParseCache` in the default folder).

    ``kind`` is ``"texts"`` (strings) or ``"words"`` (lists of words); by default it is inferred
    from the first item. The parser needs ``fingerprint()``, ``iter_texts`` and ``iter_words``
    taking ``(items, indices=..., progress=...)``. Statistics: ``cache.last_stats``.
    """
    items = list(items)
    if kind is None:
        kind = "texts" if items and isinstance(items[0], str) else "words"
    if kind not in ("texts", "words"):
        raise ValueError(f"kind must be 'texts' or 'words', not {kind!r}")
    # Check every item before anything is read or parsed, so a bad item fails fast.
    from .spacy_backend import check_texts, check_word_lists

    (check_texts if kind == "texts" else check_word_lists)(items)
    cache = cache if cache is not None else ParseCache()
    method = parser.iter_texts if kind == "texts" else parser.iter_words

    def parse_fn(chunk, indices):
        return method(chunk, indices=indices)

    return cache.get_or_parse(items, parse_fn, parser.fingerprint(), kind, progress=progress)
