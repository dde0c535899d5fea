"""``structattn models``: the trained models this install ships, by the name that ``--model`` accepts.

One row per shipped model ([`structattn.models.trained`][structattn.models.trained]): its name, kind (parser,
translator, reader), what it was trained on, its test score (from its card), its size on disk and, for a parser on a
frozen pretrained encoder, the pip package that supplies that encoder (not counted in the size). Only models whose
weights are present are listed; names known to the library but not built in this install are named on stderr with the
command that builds them. ``--json`` prints one JSON list instead (the cards' fields, the folder and the size in bytes).

``structattn models NAME`` prints that model's card (``CARD.md`` in its folder): the data and its domain, what
the model is good and bad at, its scores, size and the exact command that trained it (``--json``: ``card.json``).
"""
from __future__ import annotations

import json
import sys


def add_parser(sub) -> None:
    p = sub.add_parser("models", help="list the trained models shipped with this install (names for --model), or "
                                      "print one's card",
                       description="List the trained models that `structattn parse --model NAME`, `structattn "
                                   "translate --model NAME`, `structattn answer --model NAME` and the spaCy "
                                   "component's model=NAME accept, with "
                                   "what each was trained on, its test score and its size.")
    p.add_argument("name", nargs="?", default=None, metavar="NAME",
                   help="print this model's card (data, domain, good and bad at, scores, size, command) instead of "
                        "the list (default: the list)")
    p.add_argument("--json", action="store_true", help="one JSON list instead of the table (with NAME: its "
                                                       "card.json)")
    p.set_defaults(func=run)


def show_card(name: str, as_json: bool) -> int:
    """Print the card of the trained model ``name`` (CARD.md, or card.json with ``as_json``)."""
    from ..errors import UserError
    from ..models.trained import TRAINED

    entry = TRAINED.get(name)
    if entry is None:
        raise UserError(f"no trained model is called {name!r}; the names: {', '.join(TRAINED)}")
    card = entry.folder / ("card.json" if as_json else "CARD.md")
    if not card.is_file():
        raise UserError(f"{name} is not shipped with this install; build it from a checkout with `{entry.build}`")
    sys.stdout.write(card.read_text(encoding="utf-8"))
    return 0


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n / 1e3:.0f} kB"


def rows() -> list[dict]:
    """One dict per shipped model: name, kind, trained_on, test (metric, score, set), size_bytes, encoder,
    folder and card (its card.json)."""
    from ..models.trained import shipped_models

    out = []
    for m in shipped_models():
        card = m.card()
        out.append({"name": m.name, "kind": m.kind, "description": m.description,
                    "trained_on": card.get("trained_on", "?"), "test": card.get("test", {}),
                    "size_bytes": m.size_bytes(), "encoder": card.get("encoder_package"),
                    "folder": str(m.folder), "card": card})
    return out


def run(args) -> int:
    from ..models.trained import TRAINED

    if args.name is not None:
        return show_card(args.name, args.json)
    found = rows()
    if args.json:
        print(json.dumps(found, indent=2, ensure_ascii=False))
    else:
        table = [("NAME", "KIND", "TRAINED ON", "TEST SCORE", "SIZE")]
        for r in found:
            test = r["test"]
            value = test.get("score", "?")
            value = f"{value:.2f}" if isinstance(value, (int, float)) else str(value)
            score = f"{test.get('metric', '?')} {value} ({test.get('set', '?')})" if test else "?"
            size = _size(r["size_bytes"]) + (f" + encoder from pip package {r['encoder']}" if r["encoder"] else "")
            table.append((r["name"], r["kind"], r["trained_on"], score, size))
        widths = [max(len(row[i]) for row in table) for i in range(len(table[0]) - 1)]
        for row in table:
            print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1])
        if not found:
            print("(no trained model is shipped with this install)")
    missing = [m for m in TRAINED.values() if not m.shipped]
    if missing:
        print("not shipped with this install (build from a checkout): "
              + "; ".join(f"{m.name} ({m.kind}): {m.build}" for m in missing), file=sys.stderr)
    return 0
