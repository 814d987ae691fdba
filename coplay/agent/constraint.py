"""Constrained order decoding for Diplomacy (`rollout.constrained_orders`): the regular expression that
restricts each order line of an `act` completion to its unit's legal orders.

Why: invalid orders are the main Diplomacy failure of LLM players. The constraint is one regex over the
whole completion: the INTENTION line (a tag, then free text), the optional SKILL line, `ORDERS:`, then one
line per orderable unit, in the order the observation lists them, each an alternation of that unit's legal
orders. Engines sample under it (vLLM: `StructuredOutputsParams(regex=...)`; HF: `coplay.engines.token_masks`)
and the learner applies the same token mask (`coplay.engines.token_masks`), so the behaviour log-probs and
the learner's are both those of the constrained distribution. Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from coplay.agent.parsing import INTENTION_TAGS

_SPECIAL = set("\\.^$*+?()[]{}|/-")
SUBGOAL_MAX_CHARS = 60


def _escape(text: str) -> str:
    return "".join(f"\\{ch}" if ch in _SPECIAL else ch for ch in text)


def orders_regex(legal_orders: Mapping[str, list[str]]) -> str:
    """The regex of an `act` completion whose order lines are each one legal order of one unit."""
    head = (f"INTENTION: ({'|'.join(INTENTION_TAGS)})( [^\\n]{{0,{SUBGOAL_MAX_CHARS}}})?\\n"
            "(SKILL: (KEEP|SWITCH)\\n)?ORDERS:\\n")
    lines = ["(" + "|".join(_escape(o) for o in orders) + ")" for _, orders in legal_orders.items() if orders]
    return head + "\\n".join(lines)


def constraint_for(game: str, info: Mapping[str, Any]) -> str | None:
    """The regex that constrains this step's `act` completion, or None: only Diplomacy movement and retreat
    phases (one line per unit; negotiation messages and adjustment builds stay free)."""
    if game != "diplomacy":
        return None
    features = info.get("features") or {}
    legal = info.get("legal_orders") or {}
    if features.get("is_negotiation") or features.get("is_adjustment") or not legal:
        return None
    return orders_regex(legal)
