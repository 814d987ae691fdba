"""Constrained `act` decoding: the regular expression an `act` completion is sampled under.

Two switches. `rollout.constrained_orders` (Diplomacy): each order line restricted to its unit's legal
orders; invalid orders are the main Diplomacy failure of LLM players. `rollout.constrained_actions` (the
single-action games: 2048, Candy Crush, Tetris, Mario, Avalon): the ACTION line restricted to one legal
action (a template such as `say <text>` keeps its free text, one line of at most `FREE_TEXT_MAX_CHARS`);
a small model that has learned the answer format from a short cold start still drops the ACTION line or
names an illegal move at sampling temperature, and each such step is a wasted move. The constraint is one
regex over the whole completion: the INTENTION line (a tag, then free text), the optional SKILL line, then
`ACTION: <one legal action>` or `ORDERS:` and one line per orderable unit, in the order the observation
lists them, each an alternation of that unit's legal orders. Engines sample under it (vLLM:
`StructuredOutputsParams(regex=...)`; HF: `coplay.engines.token_masks`) and the learner applies the same
token mask, so the behaviour log-probs and the learner's are both those of the constrained distribution.
Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from coplay.agent.parsing import INTENTION_TAGS, TEMPLATE_SLOT
from coplay.agent.prompts import MULTI_LINE_GAMES

_SPECIAL = set("\\.^$*+?()[]{}|/-")
SUBGOAL_MAX_CHARS = 60
FREE_TEXT_MAX_CHARS = 200


def _escape(text: str) -> str:
    return "".join(f"\\{ch}" if ch in _SPECIAL else ch for ch in text)


def _head(intention_chars: int = SUBGOAL_MAX_CHARS) -> str:
    """The INTENTION line (a tag, then at most `intention_chars` characters of free text; 0: the tag alone)
    and the optional SKILL line."""
    free = f"( [^\\n]{{0,{intention_chars}}})?" if intention_chars > 0 else ""
    return f"INTENTION: ({'|'.join(INTENTION_TAGS)}){free}\\n(SKILL: (KEEP|SWITCH)\\n)?"


def orders_regex(legal_orders: Mapping[str, list[str]], intention_chars: int = SUBGOAL_MAX_CHARS) -> str:
    """The regex of an `act` completion whose order lines are each one legal order of one unit."""
    lines = ["(" + "|".join(_escape(o) for o in orders) + ")" for _, orders in legal_orders.items() if orders]
    return _head(intention_chars) + "ORDERS:\\n" + "\\n".join(lines)


def _action_pattern(action: str) -> str:
    if TEMPLATE_SLOT not in action:
        return _escape(action)
    prefix, suffix = action.split(TEMPLATE_SLOT, 1)
    return _escape(prefix) + f"[^\\n]{{1,{FREE_TEXT_MAX_CHARS}}}" + _escape(suffix)


def actions_regex(legal_actions: Sequence[str], intention_chars: int = SUBGOAL_MAX_CHARS) -> str:
    """The regex of an `act` completion whose ACTION line is one of `legal_actions` (templates filled)."""
    return _head(intention_chars) + "ACTION: (" + "|".join(_action_pattern(a) for a in legal_actions) + ")"


def constraint_for(game: str, info: Mapping[str, Any], orders: bool = True,
                   actions: bool = False, intention_chars: int = SUBGOAL_MAX_CHARS) -> str | None:
    """The regex that constrains this step's `act` completion, or None. `orders`: Diplomacy movement and
    retreat phases (one line per unit; negotiation messages and adjustment builds stay free). `actions`:
    every step of a single-action game that lists its legal actions. `intention_chars`
    (`rollout.intention_chars`): the INTENTION line's free text after its tag."""
    if game in MULTI_LINE_GAMES:
        if not orders or game != "diplomacy":
            return None
        features = info.get("features") or {}
        legal = info.get("legal_orders") or {}
        if features.get("is_negotiation") or features.get("is_adjustment") or not legal:
            return None
        return orders_regex(legal, intention_chars)
    legal_actions = list(info.get("legal_actions") or [])
    return actions_regex(legal_actions, intention_chars) if actions and legal_actions else None
