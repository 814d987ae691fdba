"""Expert against random in Diplomacy: centres of one expert power among six random powers, against a
random power in the same seat with the same opponents' seeds, over seeded games.

Game g puts the measured seat at ``POWERS[g % 7]`` (every power in turn); the six other powers are
`RandomBot`s seeded ``1000 * g + i``; the seat is an `ExpertBot` in one run and a `RandomBot` (seed
``1000 * g + 7``) in the other. The figure is the seat's supply centres when the game ends (truncated after
`max_phases` engine phases). Game g starts from ``reset(seed=g)`` with ``start_years`` (default 0: the
standard 1901 opening, as the published figure was measured; ``(1, 3)`` gives the env's seeded starts).
Run: ``python -m coplay_envs.diplomacy.evaluate`` (prints JSON).

Never imports `coplay`.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from typing import Any

from coplay_envs.diplomacy.bots import ExpertBot, RandomBot
from coplay_envs.diplomacy.env import DiplomacyEnv
from coplay_envs.diplomacy.orders import POWERS

# Two-sided 95% Student t quantiles by degrees of freedom (beyond the table: the normal 1.96).
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
         10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101,
         19: 2.093, 20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060, 26: 2.056, 27: 2.052,
         28: 2.048, 29: 2.045, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980}


def t_interval(values: list[float]) -> tuple[float, float]:
    """(mean, half-width of the 95% t-interval)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, math.inf
    df = len(values) - 1
    quantile = _T975.get(df) or next((q for d, q in sorted(_T975.items()) if d >= df), 1.96)
    return mean, quantile * statistics.stdev(values) / math.sqrt(len(values))


def play_game(seat: str, seat_bot: Any, game_index: int, max_phases: int, negotiation_rounds: int,
              start_years: Any = 0) -> int:
    """Play one game; return the seat's supply centres at the end."""
    env = DiplomacyEnv(max_phases=max_phases, negotiation_rounds=negotiation_rounds, start_years=start_years)
    bots = {power: (seat_bot if power == seat else RandomBot(seed=1000 * game_index + i, agent=power))
            for i, power in enumerate(POWERS)}
    observations, infos = env.reset(seed=game_index)
    score = infos[seat]["score"]
    while env.agents:
        actions = {power: bots[power].act(observations[power], infos[power]).action for power in env.agents}
        observations, _, _, _, infos = env.step(actions)
        if seat in infos:
            score = infos[seat]["score"]
    return score


def evaluate(games: int = 28, max_phases: int = 20, negotiation_rounds: int = 0,
             start_years: Any = 0) -> dict[str, Any]:
    """Expert seat vs random seat over `games` seeded games (module docstring)."""
    start = time.perf_counter()
    expert, random_ = [], []
    for game_index in range(games):
        seat = POWERS[game_index % len(POWERS)]
        expert.append(play_game(seat, ExpertBot(seed=game_index, agent=seat), game_index, max_phases,
                                negotiation_rounds, start_years))
        random_.append(play_game(seat, RandomBot(seed=1000 * game_index + 7, agent=seat), game_index,
                                 max_phases, negotiation_rounds, start_years))
    expert_mean, expert_ci = t_interval(expert)
    random_mean, random_ci = t_interval(random_)
    return {
        "games": games, "max_phases": max_phases, "negotiation_rounds": negotiation_rounds,
        "start_years": start_years,
        "expert_centers_mean": round(expert_mean, 3), "expert_centers_ci95": round(expert_ci, 3),
        "random_centers_mean": round(random_mean, 3), "random_centers_ci95": round(random_ci, 3),
        "ratio": round(expert_mean / random_mean, 3) if random_mean else math.inf,
        "expert_centers": expert, "random_centers": random_,
        "seconds": round(time.perf_counter() - start, 1),
    }


if __name__ == "__main__":
    print(json.dumps(evaluate()))
