"""Diplomacy bots: `ExpertBot` (a supply-centre seeker that orders every unit) and `RandomBot` (a random
legal order per unit). Both read only `info["view"]`, `info["legal_orders"]` and `info["legal_actions"]`
(plus the static map in `board.py`), never `info["state"]`; each action is a `BotAction` with an intention
tag and a one-line reason. Constructed as ``Bot(seed=int, agent=<power>)``.

ExpertBot, per phase kind:
- negotiation (first round of a phase): plans its movement orders for the coming phase, then sends private
  and public messages derived from them (`negotiation.py`: support offers and requests, an alliance
  proposal, demilitarised zones, a public stance); later rounds of the same phase: nothing;
- movement: scores each unit's legal moves (an unowned centre most, neutral above foreign, Fall captures
  above Spring approaches, then distance to the nearest unowned centre) and holds (staying on an unowned
  centre in Fall, guarding a threatened own centre); assigns units greedily to distinct destinations, then
  turns idle units into supports of moves into centres that a foreign unit can also reach, or of holds on
  threatened centres; when the game has negotiation rounds, units left holding support friendly powers'
  units instead (`negotiation.offer_supports`: what its messages offered); without negotiation rounds its
  orders are exactly those of the plain centre seeker (the published expert-vs-random figure);
- retreats: to an unowned centre, else an own centre, else the place nearest an unowned centre, else disband;
- adjustments: builds on every free home centre it may (fleet or army by a per-power fleet share), disbands
  the units farthest from its centres.

Never imports `coplay`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from coplay_envs.core import BotAction, seed_rng
from coplay_envs.diplomacy.board import distances_from, supply_centers, unit_type_and_loc
from coplay_envs.diplomacy.features import threatened
from coplay_envs.diplomacy.negotiation import friends, negotiation_lines, offer_supports
from coplay_envs.diplomacy.orders import POWERS

RANDOM_PHRASES: tuple[str, ...] = ("hello", "peace?", "let us work together", "stay out of my way")
FLEET_SHARE: dict[str, float] = {"ENGLAND": 0.7, "TURKEY": 0.4, "ITALY": 0.4, "FRANCE": 0.35,
                                 "GERMANY": 0.25, "RUSSIA": 0.3, "AUSTRIA": 0.15}


def random_orders(legal_orders: dict[str, list[str]], phase_type: str, build_count: int,
                  rng: np.random.Generator) -> list[str]:
    """A uniformly random legal order per orderable location; in adjustments as many builds as allowed
    (random sites, random unit type or WAIVE) or exactly the required disbands (random units)."""
    locs = sorted(legal_orders)
    if phase_type == "A":
        chosen = [locs[i] for i in sorted(rng.permutation(len(locs))[:abs(build_count)])]
        if build_count < 0:
            return [next(order for order in legal_orders[loc] if order.endswith(" D")) for loc in chosen]
        return [legal_orders[loc][int(rng.integers(len(legal_orders[loc])))] for loc in chosen]
    return [legal_orders[loc][int(rng.integers(len(legal_orders[loc])))] for loc in locs]


class RandomBot:
    """Random legal order per unit; in negotiation a uniformly chosen legal action (a short stock phrase
    replaces ``<text>``)."""

    def __init__(self, seed: int = 0, agent: str | None = None) -> None:
        self.agent = agent
        self.rng = seed_rng(seed)

    def act(self, observation: str, info: dict[str, Any]) -> BotAction:
        view = info["view"]
        if view["stage"] == "negotiation":
            legal = info["legal_actions"]
            action = legal[int(self.rng.integers(len(legal)))]
            phrase = RANDOM_PHRASES[int(self.rng.integers(len(RANDOM_PHRASES)))]
            return BotAction(action.replace("<text>", phrase), "EXPLORE", "random legal message")
        legal_orders = info["legal_orders"]
        if not legal_orders:
            return BotAction("", "EXPLORE", "nothing to order")
        count = view["build_counts"][view["power"]] if view["phase_type"] == "A" else 0
        orders = random_orders(legal_orders, view["phase_type"], count, self.rng)
        return BotAction("\n".join(orders), "EXPLORE", "random legal order per unit")


def _moves(orders: list[str]) -> list[tuple[str, str]]:
    """(destination province, order) of the direct move orders in a unit's legal orders (convoyed moves
    are left out: they fail unless fleets are also ordered to convoy)."""
    found = []
    for order in orders:
        words = order.split()
        if len(words) == 4 and words[2] == "-":
            found.append((words[3][:3], order))
    return found


class ExpertBot:
    """Supply-centre seeker (module docstring). Deterministic given the view and `seed` (the seed fixes
    its partner preference and when it speaks in public)."""

    def __init__(self, seed: int = 0, agent: str | None = None) -> None:
        self.agent = agent
        self.seed = seed

    def act(self, observation: str, info: dict[str, Any]) -> BotAction:
        view, legal_orders = info["view"], info["legal_orders"]
        if view["stage"] == "negotiation":
            return self._negotiation(view, legal_orders)
        if not legal_orders:
            return BotAction("", "POSITION", "nothing to order this phase")
        if view["phase_type"] == "R":
            return self._retreats(view, legal_orders)
        if view["phase_type"] == "A":
            return self._adjustments(view, legal_orders)
        return self._movement(view, legal_orders)

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _targets(view: dict[str, Any]) -> tuple[set[str], set[str]]:
        """(centres not mine, centres owned by nobody)."""
        power = view["power"]
        owned = {center for name in POWERS for center in view["centers"][name]}
        centers = set(supply_centers())
        return centers - set(view["centers"][power]), centers - owned

    @staticmethod
    def _distance_to_targets(unit_type: str, loc: str, targets: set[str]) -> int:
        distances = distances_from(unit_type, loc)
        return min((distances[t] for t in targets if t in distances), default=20)

    # ------------------------------------------------------------------ negotiation
    def _negotiation(self, view: dict[str, Any], legal_orders: dict[str, list[str]]) -> BotAction:
        """Messages derived from the movement orders it will give (`negotiation.py`), in round 1 only."""
        if view["negotiation_round"] > 1:
            return BotAction("", "SETUP", "said my piece in round 1; my orders stand")
        if not legal_orders:
            return BotAction("", "SETUP", "no units to negotiate about")
        orders, _, _ = self._plan_movement(view, legal_orders)
        lines, described = negotiation_lines(view, orders, self.seed)
        return BotAction("\n".join(lines), "SETUP", "from my planned orders: " + ", ".join(described))

    # ------------------------------------------------------------------ movement
    def _movement(self, view: dict[str, Any], legal_orders: dict[str, list[str]]) -> BotAction:
        orders, intention, reason = self._plan_movement(view, legal_orders)
        return BotAction("\n".join(orders), intention, reason)

    def _plan_movement(self, view: dict[str, Any],
                       legal_orders: dict[str, list[str]]) -> tuple[list[str], str, str]:
        """(orders sorted by location, intention tag, reason) of a movement phase (module docstring)."""
        power = view["power"]
        fall = view["phase"].startswith("F")
        unowned, neutral = self._targets(view)
        mine = set(view["centers"][power])
        foreign_at = {unit[2:5]: name for name in POWERS if name != power for unit in view["units"][name]}
        threatened_mine = set(threatened(view, power, sorted(mine)))
        units = {loc: " ".join(orders[0].split()[:2]) for loc, orders in legal_orders.items()}

        options: list[tuple[float, str, str, str]] = []  # (score, loc, order, destination)
        for loc, orders in legal_orders.items():
            unit_type, unit_loc = unit_type_and_loc(units[loc])
            hold = f"{units[loc]} H"
            if loc in unowned and fall:
                hold_score = 20.0
            elif loc in threatened_mine:
                hold_score = 9.0 if loc in view["homes"][power] else 8.0
            else:
                hold_score = 2.5 / (1 + self._distance_to_targets(unit_type, unit_loc, unowned)) - 0.1
            options.append((hold_score, loc, hold, loc))
            for dest, order in _moves(orders):
                if dest in unowned:
                    score = 10.0 if dest in neutral else 7.0
                    score += 3.0 if fall else 0.0
                    score -= 4.0 if dest in foreign_at else 0.0
                elif dest in threatened_mine and dest not in foreign_at:
                    score = 6.0
                else:
                    score = 3.0 / (1 + self._distance_to_targets(unit_type, dest, unowned))
                options.append((score, loc, order, dest))

        chosen: dict[str, tuple[float, str, str]] = {}
        claimed: set[str] = set()
        for score, loc, order, dest in sorted(options, key=lambda o: (-o[0], o[2])):
            if loc in chosen or dest in claimed:
                continue
            chosen[loc] = (score, order, dest)
            claimed.add(dest)
        for loc in legal_orders:  # every destination taken: hold (a bounce with an own unit is avoided)
            chosen.setdefault(loc, (0.0, f"{units[loc]} H", loc))

        supports = self._supports(view, legal_orders, chosen, unowned, threatened_mine, foreign_at)
        by_loc = {loc: supports.get(loc, chosen[loc][1]) for loc in sorted(legal_orders)}
        if view["negotiation_rounds"] > 0:
            by_loc = offer_supports(by_loc, legal_orders, view, friends(view, power, self.seed))
        offered = sum(1 for loc, order in by_loc.items() if order != supports.get(loc, chosen[loc][1]))
        gains = sorted({dest for loc, (_, order, dest) in chosen.items()
                        if dest in unowned and loc not in supports})
        if gains:
            intention = "COLLECT" if any(dest in neutral for dest in gains) else "ATTACK"
            reason = f"move on centres {', '.join(gains)} with {len(supports)} support(s)"
        elif threatened_mine:
            intention, reason = "DEFEND", f"guard threatened centres {', '.join(sorted(threatened_mine))}"
        else:
            intention, reason = "POSITION", "advance units toward the nearest unowned centres"
        if offered:
            reason += f"; {offered} support(s) offered to other powers"
        return list(by_loc.values()), intention, reason

    @staticmethod
    def _supports(view: dict[str, Any], legal_orders: dict[str, list[str]],
                  chosen: dict[str, tuple[float, str, str]], unowned: set[str], threatened_mine: set[str],
                  foreign_at: dict[str, str]) -> dict[str, str]:
        """Turn low-value units into supports of contested moves into centres and holds on threatened ones."""
        power = view["power"]
        contested: dict[str, str] = {}  # supported part of an order ("A PAR - BUR" / "A PAR") -> reason
        for loc, (_, order, dest) in chosen.items():
            words = order.split()
            contested_dest = dest in foreign_at or threatened(view, power, [dest])
            if words[2] == "-" and dest in unowned and contested_dest:
                contested[" ".join(words[:4])] = dest
            elif words[2] == "H" and loc in threatened_mine:
                contested[" ".join(words[:2])] = loc
        incoming = {dest for _, order, dest in chosen.values() if order.split()[2] == "-"}
        supports: dict[str, str] = {}
        helped: set[str] = set()
        for loc in sorted(legal_orders, key=lambda place: chosen[place][0]):
            # a unit that supports stays put: not when it guards or takes a centre, or an own unit moves in
            if chosen[loc][0] >= 5.0 or loc in contested.values() or loc in incoming:
                continue
            for order in legal_orders[loc]:
                words = order.split()
                if len(words) >= 5 and words[2] == "S":
                    supported = " ".join(words[3:])
                    if supported in contested and supported not in helped:
                        supports[loc] = order
                        helped.add(supported)
                        break
        return supports

    # ------------------------------------------------------------------ retreats / adjustments
    def _retreats(self, view: dict[str, Any], legal_orders: dict[str, list[str]]) -> BotAction:
        unowned, _ = self._targets(view)
        mine = set(view["centers"][view["power"]])
        taken: set[str] = set()
        orders = []
        for loc in sorted(legal_orders):
            best: tuple[float, str] | None = None
            for order in legal_orders[loc]:
                words = order.split()
                if words[2] != "R" or words[3][:3] in taken:
                    continue
                dest = words[3]
                if dest[:3] in unowned:
                    score = 10.0
                elif dest[:3] in mine:
                    score = 8.0
                else:
                    score = 5.0 / (1 + self._distance_to_targets(words[0], dest, unowned))
                if best is None or (score, order) > best:
                    best = (score, order)
            if best is None:
                orders.append(next(order for order in legal_orders[loc] if order.endswith(" D")))
            else:
                orders.append(best[1])
                taken.add(best[1].split()[3][:3])
        return BotAction("\n".join(orders), "SURVIVE", "retreat toward centres, disband only when boxed in")

    def _adjustments(self, view: dict[str, Any], legal_orders: dict[str, list[str]]) -> BotAction:
        power = view["power"]
        count = view["build_counts"][power]
        units = view["units"][power]
        if count < 0:
            mine = set(view["centers"][power])

            def distance_home(unit: str) -> int:
                distances = distances_from(*unit_type_and_loc(unit))
                return min((distances[c] for c in mine if c in distances), default=20)

            candidates = sorted((unit for unit in units if unit[2:5] in legal_orders),
                                key=lambda unit: (-distance_home(unit), unit))
            disband = candidates[:-count]
            return BotAction("\n".join(f"{unit} D" for unit in disband), "SURVIVE",
                             f"disband the {len(disband)} unit(s) farthest from own centres")
        fleets = sum(1 for unit in units if unit.startswith("F"))
        total = len(units)
        orders = []
        for loc in sorted(legal_orders)[:count]:
            builds = [order for order in legal_orders[loc] if order.endswith(" B")]
            fleet_builds = sorted(order for order in builds if order.startswith("F"))
            want_fleet = bool(fleet_builds) and fleets < FLEET_SHARE[power] * (total + 1)
            army = next((o for o in builds if o.startswith("A")), builds[0])
            order = fleet_builds[0] if want_fleet else army
            fleets += order.startswith("F")
            total += 1
            orders.append(order)
        return BotAction("\n".join(orders), "BUILD", f"build {len(orders)} unit(s) on free home centres")
