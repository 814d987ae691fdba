"""2048 env speed against PyPI `gymnasium-2048` on the same seeded action sequences, and bot strength.

Speed: one seeded sequence of uniformly random directions is replayed through `Game2048Env` (string
actions; text observation, legal list, view, state and features built every step) and through
`gymnasium_2048`'s `TwentyFortyEightEnv` (integer actions, one-hot array observation, no text). Both reset
when the game ends or after 200 moves in the episode, so both play the same episodes' shape. Steps/s on
one core (single process), median over `repeats`, runs of the two interleaved; ratio = ours / reference.

Bots: expert vs random mean score with 95% t-intervals over the same seeded episodes.

Run: ``python -m benchmarks.env_bench.game2048`` (speed) or ``... --bots`` (speed and bot strength).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from importlib import metadata
from typing import Any

import numpy as np

from coplay.eval.stats import summarize
from coplay_envs.game2048.bots import ExpertBot, RandomBot
from coplay_envs.game2048.env import Game2048Env

COMMAND = "python -m benchmarks.env_bench.game2048"
STEPS = 20000
EPISODE_MOVES = 200
DIRECTIONS = ("up", "right", "down", "left")  # index = the reference's action id


def action_sequence(seed: int, steps: int = STEPS) -> list[int]:
    return np.random.default_rng(seed).integers(0, 4, size=steps).tolist()


def time_ours(actions: list[int], seed: int) -> float:
    """Steps/s of `Game2048Env` on the sequence."""
    env = Game2048Env(max_moves=EPISODE_MOVES)
    names = [DIRECTIONS[a] for a in actions]
    episode = seed
    env.reset(seed=episode)
    start = time.perf_counter()
    for name in names:
        _, _, terminated, truncated, _ = env.step(name)
        if terminated or truncated:
            episode += 1
            env.reset(seed=episode)
    return len(actions) / (time.perf_counter() - start)


def time_reference(actions: list[int], seed: int) -> float:
    """Steps/s of `gymnasium_2048`'s env on the same sequence (reset after 200 moves too)."""
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    from gymnasium_2048.envs import TwentyFortyEightEnv

    env = TwentyFortyEightEnv()
    episode = seed
    env.reset(seed=episode)
    moves = 0
    start = time.perf_counter()
    for action in actions:
        _, _, terminated, _, _ = env.step(action)
        moves += 1
        if terminated or moves == EPISODE_MOVES:
            episode += 1
            moves = 0
            env.reset(seed=episode)
    return len(actions) / (time.perf_counter() - start)


def run(repeats: int = 5) -> dict[str, Any]:
    """Median steps/s of ours and the reference over `repeats` interleaved runs, and their ratio."""
    actions = action_sequence(0)
    time_ours(actions[:2000], 0)  # warm the row table and imports before timing
    time_reference(actions[:2000], 0)
    ours, reference = [], []
    for _ in range(repeats):
        ours.append(time_ours(actions, 0))
        reference.append(time_reference(actions, 0))
    ours_median, reference_median = statistics.median(ours), statistics.median(reference)
    return {
        "game": "2048",
        "command": COMMAND,
        "workload": f"{STEPS} uniformly random directions (seed 0), reset at game end or "
                    f"{EPISODE_MOVES} moves",
        "repeats": repeats,
        "ours_steps_per_s": round(ours_median),
        "reference": f"gymnasium-2048 {metadata.version('gymnasium-2048')} TwentyFortyEightEnv",
        "reference_steps_per_s": round(reference_median),
        "ratio": round(ours_median / reference_median, 2),
        "target_ratio": 3.0,
        "ours_runs": [round(x) for x in ours],
        "reference_runs": [round(x) for x in reference],
        "includes": "ours: text observation + legal_actions + view + state + features every step",
        "python": sys.version.split()[0],
    }


def score_bots(episodes: int = 20, first_seed: int = 1000) -> dict[str, Any]:
    """Expert and random bots on the same seeded episodes: mean score with 95% t-intervals."""
    results: dict[str, Any] = {}
    for name, bot_class in (("expert", ExpertBot), ("random", RandomBot)):
        scores: list[float] = []
        start = time.perf_counter()
        moves = 0
        for seed in range(first_seed, first_seed + episodes):
            env, bot = Game2048Env(), bot_class(seed=seed)
            obs, info = env.reset(seed=seed)
            done = False
            while not done:
                obs, _, terminated, truncated, info = env.step(bot.act(obs, info).action)
                done = terminated or truncated
                moves += 1
            scores.append(float(info["score"]))
        summary = summarize(scores)
        results[name] = {"mean": round(summary.mean, 1),
                         "ci95": [round(summary.ci_low, 1), round(summary.ci_high, 1)],
                         "episodes": episodes,
                         "ms_per_move": round(1000 * (time.perf_counter() - start) / moves, 3)}
    results["ratio"] = round(results["expert"]["mean"] / results["random"]["mean"], 2)
    results["seeds"] = [first_seed, first_seed + episodes - 1]
    return results


if __name__ == "__main__":
    report = run()
    if "--bots" in sys.argv:
        report["bots"] = score_bots()
    print(json.dumps(report, indent=2))
