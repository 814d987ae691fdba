"""Diplomacy env speed against a raw `diplomacy.Game` loop on the same seeded orders.

Both loops play the same games: 7 powers each choose a uniformly random legal order per unit
(`coplay_envs.diplomacy.bots.random_orders`, one seeded generator per power, the same seeds in both loops),
20 engine phases per game (or until a solo win), no negotiation rounds.
- env: `DiplomacyEnv.step` with all 7 powers' actions as text (parsing, legality, observation text, view,
  features and state for every power every phase), the orders chosen by `RandomBot` from `info`;
- raw: `Game.get_all_possible_orders()` + `get_orderable_locations()` each phase (the legal orders, sorted
  the same way), `set_orders`, `process`.
The env submits its checked, canonical orders with ``set_orders(..., expand=False)``; the raw loop uses the
engine's default (``expand=True``), and is also timed with ``expand=False`` (``raw_no_expand``) so the gain
from that choice is visible. All loops must end in the same positions (checked). Phases/s on one core
(single process; CPU time of this process, so other jobs on a shared machine distort little), median over
`repeats` (runs interleaved); overhead = raw / env - 1 (target <= 0.20).

Run: ``python -m benchmarks.env_bench.diplomacy`` (prints JSON).
"""

from __future__ import annotations

import json
import statistics
import time
from importlib import metadata
from typing import Any

from diplomacy import Game

from coplay_envs.core import seed_rng
from coplay_envs.diplomacy.bots import RandomBot, random_orders
from coplay_envs.diplomacy.env import DiplomacyEnv
from coplay_envs.diplomacy.orders import POWERS

COMMAND = "python -m benchmarks.env_bench.diplomacy"
GAMES = 10
MAX_PHASES = 20


def time_env(seeds: list[int]) -> tuple[float, list[dict[str, Any]]]:
    """(phases/s, final engine states) through `DiplomacyEnv` with `RandomBot`s."""
    finals, phases = [], 0
    elapsed = 0.0
    for seed in seeds:
        # the raw loop starts from the standard opening (S1901M), so the env does too
        env = DiplomacyEnv(max_phases=MAX_PHASES, negotiation_rounds=0, start_years=0)
        bots = {power: RandomBot(seed=1000 * seed + i, agent=power) for i, power in enumerate(POWERS)}
        start = time.process_time()
        observations, infos = env.reset(seed=seed)
        while env.agents:
            actions = {power: bots[power].act(observations[power], infos[power]).action
                       for power in env.agents}
            observations, _, _, _, infos = env.step(actions)
            phases += 1
        elapsed += time.process_time() - start
        finals.append(next(iter(infos.values()))["state"]["engine"])
    return phases / elapsed, finals


def time_raw(seeds: list[int], expand: bool = True) -> tuple[float, list[dict[str, Any]]]:
    """(phases/s, final engine states) of a raw `diplomacy.Game` loop listing legal orders each phase;
    `expand=False` skips the engine's order re-parsing (the env does that, having checked legality)."""
    finals, phases = [], 0
    elapsed = 0.0
    for seed in seeds:
        rngs = {power: seed_rng(1000 * seed + i) for i, power in enumerate(POWERS)}
        start = time.process_time()
        game = Game()
        played = 0
        while played < MAX_PHASES and not game.is_game_done:
            possible = game.get_all_possible_orders()
            orderable = game.get_orderable_locations()
            state = game.get_state()
            for power in POWERS:
                legal = {loc: sorted(possible[loc]) for loc in orderable[power]}
                if not legal:
                    continue
                count = state["builds"][power]["count"] if game.phase_type == "A" else 0
                game.set_orders(power, random_orders(legal, game.phase_type, count, rngs[power]),
                                expand=expand)
            game.process()
            played += 1
        elapsed += time.process_time() - start
        phases += played
        final = game.get_state()
        del final["timestamp"]
        finals.append(final)
    return phases / elapsed, finals


def run(repeats: int = 5) -> dict[str, Any]:
    """Median phases/s of the env and the raw loop over `repeats` interleaved runs."""
    seeds = list(range(GAMES))
    Game()  # the first Game() in a process loads and caches the map (about 0.1-0.7 s): keep it out of timing
    env_rates, raw_rates, fast_rates = [], [], []
    for _ in range(repeats):
        env_rate, env_finals = time_env(seeds)
        raw_rate, raw_finals = time_raw(seeds)
        fast_rate, fast_finals = time_raw(seeds, expand=False)
        if not env_finals == raw_finals == fast_finals:
            raise AssertionError("env and raw loops ended in different positions on the same seeded orders")
        env_rates.append(env_rate)
        raw_rates.append(raw_rate)
        fast_rates.append(fast_rate)
    env_median, raw_median = statistics.median(env_rates), statistics.median(raw_rates)
    fast_median = statistics.median(fast_rates)
    return {
        "game": "diplomacy",
        "command": COMMAND,
        "unit": "engine phases per CPU second, 7 powers ordering, one core",
        "games_per_repeat": GAMES, "max_phases": MAX_PHASES, "repeats": repeats,
        "env_phases_per_s": round(env_median, 1),
        "raw_phases_per_s": round(raw_median, 1),
        "ratio_env_to_raw": round(env_median / raw_median, 3),
        "overhead": round(raw_median / env_median - 1, 3),
        "target_overhead": 0.2,
        "raw_no_expand_phases_per_s": round(fast_median, 1),
        "overhead_vs_raw_no_expand": round(fast_median / env_median - 1, 3),
        "env_runs": [round(rate, 1) for rate in env_rates],
        "raw_runs": [round(rate, 1) for rate in raw_rates],
        "diplomacy_version": metadata.version("diplomacy"),
    }


if __name__ == "__main__":
    print(json.dumps(run()))
