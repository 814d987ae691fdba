"""Diplomacy features: a flat dict of named numbers and booleans computed from one power's view only
(plus the static map in `board.py`), the vocabulary skills are written in.

Features (all for the viewing power, "mine" = owned by it):
- ``my_centers``, ``my_units``: supply centres owned, units on the board.
- ``my_home_centers_held``: home centres it owns; ``my_home_centers_lost``: home centres it does not own.
- ``my_build_count``: adjustment phases: builds allowed (> 0) or disbands required (< 0); else 0.
- ``my_dislodged``: its units that must retreat now.
- ``my_rank``: 1 + number of powers with more centres. ``max_other_centers``: most centres of another power.
- ``center_lead``: my_centers - max_other_centers. ``neutral_centers``: supply centres nobody owns.
- ``alive_powers``: powers still in the game. ``solo_win``: my_centers >= 18.
- ``is_negotiation``, ``is_movement``, ``is_retreat``, ``is_adjustment``: the current stage / phase kind.
- ``year``: the game year (1901 ...). ``phases_left``: engine phases left before truncation.
- ``n_orderable``: locations it must (or may) order now.
- ``units_on_unowned_centers``: its units standing on a supply centre it does not own (a Fall capture).
- ``reachable_unowned_centers``, ``reachable_neutral_centers``: in a movement phase, distinct supply centres
  (not mine / owned by nobody) that one of its units can enter with one direct move (no convoy); else 0.
- ``threatened_centers``: its centres that a foreign unit could move into next (static adjacency).
- ``threatened_home_centers``: the same restricted to its home centres.
- ``messages_received``, ``messages_sent``: messages in its view (the latest negotiation: this phase's, or
  for retreats and adjustments the one before their movement phase) from others / by itself.
- ``private_messages_received``, ``public_messages_received``: of those received, the ones addressed to it
  alone / to ALL. ``private_messages_sent``: of those sent, the ones to a single power.
- ``private_senders``: distinct powers that sent it a private message.
- ``threatening_senders``: distinct powers that sent it a message (private or public) and have a unit that
  could move into one of its centres next (static adjacency, like ``threatened_centers``).
- ``last_bounced``, ``last_dislodged``: its units whose last-phase order bounced / that were dislodged.

Never imports `coplay`; reads no engine state.
"""

from __future__ import annotations

import functools
from typing import Any

from coplay_envs.diplomacy.board import neighbours, supply_centers, unit_type_and_loc
from coplay_envs.diplomacy.orders import POWERS

SOLO_CENTERS = 18
SUPPLY_CENTERS = frozenset(supply_centers())


@functools.lru_cache(maxsize=64)
def _reach(units: tuple[str, ...]) -> frozenset[str]:
    """Provinces that some unit among `units` could move into next (one move, no convoys)."""
    provinces: set[str] = set()
    for unit in units:
        provinces.update(neighbours(*unit_type_and_loc(unit)))
    return frozenset(provinces)


def threatened(view: dict[str, Any], power: str, provinces: list[str]) -> list[str]:
    """Provinces among `provinces` that a unit of another power could move into next."""
    reached = set().union(*(_reach(tuple(view["units"][name])) for name in POWERS if name != power))
    return [province for province in provinces if province in reached]


def move_destinations(units: list[str]) -> set[str]:
    """Provinces that one of `units` could enter with one direct move (the legal non-convoy moves)."""
    found: set[str] = set()
    for unit in units:
        found.update(neighbours(*unit_type_and_loc(unit)))
    return found


def compute_features(view: dict[str, Any]) -> dict[str, int | float | bool]:
    """The features of one power's view (module docstring)."""
    power = view["power"]
    mine = set(view["centers"][power])
    owned = {center for name in POWERS for center in view["centers"][name]}
    homes = view["homes"][power]
    counts = view["center_counts"]
    others = [counts[name] for name in POWERS if name != power]
    my_units = view["units"][power]
    phase_type = view["phase_type"]
    stage = view["stage"]
    destinations = move_destinations(my_units) if phase_type == "M" and view["legal_orders"] else set()
    centers = SUPPLY_CENTERS
    threatened_mine = set(threatened(view, power, sorted(mine)))
    my_unit_names = {" ".join(order.split()[:2]) for order in view["last_orders"].get(power, [])}
    last_results = view["last_results"]
    year_text = view["phase"][1:5]
    received = [message for message in view["messages"] if message["sender"] != power]
    private_in = [message for message in received if message["to"] != "ALL"]
    senders = {message["sender"] for message in received if message["sender"] in POWERS}
    threatening = {name for name in senders if mine & _reach(tuple(view["units"][name]))}
    return {
        "my_centers": len(mine),
        "my_units": len(my_units),
        "my_home_centers_held": sum(1 for home in homes if home in mine),
        "my_home_centers_lost": sum(1 for home in homes if home not in mine),
        "my_build_count": view["build_counts"][power] if phase_type == "A" else 0,
        "my_dislodged": len(view["dislodged"][power]),
        "my_rank": 1 + sum(1 for count in others if count > len(mine)),
        "max_other_centers": max(others),
        "center_lead": len(mine) - max(others),
        "neutral_centers": len(centers - owned),
        "alive_powers": len(view["alive"]),
        "solo_win": len(mine) >= SOLO_CENTERS,
        "is_negotiation": stage == "negotiation",
        "is_movement": phase_type == "M" and stage == "orders",
        "is_retreat": phase_type == "R",
        "is_adjustment": phase_type == "A",
        "year": int(year_text) if year_text.isdigit() else 0,
        "phases_left": max(0, view["max_phases"] - view["phases_played"]),
        "n_orderable": len(view["legal_orders"]),
        "units_on_unowned_centers": sum(1 for unit in my_units
                                        if unit[2:5] in centers and unit[2:5] not in mine),
        "reachable_unowned_centers": len((destinations & centers) - mine),
        "reachable_neutral_centers": len((destinations & centers) - owned),
        "threatened_centers": len(threatened_mine),
        "threatened_home_centers": sum(1 for home in homes if home in threatened_mine),
        "messages_received": len(received),
        "messages_sent": sum(1 for message in view["messages"] if message["sender"] == power),
        "private_messages_received": len(private_in),
        "public_messages_received": len(received) - len(private_in),
        "private_messages_sent": sum(1 for message in view["messages"]
                                     if message["sender"] == power and message["to"] != "ALL"),
        "private_senders": len({message["sender"] for message in private_in}),
        "threatening_senders": len(threatening),
        "last_bounced": sum(1 for unit in my_unit_names if "bounce" in last_results.get(unit, [])),
        "last_dislodged": sum(1 for unit in my_unit_names if "dislodged" in last_results.get(unit, [])),
    }
