"""On-disk parse cache, content-addressed per item, so subsets and supersets of an input reuse it.

Layout::

    <directory>/v2/<namespace>/namespace.json   fingerprint, kind, options, format; touched on every use
    <directory>/v2/<namespace>/<b>.jsonl        16 bucket files, b = the first hex digit of an entry's key

A namespace is one (format version, parser fingerprint, kind, options); its id is the first 32 hex digits
of their sha256. An item's key is the sha256 of the namespace id and the item as compact JSON: the same
item parsed by the same parser has the same key wherever it sits in whatever input, so a subset
(``--max-train-examples``), a superset (one added example) or another split sharing items parses only
the items that are new. Identical items in one input are parsed once.

A bucket file is:

* line 1, a JSON header: format name and version, namespace id, fingerprint, kind and bucket name;
* one line per entry, ``<key> <check> <payload>``: ``check`` is the first 16 hex digits of the sha256
  of key and payload, the payload the JSON list of the item's sentences
  ``[relative, sent_id, words, heads, deprels, upos]``.

A bucket whose header is unreadable or names another format, namespace, fingerprint, kind or bucket is
stale, an entry whose check or JSON fails is corrupt: both are logged as a warning and their items parsed
again, never reused, and rewriting the bucket drops them. Files are written to a temporary file in the
same folder and moved into place with ``os.replace``, so a crash leaves either the old file or the new
one (there is no fsync: a file torn by a power loss fails its checks and is parsed again). New entries
are written after ``flush_items`` parsed items and then whenever the unwritten ones are as many as the
written ones, so an interrupted run resumes where it stopped and loses at most half of its work. Two
processes adding to one bucket at the same moment can lose one's additions (parsed again next time),
never mix them.

Sentence ids: parsers name sentences after the item's position in the input (``"12"``, ``"12.2"``). An
id that is the item's index, or that index and a dot and more, is stored relative to the index
(``relative`` = 1) and rebuilt for the position the item has now; any other id is stored as it is.

Anything else under ``<directory>`` (such as the per-input shard folders of format 1) is another format:
never read, listed by :func:`cache_info` and removed by :func:`prune`.
"""
from __future__ import annotations

import gc
import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .. import settings
from .record import Parse

log = logging.getLogger(__name__)

FORMAT_NAME = "structattn-parses"
FORMAT_VERSION = 2
VERSION_DIR = f"v{FORMAT_VERSION}"
NAMESPACE_FILE = "namespace.json"
BUCKET_SUFFIX = ".jsonl"
DEFAULT_FLUSH_ITEMS = 4096
# Few buckets: opening a file costs more than scanning a few thousand lines, and every lookup of more
# than a handful of items touches every bucket anyway (keys are spread evenly).
BUCKET_DIGITS = 1
_KEY_LEN = 64    # hex digits of an entry key
_CHECK_LEN = 16  # hex digits of an entry check

# parse_fn(items, indices) -> one passage (list[Parse]) per item, in order; indices are the items'
# positions in the whole input (used in sentence ids).
ParseFn = Callable[[list, list[int]], Iterable[list[Parse]]]


@dataclass
class CacheStats:
    """What the last :meth:`ParseCache.get_or_parse` did, counted in items."""

    directory: Path | None = None
    items: int = 0
    hits: int = 0          # items loaded from disk
    misses: int = 0        # items without an entry
    rebuilt: int = 0       # items whose entry or bucket file was corrupt or stale, parsed again
    parsed_items: int = 0  # distinct items sent to the parser
    write_errors: int = 0  # bucket files that could not be written (results still returned)

    def summary(self) -> str:
        return (f"{self.hits:,} of {self.items:,} items from cache, {self.misses:,} new, "
                f"{self.rebuilt:,} rebuilt (corrupt/stale); {self.parsed_items:,} items parsed")


class CacheInvalid(Exception):
    """A bucket file that must not be used; the message says why."""


@dataclass
class Namespace:
    """One (format, fingerprint, kind, options): where its buckets live and how its keys are made."""

    directory: Path
    fingerprint: str
    kind: str
    options: dict = field(default_factory=dict)

    def __post_init__(self):
        self.id = hashlib.sha256(_dumps([FORMAT_NAME, FORMAT_VERSION, self.kind, self.fingerprint,
                                         self.options]).encode()).hexdigest()[:32]
        self.folder = self.directory / VERSION_DIR / self.id
        self._hasher = hashlib.sha256(self.id.encode() + b"\n")

    def key(self, item) -> str:
        """The entry key of one item (hex sha256 of the namespace id and the item's JSON)."""
        h = self._hasher.copy()
        h.update(_dumps(item).encode("utf-8"))
        return h.hexdigest()

    def record(self) -> dict:
        """The content of ``namespace.json``."""
        return {"format": FORMAT_NAME, "version": FORMAT_VERSION, "namespace": self.id,
                "fingerprint": self.fingerprint, "kind": self.kind, "options": self.options}

    def bucket_header(self, bucket: str) -> dict:
        return {"format": FORMAT_NAME, "version": FORMAT_VERSION, "namespace": self.id,
                "fingerprint": self.fingerprint, "kind": self.kind, "bucket": bucket}

    def bucket_path(self, bucket: str) -> Path:
        return self.folder / f"{bucket}{BUCKET_SUFFIX}"


class ParseCache:
    """Content-addressed, checksummed, atomically written parse cache.

    Args:
        directory: where the cache lives; default ``settings.cache_dir() / "parses"``.
        flush_items: new entries are first written after this many parsed items (see the module docstring).
    """

    def __init__(self, directory: str | Path | None = None, flush_items: int = DEFAULT_FLUSH_ITEMS):
        if flush_items < 1:
            raise ValueError("flush_items must be positive")
        self.directory = Path(directory) if directory is not None else settings.parse_cache_dir()
        self.flush_items = flush_items
        self.last_stats = CacheStats()

    def namespace(self, fingerprint: str, kind: str, options: dict | None = None) -> Namespace:
        return Namespace(self.directory, fingerprint, kind, dict(options or {}))

    def key(self, item, fingerprint: str, kind: str, options: dict | None = None) -> str:
        """The entry key of ``item`` parsed by a parser with this fingerprint (hex sha256)."""
        return self.namespace(fingerprint, kind, options).key(item)

    def folder(self, fingerprint: str, kind: str, options: dict | None = None) -> Path:
        """The folder holding the entries of this fingerprint, kind and options."""
        return self.namespace(fingerprint, kind, options).folder

    # ------------------------------------------------------------------ main entry
    def get_or_parse(self, items: Sequence, parse_fn: ParseFn, fingerprint: str, kind: str,
                     options: dict | None = None,
                     progress: Callable[[int], None] | None = None) -> list[list[Parse]]:
        """Passages for ``items`` (``len(items)`` lists of :class:`Parse`), from disk where possible.

        Args:
            items: texts (``kind="texts"``) or word lists (``kind="words"``), or anything JSON-able.
            parse_fn: called once with the distinct items that have no usable entry and the index of
                each one's first occurrence; must yield one passage per item, in order.
            fingerprint: the parser's fingerprint (model, versions, options).
            progress: called with the number of items done (loaded or parsed).
        """
        items = list(items)
        ns = self.namespace(fingerprint, kind, options)
        keys = [ns.key(item) for item in items]
        stats = CacheStats(directory=ns.folder, items=len(items))
        self.last_stats = stats
        results: list[list[Parse] | None] = [None] * len(items)
        missing: dict[str, list[int]] = {}  # key -> positions, in order of first occurrence
        # Loading makes millions of small acyclic objects; with the cyclic GC running it would rescan
        # them over and over (half of the load time on SST-2), so it is paused meanwhile.
        with _gc_paused():
            found, bad = _load(ns, set(keys))
            for index, key in enumerate(keys):
                if key in found:
                    try:
                        results[index] = _passage(found[key], index)
                        continue
                    except (ValueError, TypeError) as exc:  # checksum fine, content not: a writer's bug
                        log.warning("parse cache: entry %s is malformed (%s); parsing it again", key, exc)
                        del found[key]
                        bad.add(key)
                missing.setdefault(key, []).append(index)
                if key in bad:
                    stats.rebuilt += 1
                else:
                    stats.misses += 1
            del found  # freed while the GC is off: the collection when it is back on has less to scan
        stats.hits = len(items) - stats.misses - stats.rebuilt
        if progress is not None and stats.hits:
            progress(stats.hits)
        if items:
            self._mark_used(ns, stats)
        if missing:
            self._parse_missing(ns, items, missing, parse_fn, results, stats, progress)
        return results  # type: ignore[return-value]

    def _mark_used(self, ns: Namespace, stats: CacheStats) -> None:
        """Write ``namespace.json`` if it is not there, else set its time to now (``prune --days``)."""
        path = ns.folder / NAMESPACE_FILE
        try:
            if path.exists():
                os.utime(path)
            else:
                write_atomic(path, [(_dumps(ns.record()) + "\n").encode("utf-8")])
        except OSError as exc:
            stats.write_errors += 1
            log.warning("parse cache: could not write %s (%s); results are not cached", path, exc)

    def _parse_missing(self, ns, items, missing, parse_fn, results, stats, progress) -> None:
        todo = list(missing)
        indices = [missing[key][0] for key in todo]
        stats.parsed_items = len(todo)
        stream = iter(parse_fn([items[i] for i in indices], indices))
        pending: list[tuple[str, bytes]] = []
        written = 0
        for produced, (key, index) in enumerate(zip(todo, indices)):
            try:
                passage = list(next(stream))
            except StopIteration:
                raise RuntimeError(f"parse_fn returned {produced} passages for {len(todo)} items") from None
            rows = _rows(passage, index)
            for position in missing[key]:
                results[position] = passage if position == index else _passage(rows, position)
            pending.append((key, _dumps(rows).encode("utf-8")))
            if progress is not None:
                progress(len(missing[key]))
            # Write now, so an interrupted run resumes here. The interval grows with what this run has
            # written (every bucket is rewritten each time), so a long run writes each entry about twice.
            if len(pending) >= max(self.flush_items, written):
                self._write(ns, pending, stats)
                written += len(pending)
                pending = []
        if pending:
            self._write(ns, pending, stats)

    def _write(self, ns: Namespace, entries: list[tuple[str, bytes]], stats: CacheStats) -> None:
        """Add ``entries`` (key, payload) to their buckets, one atomic rewrite per bucket."""
        by_bucket: dict[str, dict[str, bytes]] = {}
        for key, payload in entries:
            by_bucket.setdefault(key[:BUCKET_DIGITS], {})[key] = payload
        for bucket, new in sorted(by_bucket.items()):
            path = ns.bucket_path(bucket)
            header = ns.bucket_header(bucket)
            kept = self._intact_entries(path, header)
            kept.update(new)
            try:
                write_atomic(path, _bucket_chunks(header, kept))
            except OSError as exc:
                stats.write_errors += 1
                log.warning("parse cache: could not write %s (%s); results are not cached", path, exc)

    @staticmethod
    def _intact_entries(path: Path, header: dict) -> dict[str, bytes]:
        """{key: payload} of the intact entries of an existing bucket, to keep when it is rewritten."""
        if not path.exists():
            return {}
        try:
            lines = read_bucket(path, header)
        except CacheInvalid as exc:
            log.warning("parse cache: %s is unusable (%s); rewriting it with the new entries only", path, exc)
            return {}
        entries = [split_entry(line) for line in lines]
        corrupt = sum(e is None for e in entries)
        if corrupt:
            log.warning("parse cache: %s: dropping %d corrupt entries", path, corrupt)
        return dict(e for e in entries if e is not None)


# ---------------------------------------------------------------------- loading
def _load(ns: Namespace, keys: set[str]) -> tuple[dict[str, list], set[str]]:
    """Decoded entries (rows, see :func:`_passage`) of ``keys`` found intact, and the keys whose entries are corrupt or in a bucket
    that is unusable (corrupt or stale)."""
    wanted: dict[str, set[str]] = {}
    for key in keys:
        wanted.setdefault(key[:BUCKET_DIGITS], set()).add(key)
    found: dict[str, list] = {}
    bad: set[str] = set()
    for bucket, bucket_keys in sorted(wanted.items()):
        path = ns.bucket_path(bucket)
        if not path.exists():
            continue
        try:
            payloads, corrupt = _wanted_entries(read_bucket(path, ns.bucket_header(bucket)), bucket_keys)
            found.update(decode_entries(payloads))
        except CacheInvalid as exc:
            log.warning("parse cache: %s is unusable (%s); parsing its items again", path, exc)
            bad |= bucket_keys
            continue
        if corrupt:
            log.warning("parse cache: %s: %d entries fail their checksum (corrupt); parsing those items again",
                        path, len(corrupt))
            bad |= corrupt
    return found, bad


def _wanted_entries(lines: list[bytes], wanted: set[str]) -> tuple[dict[str, bytes], set[str]]:
    """{key: payload} of the intact entries of ``wanted`` keys, and the wanted keys with only corrupt lines."""
    wanted_bytes = {k.encode("ascii") for k in wanted}
    payloads: dict[str, bytes] = {}
    corrupt: set[str] = set()
    for line in lines:
        key = line[:_KEY_LEN]
        if key not in wanted_bytes:  # cheap test first: most lines of a bucket are other items
            continue
        entry = split_entry(line)
        if entry is None:
            corrupt.add(key.decode("ascii"))
        else:
            payloads[entry[0]] = entry[1]
    return payloads, corrupt - set(payloads)


def read_bucket(path: Path, expected: dict) -> list[bytes]:
    """The entry lines of one bucket file, unchecked (see :func:`split_entry`).

    Raises:
        CacheInvalid: the file cannot be read or its header is corrupt or not ``expected``.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CacheInvalid(f"unreadable: {exc}") from exc
    newline = data.find(b"\n")
    if newline < 0:
        raise CacheInvalid("truncated: no header line")
    _check_header(data[:newline], expected)
    return [line for line in data[newline + 1:].split(b"\n") if line]


def _check_header(line: bytes, expected: dict) -> None:
    try:
        header = json.loads(line)
    except ValueError as exc:
        raise CacheInvalid(f"corrupt header: {exc}") from exc
    if not isinstance(header, dict):
        raise CacheInvalid("corrupt header: not an object")
    if header.get("format") != FORMAT_NAME or header.get("version") != FORMAT_VERSION:
        raise CacheInvalid(f"stale: format {header.get('format')!r} version {header.get('version')!r}, "
                           f"expected {FORMAT_NAME!r} version {FORMAT_VERSION}")
    if header.get("fingerprint") != expected["fingerprint"]:
        raise CacheInvalid(f"stale: made by {header.get('fingerprint')!r}, expected {expected['fingerprint']!r}")
    if header != expected:
        wrong = sorted(k for k in set(header) | set(expected) if header.get(k) != expected.get(k))
        raise CacheInvalid(f"header does not match this namespace (fields {', '.join(wrong)})")


def _check(key: bytes, payload: bytes) -> bytes:
    return hashlib.sha256(key + b" " + payload).hexdigest()[:_CHECK_LEN].encode("ascii")


def split_entry(line: bytes) -> tuple[str, bytes] | None:
    """(key, payload) of an entry line, or None when it is malformed or fails its check (corrupt)."""
    body = _KEY_LEN + _CHECK_LEN + 2
    if len(line) <= body or line[_KEY_LEN:_KEY_LEN + 1] != b" " or line[body - 1:body] != b" ":
        return None
    key, payload = line[:_KEY_LEN], line[body:]
    if _check(key, payload) != line[_KEY_LEN + 1:body - 1]:
        return None
    return key.decode("ascii"), payload


def _bucket_chunks(header: dict, entries: dict[str, bytes]) -> list[bytes]:
    lines = [(_dumps(header) + "\n").encode("utf-8")]
    for key, payload in entries.items():
        k = key.encode("ascii")
        lines.append(k + b" " + _check(k, payload) + b" " + payload + b"\n")
    return lines


# ---------------------------------------------------------------------- entries
# One encoder for all calls: json.dumps with options builds a new encoder every time (slow per item).
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _rows(passage: Sequence[Parse], index: int) -> list[list]:
    """One item's sentences as JSON-able rows, ids relative to ``index`` where they start with it."""
    prefix = str(index)
    rows = []
    for p in passage:
        relative = p.sent_id == prefix or p.sent_id.startswith(prefix + ".")
        sent_id = p.sent_id[len(prefix):] if relative else p.sent_id
        rows.append([int(relative), sent_id, list(p.words), list(p.heads), list(p.deprels), list(p.upos)])
    return rows


def _passage(rows: list[list], index: int) -> list[Parse]:
    """One item's :class:`Parse` records at position ``index`` (relative sentence ids rebuilt) from its
    rows; ValueError or TypeError when a row is malformed."""
    prefix = str(index)
    intern = sys.intern  # labels come from a small set: one string object per label, not one per word
    passage = []
    for relative, sent_id, words, heads, deprels, upos in rows:
        if not (isinstance(sent_id, str) and len(words) == len(heads) == len(deprels) == len(upos)):
            raise ValueError("malformed sentence row")
        passage.append(Parse(tuple(words), tuple(heads), tuple(map(intern, deprels)), tuple(map(intern, upos)),
                             prefix + sent_id if relative else sent_id))
    return passage


def decode_entries(payloads: dict[str, bytes]) -> dict[str, list]:
    """Decode payloads (key -> JSON bytes) in one ``json.loads``; CacheInvalid if one is malformed."""
    if not payloads:
        return {}
    try:
        decoded = json.loads(b"[" + b",".join(payloads.values()) + b"]")
    except ValueError as exc:
        raise CacheInvalid(f"corrupt payload: {exc}") from exc
    return dict(zip(payloads, decoded))


@contextmanager
def _gc_paused():
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


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
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; cache files are not secret
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


# ---------------------------------------------------------------------- info and prune
@dataclass
class NamespaceInfo:
    """One namespace folder on disk (``fingerprint`` etc. None when ``namespace.json`` is unreadable)."""

    folder: Path
    fingerprint: str | None
    kind: str | None
    options: dict | None
    entries: int
    bytes: int
    last_used: float


@dataclass
class OtherFormat:
    """Something under the cache directory that this version does not read (an older format)."""

    path: Path
    bytes: int


@dataclass
class CacheInfo:
    directory: Path
    namespaces: list[NamespaceInfo]
    others: list[OtherFormat]

    @property
    def bytes(self) -> int:
        return sum(n.bytes for n in self.namespaces) + sum(o.bytes for o in self.others)


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _read_namespace(folder: Path) -> NamespaceInfo:
    record: dict = {}
    meta = folder / NAMESPACE_FILE
    try:
        loaded = json.loads(meta.read_text(encoding="utf-8"))
        record = loaded if isinstance(loaded, dict) else {}
    except (OSError, ValueError) as exc:
        log.warning("parse cache: %s is unreadable (%s); its fingerprint is unknown", meta, exc)
    entries = 0
    for bucket in folder.glob(f"*{BUCKET_SUFFIX}"):
        entries += max(bucket.read_bytes().count(b"\n") - 1, 0)  # minus the header line
    last_used = meta.stat().st_mtime if meta.exists() else folder.stat().st_mtime
    return NamespaceInfo(folder, record.get("fingerprint"), record.get("kind"), record.get("options"),
                         entries, _size(folder), last_used)


def cache_info(directory: str | Path | None = None) -> CacheInfo:
    """What the cache at ``directory`` (default: the default cache folder) holds."""
    directory = Path(directory) if directory is not None else ParseCache().directory
    namespaces, others = [], []
    if directory.is_dir():
        for path in sorted(directory.iterdir()):
            if path.name != VERSION_DIR:
                others.append(OtherFormat(path, _size(path)))
                continue
            for folder in sorted(path.iterdir()):
                if folder.is_dir():
                    namespaces.append(_read_namespace(folder))
                else:
                    others.append(OtherFormat(folder, _size(folder)))
    return CacheInfo(directory, namespaces, others)


@dataclass
class Removed:
    path: Path
    bytes: int
    entries: int | None  # None: another format, not counted
    reason: str


def prune(directory: str | Path | None = None, *, remove_all: bool = False, days: float | None = None,
          keep_fingerprints: Iterable[str] | None = None, now: float | None = None) -> list[Removed]:
    """Remove from the cache: always what another format version wrote; with ``remove_all`` everything;
    with ``days`` the namespaces not used for that many days; with ``keep_fingerprints`` every namespace
    whose fingerprint is not one of them. Returns what was removed and why."""
    info = cache_info(directory)
    now = time.time() if now is None else now
    keep = None if keep_fingerprints is None else set(keep_fingerprints)
    removed = [Removed(o.path, o.bytes, None, f"format other than version {FORMAT_VERSION}") for o in info.others]
    for ns in info.namespaces:
        if remove_all:
            reason = "--all"
        elif days is not None and now - ns.last_used > days * 86400:
            reason = f"not used for {(now - ns.last_used) / 86400:.1f} days"
        elif keep is not None and ns.fingerprint not in keep:
            reason = f"fingerprint {ns.fingerprint!r} is not kept"
        else:
            continue
        removed.append(Removed(ns.folder, ns.bytes, ns.entries, reason))
    for item in removed:
        if item.path.is_dir():
            shutil.rmtree(item.path)
        else:
            item.path.unlink()
    return removed


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
