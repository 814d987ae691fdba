"""Avalon env speed (AEC steps/s with random bots) and expert-against-random win rates.

Speed: random bots play `GAMES` seeded games once; their action strings are recorded. Then, per repeat:
- `env`: the recorded games replayed through `AvalonEnv` the way a rollout drives it: `last()` (the acting
  seat's text observation) then `step(action)` (which builds every seat's view, features, legal actions and
  the state dict);
- `env_with_bots`: the same games with the random bots choosing live (bot time included);
- `rules`: the baseline, the same action strings through the pure rules engine (`rules.apply_action`, no
  views, no text). There is no PyPI Avalon to compare with, so the ratio env / rules is the cost of the
  PettingZoo face, text and infos.
Steps/s on one core (single process), median over `repeats`; the three runs interleave.

Bots (`--bots`): expert good seats against random evil seats, and random good against expert evil, on the
same seeded games: win rate of the expert side with a 95% Wilson interval, mean seat score (+1/-1) with a
95% t-interval, and the random-against-random win rate on the same seeds as the baseline.

Run: ``python -m benchmarks.env_bench.avalon`` (speed) or ``... --bots`` (speed and win rates).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from typing import Any

from coplay.eval.stats import summarize, wilson_interval
from coplay_envs.avalon.bots import ExpertBot, RandomBot, play_matchup
from coplay_envs.avalon.env import AvalonEnv
from coplay_envs.avalon.rules import apply_action, new_game
from coplay_envs.core import seed_rng

COMMAND = "python -m benchmarks.env_bench.avalon"
GAMES = 60
BOT_GAMES = 200
BOT_FIRST_SEED = 20_000


def record_games(games: int = GAMES) -> list[list[str]]:
    """The action strings random bots play in games with seeds 0..games-1 (default env options)."""
    recorded = []
    for seed in range(games):
        env = AvalonEnv()
        env.reset(seed=seed)
        bots = {a: RandomBot(seed=seed * 5 + i, agent=a) for i, a in enumerate(env.possible_agents)}
        actions = []
        for agent in env.agent_iter():
            obs, _, terminated, truncated, info = env.last()
            if terminated or truncated:
                env.step(None)
                continue
            actions.append(bots[agent].act(obs, info).action)
            env.step(actions[-1])
        recorded.append(actions)
    return recorded


def time_env(recorded: list[list[str]]) -> float:
    steps = 0
    start = time.perf_counter()
    for seed, actions in enumerate(recorded):
        env = AvalonEnv()
        env.reset(seed=seed)
        for action in actions:
            env.last()
            env.step(action)
        steps += len(actions)
    return steps / (time.perf_counter() - start)


def time_env_with_bots(games: int) -> float:
    steps = 0
    start = time.perf_counter()
    for seed in range(games):
        env = AvalonEnv()
        env.reset(seed=seed)
        bots = {a: RandomBot(seed=seed * 5 + i, agent=a) for i, a in enumerate(env.possible_agents)}
        while env.game.winner is None:
            agent = env.agent_selection
            obs, _, _, _, info = env.last()
            env.step(bots[agent].act(obs, info).action)
            steps += 1
    return steps / (time.perf_counter() - start)


def time_rules(recorded: list[list[str]]) -> float:
    steps = 0
    start = time.perf_counter()
    for seed, actions in enumerate(recorded):
        game = new_game(seed_rng(seed))
        for action in actions:
            apply_action(game, action)
        steps += len(actions)
    return steps / (time.perf_counter() - start)


def run(repeats: int = 5) -> dict[str, Any]:
    """Median steps/s of the env (replayed and with live random bots) and of the rules engine."""
    recorded = record_games()
    time_env(recorded[:5])  # warm imports and caches
    env, with_bots, rules = [], [], []
    for _ in range(repeats):
        env.append(time_env(recorded))
        with_bots.append(time_env_with_bots(len(recorded)))
        rules.append(time_rules(recorded))
    env_median, rules_median = statistics.median(env), statistics.median(rules)
    return {
        "game": "avalon",
        "command": COMMAND,
        "workload": f"{len(recorded)} games of 5 random bots (seeds 0..{len(recorded) - 1}), "
                    f"{sum(map(len, recorded))} steps, 1 discussion round",
        "repeats": repeats,
        "ours_steps_per_s": round(env_median),
        "ours_with_random_bots_steps_per_s": round(statistics.median(with_bots)),
        "reference": "coplay_envs.avalon.rules.apply_action on the same action strings (no views, no text)",
        "reference_steps_per_s": round(rules_median),
        "ratio": round(env_median / rules_median, 3),
        "ours_runs": [round(x) for x in env],
        "reference_runs": [round(x) for x in rules],
        "includes": "ours: acting seat's text observation + all 5 seats' view, features, legal actions, "
                    "state",
        "python": sys.version.split()[0],
    }


def _side_summary(winners: list[str], side: str) -> dict[str, Any]:
    wins = winners.count(side)
    low, high = wilson_interval(wins, len(winners))
    score = summarize([1.0 if w == side else -1.0 for w in winners])
    return {"win_rate": round(wins / len(winners), 3), "wilson95": [round(low, 3), round(high, 3)],
            "mean_score": round(score.mean, 3), "t95": [round(score.ci_low, 3), round(score.ci_high, 3)],
            "games": len(winners)}


def score_bots(games: int = BOT_GAMES, first_seed: int = BOT_FIRST_SEED) -> dict[str, Any]:
    """Win rates of an expert side against a random side, both ways, and random against random."""
    baseline = play_matchup(RandomBot, RandomBot, games, first_seed)
    return {
        "expert_good_vs_random_evil": _side_summary(play_matchup(ExpertBot, RandomBot, games, first_seed),
                                                    "good"),
        "random_good_vs_expert_evil": _side_summary(play_matchup(RandomBot, ExpertBot, games, first_seed),
                                                    "evil"),
        "random_vs_random_good": _side_summary(baseline, "good"),
        "random_vs_random_evil": _side_summary(baseline, "evil"),
        "expert_vs_expert_good": _side_summary(play_matchup(ExpertBot, ExpertBot, games, first_seed),
                                               "good"),
        "seeds": [first_seed, first_seed + games - 1],
    }


if __name__ == "__main__":
    report = run()
    if "--bots" in sys.argv:
        report["bots"] = score_bots()
    print(json.dumps(report, indent=2))
