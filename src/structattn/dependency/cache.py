"""On-disk parse cache, content-addressed per item, so subsets and supersets of an input reuse it; one SQLite
database in WAL mode, so processes parsing into one cache at the same time keep every entry.

Layout::

    <directory>/parses.sqlite3   (with SQLite's -wal and -shm files while it is open)
        namespaces(id, fingerprint, kind, options, last_used)   one row per (parser fingerprint, kind, options)
        entries(key, namespace, payload)                         one row per distinct parsed item

A namespace is one (key version, parser fingerprint, kind, options); its id is the first 32 hex digits of their
sha256. An item's key is the sha256 of the namespace id and the item as compact JSON: the same item parsed by
the same parser has the same key wherever it sits in whatever input, so a subset (``--max-train-examples``), a
superset (one added example) or another split sharing items parses only the items that are new. Identical
items in one input are parsed once. The payload is the JSON list of the item's sentences
``[relative, sent_id, words, heads, deprels, upos]``.

Concurrency: every write is one SQLite transaction (``INSERT OR REPLACE``), and SQLite's write-ahead log lets
readers go on while one process writes and makes writers wait for each other (for up to
`BUSY_TIMEOUT_S`), so two processes adding entries at once both keep theirs (tested with two writer
processes); opening a new database from two processes at once is waited out too (`_open_waiting`).
WAL needs a local file system (not NFS). New entries are written every ``flush_items`` parsed items,
so an interrupted run resumes where it stopped.

Damage: an entry whose payload is not the JSON of sentence rows is logged as a warning and its item parsed
again (and replaced); a database file SQLite cannot read is set aside as ``parses.sqlite3.corrupt-<time>``
(listed and removed by ``structattn cache info|prune``) with a warning, and a new one started. A cache that
cannot be written (read-only, full disk) still returns every result, counted in ``write_errors``.

Sentence ids: parsers name sentences after the item's position in the input (``"12"``, ``"12.2"``). An
id that is the item's index, or that index and a dot and more, is stored relative to the index
(``relative`` = 1) and rebuilt for the position the item has now; any other id is stored as it is.

Earlier formats: format 2's bucket files (``<directory>/v2/``) are read once into the database, with the same
keys (`cache_migration`), and their folder renamed ``v2.migrated``; anything else under
``<directory>`` (the per-input shard folders of format 1, a migrated folder) is never read, listed by
`cache_info` and removed by `prune`.
"""
from __future__ import annotations

import gc
import hashlib
import json
import logging
import os
import random
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .. import settings
from ..errors import UserError
from .cache_migration import OLD_DIR, mark_migrated, read_old_namespaces
from .record import Parse

log = logging.getLogger(__name__)

FORMAT_NAME = "structattn-parses"
FORMAT_VERSION = 3  # the SQLite store
KEY_VERSION = 2  # what namespace ids hash: unchanged since format 2, so migrated entries keep their keys
DATABASE = "parses.sqlite3"
DEFAULT_FLUSH_ITEMS = 4096
BUSY_TIMEOUT_S = 120.0  # how long a writer waits for another process's transaction
_IN_CHUNK = 500  # keys per SELECT ... IN (...): below SQLite's limit on bound parameters
_SCAN_KEYS = 5000  # more keys than this are read in one pass over their namespace

# parse_fn(items, indices) -> one passage (list[Parse]) per item, in order; indices are the items'
# positions in the whole input (used in sentence ids).
ParseFn = Callable[[list, list[int]], Iterable[list[Parse]]]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS namespaces (id TEXT PRIMARY KEY, fingerprint TEXT, kind TEXT, options TEXT NOT NULL,
                                       last_used REAL NOT NULL);
CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, namespace TEXT NOT NULL, payload BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS entries_by_namespace ON entries (namespace);
"""


@dataclass
class CacheStats:
    """What the last `ParseCache.get_or_parse` did, counted in items."""

    directory: Path | None = None  # the database file
    items: int = 0
    hits: int = 0          # items loaded from disk
    misses: int = 0        # items without an entry
    rebuilt: int = 0       # items whose entry was damaged, parsed again
    parsed_items: int = 0  # distinct items sent to the parser
    write_errors: int = 0  # writes that failed (results still returned)
    read_only: bool = False  # the database could only be opened for reading
    skipped_writes: int = 0  # new entries not written because of that

    def summary(self) -> str:
        return (f"{self.hits:,} of {self.items:,} items from cache, {self.misses:,} new, "
                f"{self.rebuilt:,} rebuilt (damaged); {self.parsed_items:,} items parsed")


@dataclass
class Namespace:
    """One (key version, fingerprint, kind, options): how its keys are made."""

    fingerprint: str
    kind: str
    options: dict = field(default_factory=dict)

    def __post_init__(self):
        self.id = hashlib.sha256(_dumps([FORMAT_NAME, KEY_VERSION, self.kind, self.fingerprint,
                                         self.options]).encode()).hexdigest()[:32]
        self._hasher = hashlib.sha256(self.id.encode() + b"\n")

    def key(self, item) -> str:
        """The entry key of one item (hex sha256 of the namespace id and the item's JSON)."""
        h = self._hasher.copy()
        h.update(_dumps(item).encode("utf-8"))
        return h.hexdigest()


# ---------------------------------------------------------------------- the database
def _connect(path: Path) -> sqlite3.Connection:
    """Open (creating) the database in WAL mode; a file SQLite cannot read is set aside and a new one made (an
    empty file, which SQLite takes for a new database, is said too)."""
    if path.is_file() and path.stat().st_size == 0:
        log.warning("parse cache: %s is an empty file (a copy or a write cut short?); starting it again, its "
                    "items are parsed again", path)
    for attempt in (1, 2):
        try:
            return _open_waiting(path)
        except sqlite3.DatabaseError as exc:
            if attempt == 2 or isinstance(exc, sqlite3.OperationalError):  # busy, read-only, ...: not damage
                raise
            aside = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
            log.warning("parse cache: %s is unusable (%s); set aside as %s, its items are parsed again",
                        path, exc, aside.name)
            for suffix in ("", "-wal", "-shm"):
                if Path(f"{path}{suffix}").exists():
                    os.replace(f"{path}{suffix}", f"{aside}{suffix}")
    raise AssertionError("unreachable")


def _open_waiting(path: Path) -> sqlite3.Connection:
    """Connect and set the database up (WAL, schema), trying again while another process holds it.

    Where waiting could deadlock, SQLite answers "database is locked" at once instead of waiting: two
    processes opening a new database at the same moment both switch it to WAL and one of them gets it. The
    set-up is idempotent, so it is tried again, with growing randomised pauses, for up to `BUSY_TIMEOUT_S`.
    """
    deadline, pause = time.monotonic() + BUSY_TIMEOUT_S, 0.005
    while True:
        conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # WAL: a crash loses at most the last transactions
            conn.executescript(_SCHEMA)
            return conn
        except sqlite3.OperationalError as exc:
            conn.close()
            if not _is_busy(exc) or time.monotonic() + pause > deadline:
                raise
        except BaseException:
            conn.close()
            raise
        time.sleep(pause * random.uniform(0.5, 1.5))  # randomised, so two processes fall out of step
        pause = min(2 * pause, 0.5)


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    """Whether SQLite refused because another connection holds the database (SQLITE_BUSY or SQLITE_LOCKED,
    with any extended code)."""
    return (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction (``BEGIN IMMEDIATE``: takes the write lock first, waiting for other writers)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _migrate(conn: sqlite3.Connection, directory: Path) -> None:
    """Read format 2's folder (if any) into the database once, then rename it (module docstring)."""
    old = read_old_namespaces(directory, FORMAT_NAME)
    if not old:
        return
    with _transaction(conn):
        for ns in old:
            conn.execute("INSERT OR IGNORE INTO namespaces VALUES (?, ?, ?, ?, ?)",
                         (ns.id, ns.fingerprint, ns.kind, _dumps(ns.options), ns.last_used))
            conn.executemany("INSERT OR IGNORE INTO entries VALUES (?, ?, ?)",
                             ((key, ns.id, payload) for key, payload in ns.entries.items()))
    mark_migrated(directory)
    entries, skipped = sum(len(ns.entries) for ns in old), sum(ns.skipped for ns in old)
    log.warning("parse cache: moved %d entries of %d parser namespaces from the old format in %s into %s "
                "(%d damaged entries skipped); the old files stay in %s until `structattn cache prune`",
                entries, len(old), directory, DATABASE, skipped, directory / "v2.migrated")


def open_read_only(path: Path) -> sqlite3.Connection:
    """The database ``path`` opened for reading only, where it cannot be written (a read-only folder, file or file
    system): ``mode=ro``, else, when SQLite cannot make the WAL's shared-memory file there, ``immutable=1`` (no
    writer can be active where nothing can be written). sqlite3.Error when it cannot be read either."""
    from urllib.parse import quote

    last: sqlite3.Error | None = None
    for flags in ("mode=ro", "immutable=1"):
        conn = sqlite3.connect(f"file:{quote(str(path))}?{flags}", uri=True, timeout=BUSY_TIMEOUT_S,
                               isolation_level=None)
        try:
            conn.execute("SELECT COUNT(*) FROM namespaces").fetchone()
            return conn
        except sqlite3.Error as exc:
            conn.close()
            last = exc
    raise last


def open_store(directory: Path) -> sqlite3.Connection:
    """A connection to the cache database in ``directory`` (created, and format 2 migrated, on first use); the
    caller closes it."""
    directory.mkdir(parents=True, exist_ok=True)
    conn = _connect(directory / DATABASE)
    try:
        _migrate(conn, directory)
    except BaseException:
        conn.close()
        raise
    return conn


class ParseCache:
    """Content-addressed parse cache in one SQLite database, safe for several processes at once.

    Args:
        directory: where the cache lives; default ``settings.cache_dir() / "parses"``.
        flush_items: new entries are written every this many parsed items (see the module docstring).
    """

    def __init__(self, directory: str | Path | None = None, flush_items: int = DEFAULT_FLUSH_ITEMS):
        if flush_items < 1:
            raise ValueError("flush_items must be positive")
        self.directory = Path(directory) if directory is not None else settings.parse_cache_dir()
        self.flush_items = flush_items
        self.last_stats = CacheStats()

    @property
    def path(self) -> Path:
        """The database file."""
        return self.directory / DATABASE

    def namespace(self, fingerprint: str, kind: str, options: dict | None = None) -> Namespace:
        return Namespace(fingerprint, kind, dict(options or {}))

    def key(self, item, fingerprint: str, kind: str, options: dict | None = None) -> str:
        """The entry key of ``item`` parsed by a parser with this fingerprint (hex sha256)."""
        return self.namespace(fingerprint, kind, options).key(item)

    # ------------------------------------------------------------------ main entry
    def get_or_parse(self, items: Sequence, parse_fn: ParseFn, fingerprint: str, kind: str,
                     options: dict | None = None,
                     progress: Callable[[int], None] | None = None) -> list[list[Parse]]:
        """Passages for ``items`` (``len(items)`` lists of [`Parse`][structattn.dependency.record.Parse]), from disk
        where possible.

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
        stats = CacheStats(directory=self.path, items=len(items))
        self.last_stats = stats
        results: list[list[Parse] | None] = [None] * len(items)
        missing: dict[str, list[int]] = {}  # key -> positions, in order of first occurrence
        with self._store(stats) as conn:
            # Loading makes millions of small acyclic objects; with the cyclic GC running it would rescan
            # them over and over (half of the load time on SST-2), so it is paused meanwhile.
            with _gc_paused():
                found, bad = _load(conn, ns, set(keys)) if conn is not None else ({}, set())
                for index, key in enumerate(keys):
                    if key in found:
                        try:
                            results[index] = _passage(found[key], index)
                            continue
                        except (ValueError, TypeError) as exc:  # decodes, but is not sentence rows
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
                self._write(conn, ns, [], stats)  # records the namespace and its last use (prune --days)
            if missing:
                self._parse_missing(conn, ns, items, missing, parse_fn, results, stats, progress)
        return results  # type: ignore[return-value]

    @contextmanager
    def _store(self, stats: CacheStats) -> Iterator[sqlite3.Connection | None]:
        """The database; opened read-only when it cannot be written (its entries served, new ones not written:
        one note at the end, counted in ``skipped_writes``); None when it cannot be opened at all (everything is
        then parsed, nothing written)."""
        try:
            conn = open_store(self.directory)
        except (OSError, sqlite3.Error) as exc:
            conn = None
            if self.path.is_file():
                try:
                    conn = open_read_only(self.path)
                    stats.read_only = True
                except sqlite3.Error:
                    pass
            if conn is None:
                stats.write_errors += 1
                log.warning("parse cache: cannot open %s (%s); parsing without the cache", self.path, exc)
        try:
            yield conn
        finally:
            if conn is not None:
                conn.close()
        if stats.read_only:
            log.warning("parse cache: %s cannot be written, read it only: %d of %d items from it, %d new parses "
                        "not saved", self.path, stats.hits, stats.items, stats.skipped_writes)

    def _parse_missing(self, conn, ns, items, missing, parse_fn, results, stats, progress) -> None:
        todo = list(missing)
        indices = [missing[key][0] for key in todo]
        stats.parsed_items = len(todo)
        stream = iter(parse_fn([items[i] for i in indices], indices))
        pending: list[tuple[str, bytes]] = []
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
            if len(pending) >= self.flush_items:  # written now, so an interrupted run resumes here
                self._write(conn, ns, pending, stats)
                pending = []
        if pending:
            self._write(conn, ns, pending, stats)

    def _write(self, conn, ns: Namespace, entries: list[tuple[str, bytes]], stats: CacheStats) -> None:
        """Add ``entries`` (key, payload) and mark the namespace used, in one transaction."""
        if conn is None:
            return
        if stats.read_only:
            stats.skipped_writes += len(entries)
            return
        try:
            with _transaction(conn):
                conn.execute("INSERT INTO namespaces VALUES (?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET "
                             "last_used = excluded.last_used",
                             (ns.id, ns.fingerprint, ns.kind, _dumps(ns.options), time.time()))
                conn.executemany("INSERT OR REPLACE INTO entries VALUES (?, ?, ?)",
                                 ((key, ns.id, payload) for key, payload in entries))
        except (OSError, sqlite3.Error) as exc:
            stats.write_errors += 1
            log.warning("parse cache: could not write to %s (%s); results are not cached", self.path, exc)


# ---------------------------------------------------------------------- loading
def _load(conn: sqlite3.Connection, ns: Namespace, keys: set[str]) -> tuple[dict[str, list], set[str]]:
    """Decoded entries (rows, see `_passage`) of the ``keys`` found, and the keys whose payload is not
    JSON (damaged)."""
    payloads: dict[str, bytes] = {}
    if len(keys) > _SCAN_KEYS:  # many keys: one pass over the namespace beats many lookups
        rows = conn.execute("SELECT key, payload FROM entries WHERE namespace = ?", (ns.id,))
        payloads.update((key, payload) for key, payload in rows if key in keys)
    else:
        wanted = sorted(keys)
        for start in range(0, len(wanted), _IN_CHUNK):
            chunk = wanted[start:start + _IN_CHUNK]
            rows = conn.execute(f"SELECT key, payload FROM entries WHERE key IN ({','.join('?' * len(chunk))})",
                                chunk)
            payloads.update(rows)
    try:
        return decode_entries(payloads), set()
    except ValueError:  # one is damaged: decode one by one to find which
        found, bad = {}, set()
        for key, payload in payloads.items():
            try:
                found[key] = json.loads(payload)
            except ValueError:
                bad.add(key)
        log.warning("parse cache: %d entries are not valid JSON (damaged); parsing those items again", len(bad))
        return found, bad


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
    """One item's [`Parse`][structattn.dependency.record.Parse] records at position ``index`` (relative sentence ids
    rebuilt) from its rows; ValueError or TypeError when a row is malformed."""
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
    """Decode payloads (key -> JSON bytes) in one ``json.loads``; ValueError if one is not JSON."""
    if not payloads:
        return {}
    return dict(zip(payloads, json.loads(b"[" + b",".join(payloads.values()) + b"]")))


@contextmanager
def _gc_paused():
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# ---------------------------------------------------------------------- info and prune
@dataclass
class NamespaceInfo:
    """One parser namespace in the database."""

    id: str
    fingerprint: str | None
    kind: str | None
    options: dict | None
    entries: int
    bytes: int  # of its keys and payloads (the file is larger: SQLite's pages and indexes)
    last_used: float


@dataclass
class OtherFormat:
    """Something under the cache directory that this version does not read (an older format, a set-aside file)."""

    path: Path
    bytes: int


@dataclass
class CacheInfo:
    directory: Path
    namespaces: list[NamespaceInfo]
    others: list[OtherFormat]
    database_bytes: int = 0  # the database file with its -wal and -shm files

    @property
    def bytes(self) -> int:
        return self.database_bytes + sum(o.bytes for o in self.others)


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _database_files(directory: Path) -> list[Path]:
    return [directory / f"{DATABASE}{suffix}" for suffix in ("", "-wal", "-shm")]


def _namespaces(conn: sqlite3.Connection) -> list[NamespaceInfo]:
    rows = conn.execute("SELECT n.id, n.fingerprint, n.kind, n.options, n.last_used, COUNT(e.key), "
                        "COALESCE(SUM(LENGTH(e.key) + LENGTH(e.payload)), 0) FROM namespaces n "
                        "LEFT JOIN entries e ON e.namespace = n.id GROUP BY n.id ORDER BY n.id")
    out = []
    for ns_id, fingerprint, kind, options, last_used, entries, size in rows:
        try:
            decoded = json.loads(options)
        except ValueError:
            decoded = None
        out.append(NamespaceInfo(ns_id, fingerprint, kind, decoded, entries, size, last_used))
    return out


def cache_info(directory: str | Path | None = None) -> CacheInfo:
    """What the cache at ``directory`` (default: the default cache folder) holds (migrating format 2 first)."""
    directory = Path(directory) if directory is not None else ParseCache().directory
    if not directory.is_dir():
        return CacheInfo(directory, [], [])
    namespaces = []
    if (directory / DATABASE).exists() or (directory / OLD_DIR).is_dir():
        conn = _open_for_info(directory)
        try:
            namespaces = _namespaces(conn)
        finally:
            conn.close()
    ours = set(_database_files(directory))
    others = [OtherFormat(p, _size(p)) for p in sorted(directory.iterdir()) if p not in ours]
    return CacheInfo(directory, namespaces, others, sum(_size(p) for p in ours if p.exists()))


def _open_for_info(directory: Path) -> sqlite3.Connection:
    """The database for reading what it holds: as `open_store`, else read-only; UserError when neither."""
    try:
        return open_store(directory)
    except (OSError, sqlite3.Error) as exc:
        try:
            return open_read_only(directory / DATABASE)
        except sqlite3.Error:
            raise UserError(f"cannot open the parse cache {directory / DATABASE} ({exc}); check its permissions, "
                            "or set STRUCTATTN_CACHE to another folder") from None


def cached_fingerprints(directory: str | Path | None = None) -> set[str]:
    """The parser fingerprints the cache at ``directory`` holds parses of."""
    return {ns.fingerprint for ns in cache_info(directory).namespaces if isinstance(ns.fingerprint, str)}


def _writable(directory: Path) -> bool:
    """Whether files in ``directory`` can be created and removed, and its database written (tried, not guessed:
    root passes permission checks, a read-only file system refuses it)."""
    try:
        probe = tempfile.NamedTemporaryFile(dir=directory, prefix=".write-probe-")
        probe.close()
    except OSError:
        return False
    database = directory / DATABASE
    try:
        if database.exists():
            os.close(os.open(database, os.O_RDWR))
    except OSError:
        return False
    return True


@dataclass
class Removed:
    what: str  # a path, or "<database> namespace <id>"
    bytes: int
    entries: int | None  # None: another format, not counted
    reason: str


def prune(directory: str | Path | None = None, *, remove_all: bool = False, days: float | None = None,
          keep_fingerprints: Iterable[str] | None = None, now: float | None = None) -> list[Removed]:
    """Remove from the cache: always what another format wrote (or was set aside); with ``remove_all``
    everything; with ``days`` the namespaces not used for that many days; with ``keep_fingerprints`` every
    namespace whose fingerprint is not one of them. Returns what was removed and why."""
    info = cache_info(directory)
    now = time.time() if now is None else now
    keep = None if keep_fingerprints is None else set(keep_fingerprints)
    removed = [Removed(str(o.path), o.bytes, None, f"format other than version {FORMAT_VERSION}")
               for o in info.others]
    doomed = []
    for ns in info.namespaces:
        if remove_all:
            reason = "--all"
        elif days is not None and now - ns.last_used > days * 86400:
            reason = f"not used for {(now - ns.last_used) / 86400:.1f} days"
        elif keep is not None and ns.fingerprint not in keep:
            reason = f"fingerprint {ns.fingerprint!r} is not kept"
        else:
            continue
        doomed.append(ns.id)
        removed.append(Removed(f"{info.directory / DATABASE} namespace {ns.id}", ns.bytes, ns.entries, reason))
    if (info.others or doomed) and not _writable(info.directory):
        raise UserError(f"the parse cache {info.directory} is read-only: nothing was removed. Make it writable, or "
                        "prune it where it is writable")
    for other in info.others:
        if other.path.is_dir():
            shutil.rmtree(other.path)
        else:
            other.path.unlink()
    if doomed:
        conn = open_store(info.directory)
        try:
            with _transaction(conn):
                for ns_id in doomed:
                    conn.execute("DELETE FROM entries WHERE namespace = ?", (ns_id,))
                    conn.execute("DELETE FROM namespaces WHERE id = ?", (ns_id,))
            conn.execute("VACUUM")  # give the space back to the file system
        finally:
            conn.close()
    return removed


# ---------------------------------------------------------------------- convenience
def parse_cached(items: Sequence, parser, cache: ParseCache | None = None, kind: str | None = None,
                 progress: Callable[[int], None] | None = None) -> list[list[Parse]]:
    """Parse ``items`` with ``parser`` (e.g. `SpacyParser`)
    through ``cache`` (default: a `ParseCache` in the default folder).

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
    from .record import check_texts, check_word_lists

    (check_texts if kind == "texts" else check_word_lists)(items)
    cache = cache if cache is not None else ParseCache()
    method = parser.iter_texts if kind == "texts" else parser.iter_words

    def parse_fn(chunk, indices):
        return method(chunk, indices=indices)

    return cache.get_or_parse(items, parse_fn, parser.fingerprint(), kind, progress=progress)
