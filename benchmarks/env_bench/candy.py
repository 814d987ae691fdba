"""Candy Crush env speed against PyPI `tile-match-gym` on the same seeded action sequences, and bot strength.

Reference: `tile_match_gym`'s `TileMatchEnv(8, 8, 4, 50, [], [])` (4 colours, no specials, 50 moves; numba
for its move checks; array observation, no text; it lists its effective actions every step, as we list
ours). Numba compilation is warmed up before timing. Two workloads, 50-move episodes, reset at the end:
- `random_swaps`: one seeded sequence of uniformly random adjacent swaps, the same cells for both envs
  (most make no line, so this mostly measures observation and legal-list cost);
- `matching_swaps`: at every step each env plays entry k mod n of its own list of line-making swaps, with
  k from one seeded sequence (every step clears, drops, refills and cascades).
Steps/s on one core (single process), median over `repeats`, the two envs interleaved; ratio = ours / ref.

Bots: expert vs random mean score with 95% t-intervals over the same seeded episodes.

Run: ``python -m benchmarks.env_bench.candy`` (speed) or ``... --bots`` (speed and bot strength).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from importlib import metadata
from typing import Any

import numpy as np

from coplay.eval.stats import summarize
from coplay_envs.candy.bots import ExpertBot, RandomBot
from coplay_envs.candy.env import CandyCrushEnv

COMMAND = "python -m benchmarks.env_bench.candy"
RANDOM_STEPS = 6000
MATCHING_STEPS = 2000


def random_swaps(seed: int, steps: int) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Uniformly random adjacent swaps as ((r1, c1), (r2, c2))."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        if rng.random() < 0.5:
            r, c = int(rng.integers(8)), int(rng.integers(7))
            out.append(((r, c), (r, c + 1)))
        else:
            r, c = int(rng.integers(7)), int(rng.integers(8))
            out.append(((r, c), (r + 1, c)))
    return out


def _reference_env() -> Any:
    from tile_match_gym.tile_match_env import TileMatchEnv

    return TileMatchEnv(8, 8, 4, 50, [], [], seed=0, render_mode="string")


def time_ours_random(swaps: list, seed: int) -> float:
    env = CandyCrushEnv()
    actions = [f"swap ({a[0]},{a[1]}) ({b[0]},{b[1]})" for a, b in swaps]
    episode = seed
    env.reset(seed=episode)
    start = time.perf_counter()
    for action in actions:
        if env.step(action)[2]:
            episode += 1
            env.reset(seed=episode)
    return len(actions) / (time.perf_counter() - start)


def time_reference_random(swaps: list, seed: int) -> float:
    env = _reference_env()
    index = {coords: i for i, coords in enumerate(env._action_to_coords)}
    actions = [index[swap] for swap in swaps]
    episode = seed
    env.reset(seed=episode)
    start = time.perf_counter()
    for action in actions:
        if env.step(action)[2]:
            episode += 1
            env.reset(seed=episode)
    return len(actions) / (time.perf_counter() - start)


def time_ours_matching(picks: list[int], seed: int) -> float:
    env = CandyCrushEnv()
    episode = seed
    _, info = env.reset(seed=episode)
    start = time.perf_counter()
    for k in picks:
        legal = info["legal_actions"]
        _, _, terminated, _, info = env.step(legal[k % len(legal)])
        if terminated:
            episode += 1
            _, info = env.reset(seed=episode)
    return len(picks) / (time.perf_counter() - start)


def time_reference_matching(picks: list[int], seed: int) -> float:
    env = _reference_env()
    episode = seed
    _, info = env.reset(seed=episode)
    start = time.perf_counter()
    for k in picks:
        legal = info["effective_actions"]
        _, _, done, _, info = env.step(legal[k % len(legal)])
        if done:
            episode += 1
            _, info = env.reset(seed=episode)
    return len(picks) / (time.perf_counter() - start)


def _compare(ours_fn: Any, ref_fn: Any, workload: Any, repeats: int) -> dict[str, Any]:
    ours_fn(workload[:200], 0)  # warm-up: imports, numba compilation, caches
    ref_fn(workload[:200], 0)
    ours, reference = [], []
    for _ in range(repeats):
        ours.append(ours_fn(workload, 0))
        reference.append(ref_fn(workload, 0))
    ours_median, reference_median = statistics.median(ours), statistics.median(reference)
    return {"ours_steps_per_s": round(ours_median), "reference_steps_per_s": round(reference_median),
            "ratio": round(ours_median / reference_median, 2), "ours_runs": [round(x) for x in ours],
            "reference_runs": [round(x) for x in reference], "steps": len(workload)}


def run(repeats: int = 5) -> dict[str, Any]:
    """Median steps/s of ours and the reference on both workloads, and the ratios."""
    picks = np.random.default_rng(1).integers(0, 1 << 30, size=MATCHING_STEPS).tolist()
    return {
        "game": "candy_crush",
        "command": COMMAND,
        "repeats": repeats,
        "reference": f"tile-match-gym {metadata.version('tile-match-gym')} TileMatchEnv(8, 8, 4, 50, [], []) "
                     f"(numba {metadata.version('numba')})",
        "target_ratio": 3.0,
        "random_swaps": _compare(time_ours_random, time_reference_random, random_swaps(0, RANDOM_STEPS),
                                 repeats),
        "matching_swaps": _compare(time_ours_matching, time_reference_matching, picks, repeats),
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
            env, bot = CandyCrushEnv(), bot_class(seed=seed)
            obs, info = env.reset(seed=seed)
            terminated = False
            while not terminated:
                obs, _, terminated, _, info = env.step(bot.act(obs, info).action)
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
