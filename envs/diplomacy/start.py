"""Seeded start positions for Diplomacy: the board after a few years of bot play from the standard opening.

Why: one fixed opening gives every training and evaluation episode the same start state, so GRPO groups and
evaluation seeds differ only by the players' own randomness. A seeded start gives each seed its own
position, reproducible bit for bit, while staying a position real play reaches.

The recipe (`play_warm_up`), for a seed ``s`` and a range of years ``(lo, hi)``:
1. ``rng = seed_rng(s)``; the number of years is ``lo + rng.integers(hi - lo + 1)``, uniform in [lo, hi];
2. from Spring 1901 every live power plays, phase after phase, the orders of `ExpertBot`, except that each
   unit's order in movement and retreat phases is replaced with probability ``random_share`` (default 0.3)
   by a uniformly random legal order of that unit (the `RandomBot` rule), and in adjustment phases the
   whole power's builds or disbands come from `random_orders` with that probability; the draws come from
   ``rng``, power by power in `POWERS` order, location by location in sorted order;
3. play stops at the Spring movement phase ``years`` years later (1 year: S1902M, 3 years: S1904M), after
   that winter's adjustments. There is no negotiation in the warm-up.

So a start position is always a Spring movement phase with no pending retreats or adjustments; it keeps the
last warm-up phase's orders and results (what every power saw last) and no messages. Powers eliminated in
the warm-up are not in the game. Never imports `coplay`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from coplay_envs.core import seed_rng
from coplay_envs.diplomacy.bots import ExpertBot, random_orders
from coplay_envs.diplomacy.orders import POWERS, LegalOrderIndex, split_lines

if TYPE_CHECKING:
    from coplay_envs.diplomacy.env import DiplomacyEnv

#: Default range of warm-up years (inclusive): starts at S1902M, S1903M or S1904M.
START_YEARS: tuple[int, int] = (1, 3)
#: Default probability that a unit's warm-up order is a random legal order instead of the expert's.
START_RANDOM_SHARE: float = 0.3
#: Longest warm-up allowed: longer ones cost more time and drift toward finished games.
MAX_START_YEARS: int = 10
FIRST_YEAR = 1901


def parse_start_years(value: Any) -> tuple[int, int]:
    """``0`` (the standard opening), ``n`` (exactly n years) or ``(lo, hi)`` / ``[lo, hi]`` -> (lo, hi)."""
    pair = (value, value) if isinstance(value, int) and not isinstance(value, bool) else value
    if (not isinstance(pair, (tuple, list)) or len(pair) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in pair)
            or not 0 <= pair[0] <= pair[1] <= MAX_START_YEARS):
        raise ValueError(f"start_years={value!r}: expected an int or a pair (lo, hi) of ints with "
                         f"0 <= lo <= hi <= {MAX_START_YEARS}")
    return int(pair[0]), int(pair[1])


def check_random_share(value: Any) -> float:
    """`start_random_share` as a float in [0, 1], or a ValueError naming the value."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"start_random_share={value!r}: expected a number in [0, 1]")
    return float(value)


def mixed_orders(expert_action: str, legal_orders: dict[str, list[str]], phase_type: str, build_count: int,
                 random_share: float, rng: np.random.Generator) -> str:
    """One power's warm-up action: the expert's orders, each unit's replaced by a random legal order with
    probability `random_share` (adjustments: the whole power's, by `random_orders`)."""
    if not legal_orders:
        return ""
    if phase_type == "A":
        if rng.random() < random_share:
            return "\n".join(random_orders(legal_orders, phase_type, build_count, rng))
        return expert_action
    index = LegalOrderIndex(legal_orders)
    expert_by_loc: dict[str, str] = {}
    for line in split_lines(expert_action):
        found = index.match(line)
        if found is not None:
            expert_by_loc.setdefault(*found)
    orders = []
    for loc in sorted(legal_orders):
        if rng.random() < random_share or loc not in expert_by_loc:
            orders.append(legal_orders[loc][int(rng.integers(len(legal_orders[loc])))])
        else:
            orders.append(expert_by_loc[loc])
    return "\n".join(orders)


def play_warm_up(env: DiplomacyEnv, seed: int, years: tuple[int, int], random_share: float) -> int:
    """Reset `env` to the standard opening and play the recipe (module docstring) on it; `env` must have no
    negotiation rounds and a horizon longer than the warm-up. Returns the number of years played."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed={seed!r}: expected a non-negative int for a seeded start")
    rng = seed_rng(int(seed))
    played = years[0] + int(rng.integers(years[1] - years[0] + 1))
    target = f"S{FIRST_YEAR + played}M"
    bots = {power: ExpertBot(seed=int(seed), agent=power) for power in POWERS}
    observations, infos = env.reset()
    while env.agents and infos[env.agents[0]]["view"]["phase"] != target:
        actions = {}
        for power in env.agents:
            info = infos[power]
            view = info["view"]
            count = view["build_counts"][power] if view["phase_type"] == "A" else 0
            expert = bots[power].act(observations[power], info).action
            actions[power] = mixed_orders(expert, info["legal_orders"], view["phase_type"], count,
                                          random_share, rng)
        observations, _, _, _, infos = env.step(actions)
    return played
