"""What the expert bot says in negotiation: messages to specific powers and to all, derived from the movement
orders it intends to give right after, so every proposal is one its own orders keep.

Why derived from orders: teacher data whose words and deeds agree teaches that messages carry information;
canned lines teach the model to ignore them.

Partner and rival (from the view only): a power's *neighbours* are the other powers with a unit that could
move next to, or into, a province where it has a unit or a centre (one move, no convoys). The *partner* is the
neighbour threatening the fewest of its centres (ties broken by a preference order fixed by the bot's seed);
the *rival* is the other neighbour threatening the most (at least one); its *friends* are the partner, then
the other neighbours but the rival. When the game has negotiation rounds, the expert turns units that would
only hold into supports of its friends' units, the partner's first (`offer_supports`): a move into a neutral
centre it does not enter itself, else the hold of a unit standing on none of its centres; never a unit that
could move into one of its centres. A supporting unit stays put and defends exactly as a holding one, so the
offer costs it nothing.

Messages (`negotiation_lines`), in this order, at most `MAX_EXPERT_LINES` lines:
- support offers, one line per supported power: ``to ITALY: I will support your A VEN - TRI with my A TYR.``
  (or ``your A VEN to hold``), for every order of its own that supports another power's unit;
- a support request to the partner for one of its own moves into a centre that a third power can also
  reach, when a partner unit can reach it too: ``to ITALY: please support my A TYR - VIE with your A VEN.``;
- an alliance proposal to the partner, only when none of its moves enters a partner centre or a province a
  partner unit stands on: ``to ITALY: I propose an alliance against RUSSIA: ...``;
- demilitarised zones with up to two other neighbours: an empty province both could enter next and that none
  of its orders moves into or supports a move into (provinces next to its own centres first):
  ``to GERMANY: let us keep RUH demilitarised: my units stay out of it this season if yours do.``;
- one public line (``to ALL: ...``) with probability `PUBLIC_SHARE` per phase (seeded by the bot's seed and
  the phase), or whenever it has no private line: the powers whose centres it moves on, else the threatened
  centres it guards, else that it takes no other power's centre this season.
Later negotiation rounds of the same phase add nothing (the expert said its piece in round 1).

Never imports `coplay`; reads only the view, the legal orders and the static map.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from coplay_envs.diplomacy.board import neighbours, supply_centers, unit_type_and_loc
from coplay_envs.diplomacy.features import move_destinations, threatened
from coplay_envs.diplomacy.orders import MAX_MESSAGE_CHARS, POWERS

#: Most message lines the expert sends in one round (the env allows `MAX_MESSAGES_PER_ROUND`).
MAX_EXPERT_LINES: int = 5
#: Probability of a public line in a phase when the expert also has private lines.
PUBLIC_SHARE: float = 0.5
#: Most demilitarised-zone proposals per round.
MAX_DMZ: int = 2
SEASON_INDEX = {"S": 0, "F": 1, "W": 2}


def _locations(units: list[str]) -> set[str]:
    return {unit[2:5] for unit in units}


def preference_order(seed: int, power: str) -> list[str]:
    """The other powers in an order fixed by (seed, power): the tie-break of partner and rival."""
    rng = np.random.default_rng([int(seed), POWERS.index(power)])
    others = [name for name in POWERS if name != power]
    return [others[i] for i in rng.permutation(len(others))]


def phase_rng(seed: int, power: str, phase: str) -> np.random.Generator:
    """A generator fixed by (seed, power, phase), so a message choice does not depend on call history."""
    year = int(phase[1:5]) if phase[1:5].isdigit() else 0
    return np.random.default_rng([int(seed), POWERS.index(power), year, SEASON_INDEX.get(phase[:1], 3)])


def neighbour_threats(view: dict[str, Any], power: str) -> dict[str, int]:
    """Neighbour powers (module docstring) -> how many of `power`'s centres their units could move into."""
    my_units = view["units"][power]
    my_places = _locations(my_units) | set(view["centers"][power])
    my_reach = move_destinations(my_units)
    found: dict[str, int] = {}
    for other in POWERS:
        units = view["units"][other]
        if other == power or not units:
            continue
        their_reach = move_destinations(units)
        if their_reach & (my_places | my_reach) or my_reach & _locations(units):
            found[other] = len(their_reach & set(view["centers"][power]))
    return found


def partner_and_rival(view: dict[str, Any], power: str, seed: int) -> tuple[str | None, str | None]:
    """(partner, rival) among the neighbours (module docstring); None where there is none."""
    threats = neighbour_threats(view, power)
    if not threats:
        return None, None
    rank = {name: i for i, name in enumerate(preference_order(seed, power))}
    partner = min(threats, key=lambda name: (threats[name], rank[name]))
    rivals = [name for name in threats if name != partner and threats[name] > 0]
    rival = max(rivals, key=lambda name: (threats[name], -rank[name])) if rivals else None
    return partner, rival


def friends(view: dict[str, Any], power: str, seed: int) -> list[str]:
    """The neighbours other than the rival, the partner first, then by the seed's preference order."""
    partner, rival = partner_and_rival(view, power, seed)
    rank = {name: i for i, name in enumerate(preference_order(seed, power))}
    others = sorted((name for name in neighbour_threats(view, power) if name not in (partner, rival)),
                    key=rank.__getitem__)
    return ([partner] if partner else []) + others


def offer_supports(orders: dict[str, str], legal_orders: dict[str, list[str]], view: dict[str, Any],
                   friendly: list[str]) -> dict[str, str]:
    """`orders` (location -> order) with holding units turned into supports of `friendly` powers' units
    (module docstring), earlier powers first; one support per supported unit."""
    power = view["power"]
    mine = set(view["centers"][power])
    rank_of = {unit: i for i, name in enumerate(friendly) for unit in view["units"][name]
               if not mine & neighbours(*unit_type_and_loc(unit))}  # never a unit poised on its centres
    owned = {center for name in POWERS for center in view["centers"][name]}
    neutral = set(supply_centers()) - owned
    entered = {order.split()[3][:3] for order in orders.values() if order.split()[2] == "-"}
    helped: set[str] = set()
    result = dict(orders)
    for loc in sorted(orders):
        if orders[loc].split()[2] != "H":
            continue
        best: tuple[int, int, str] | None = None
        for order in legal_orders.get(loc, []):
            words = order.split()
            supported = " ".join(words[3:5])
            if len(words) < 5 or words[2] != "S" or supported not in rank_of or supported in helped:
                continue
            if len(words) == 7 and words[6][:3] in neutral and words[6][:3] not in entered:
                kind = 0
            elif len(words) == 5 and words[4][:3] not in mine:
                kind = 1
            else:
                continue
            if best is None or (rank_of[supported], kind, order) < best:
                best = (rank_of[supported], kind, order)
        if best is not None:
            result[loc] = best[2]
            helped.add(" ".join(best[2].split()[3:5]))
    return result


def _owner_of_units(view: dict[str, Any]) -> dict[str, str]:
    return {unit: name for name in POWERS for unit in view["units"][name]}


def _support_offers(view: dict[str, Any], orders: list[str]) -> list[tuple[str, str]]:
    """(recipient, text) per power whose units its orders support."""
    owner = _owner_of_units(view)
    offers: dict[str, list[str]] = {}
    for order in orders:
        words = order.split()
        if len(words) < 5 or words[2] != "S":
            continue
        supported = " ".join(words[3:5])
        name = owner.get(supported)
        if name is None or name == view["power"]:
            continue
        what = " ".join(words[3:]) if len(words) == 7 else f"{supported} to hold"
        offers.setdefault(name, []).append(f"your {what} with my {' '.join(words[:2])}")
    return [(name, "I will support " + ", and ".join(parts[:3]) + ".")
            for name, parts in sorted(offers.items())]


def _support_request(view: dict[str, Any], orders: list[str], partner: str) -> tuple[str, str] | None:
    """Ask the partner to support one of its moves into a centre a third power can also reach."""
    power = view["power"]
    centers = set(supply_centers())
    third_reach = set().union(*(move_destinations(view["units"][name]) for name in POWERS
                                if name not in (power, partner)))
    for order in orders:
        words = order.split()
        dest = words[3][:3] if len(words) == 4 and words[2] == "-" else ""
        if dest not in centers or dest not in third_reach:
            continue
        helpers = sorted(unit for unit in view["units"][partner]
                         if unit[2:5] != dest and dest in neighbours(*unit_type_and_loc(unit)))
        if helpers:
            return partner, f"please support my {order} with your {helpers[0]}."
    return None


def _destination(order: str) -> str | None:
    """The province a move order, or a supported move, goes into (``A MUN S A PAR - BUR`` -> ``BUR``)."""
    words = order.split()
    return words[words.index("-") + 1][:3] if "-" in words else None


def _alliance(view: dict[str, Any], orders: list[str], partner: str,
              rival: str | None) -> tuple[str, str] | None:
    """Propose an alliance when none of its moves enters a partner centre or a partner unit's province."""
    partner_places = set(view["centers"][partner]) | _locations(view["units"][partner])
    if any(order.split()[2] == "-" and _destination(order) in partner_places for order in orders):
        return None
    against = f" against {rival}" if rival else ""
    return partner, (f"I propose an alliance{against}: none of my units moves into your centres or onto your "
                     "units this season.")


def _dmz(view: dict[str, Any], orders: list[str], others: list[str]) -> list[tuple[str, str, str]]:
    """(recipient, zone, text): demilitarised zones with up to `MAX_DMZ` of `others` (module docstring)."""
    power = view["power"]
    occupied = {unit[2:5] for name in POWERS for unit in view["units"][name]}
    entered = {_destination(order) for order in orders} - {None}
    near_mine = set().union(*(neighbours(kind, center) for center in view["centers"][power] for kind in "AF"))
    my_reach = move_destinations(view["units"][power])
    found: list[tuple[str, str, str]] = []
    used: set[str] = set()
    for other in others:
        shared = (my_reach & move_destinations(view["units"][other])) - occupied - entered - used
        if not shared:
            continue
        zone = min(shared, key=lambda place: (place not in near_mine, place))
        used.add(zone)
        text = f"let us keep {zone} demilitarised: my units stay out of it this season if yours do."
        found.append((other, zone, text))
        if len(found) >= MAX_DMZ:
            break
    return found


def _public(view: dict[str, Any], orders: list[str]) -> str:
    """The public line: whose centres it moves on, else the threatened centres it guards, else peace."""
    power = view["power"]
    owner_of_center = {center: name for name in POWERS if name != power for center in view["centers"][name]}
    attacked = sorted({owner_of_center[order.split()[3][:3]] for order in orders
                       if order.split()[2] == "-" and order.split()[3][:3] in owner_of_center})
    if attacked:
        return (f"{power} has a quarrel with {' and '.join(attacked)} only; every other power may count on "
                "peace.")
    staying = {order.split()[1][:3] for order in orders if order.split()[2] != "-"}
    guarded = sorted(set(threatened(view, power, sorted(view["centers"][power]))) & staying)
    if guarded:
        return f"{power} holds {', '.join(guarded)}; whoever attacks them makes an enemy."
    return f"{power} takes no centre of another power this season."


def negotiation_lines(view: dict[str, Any], orders: list[str], seed: int) -> tuple[list[str], list[str]]:
    """(message lines, short descriptions for the reason) of the expert's first negotiation round, derived
    from its intended movement `orders` (module docstring)."""
    power = view["power"]
    partner, rival = partner_and_rival(view, power, seed)
    private: list[tuple[str, str, str]] = []  # (recipient, text, description)
    for name, text in _support_offers(view, orders):
        private.append((name, text, f"support offer to {name}"))
    if partner is not None:
        request = _support_request(view, orders, partner)
        if request is not None:
            private.append((*request, f"support request to {partner}"))
        alliance = _alliance(view, orders, partner, rival)
        if alliance is not None:
            private.append((*alliance, f"alliance to {partner}"))
    threats = neighbour_threats(view, power)
    rank = {name: i for i, name in enumerate(preference_order(seed, power))}
    others = sorted((name for name in threats if name != partner),
                    key=lambda name: (-threats[name], rank[name]))
    for name, zone, text in _dmz(view, orders, others):
        private.append((name, text, f"DMZ {zone} with {name}"))
    private = private[:MAX_EXPERT_LINES - 1]
    lines = [f"to {name}: {text[:MAX_MESSAGE_CHARS]}" for name, text, _ in private]
    described = [description for _, _, description in private]
    if not private or phase_rng(seed, power, view["phase"]).random() < PUBLIC_SHARE:
        lines.append(f"to ALL: {_public(view, orders)[:MAX_MESSAGE_CHARS]}")
        described.append("public stance")
    return lines, described
