"""Which word relation a model's mechanism needs, and how its sub-word mask treats the tokens outside it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .expand import ExpansionRules


@dataclass
class StructureSpec:
    """Which word relation the model's mechanism needs (None = no structure mask).

    ``rules.token_window`` set: the mask is a band over token positions (``window_unit="token"``), the
    same one the model builds when called without ``structure_mask``.
    """

    relation: str | None
    options: dict
    rules: ExpansionRules
    need_parents: bool = False

    @property
    def needs_word_structures(self) -> bool:
        """Whether examples need word-level structures: a word relation (a token window is built by the
        collator from positions alone) or LISA's parents."""
        return (self.relation is not None and self.rules.token_window is None) or self.need_parents

    @property
    def needs_parse(self) -> bool:
        return self.relation not in (None, "all", "window", "forward", "backward") or self.need_parents

    @classmethod
    def for_mechanism(cls, mech: Any, need_parents: bool = False) -> "StructureSpec":
        """The spec of an installed mechanism (a ``structattn.attention.mechanisms.MechanismConfig``; None or
        ``global``: no structure mask)."""
        relation = None if mech is None else mech.relation
        options = {} if mech is None else mech.relation_options()
        token_window = options.get("k") if relation == "window" and mech.window_unit == "token" else None
        rules = ExpansionRules.for_relation(relation or "all", token_window=token_window)
        return cls(relation=relation, options=options, rules=rules, need_parents=need_parents)
