"""Mario env speed against the raw emulator env on the same seeded action sequence, and bot strength.

Speed: one seeded sequence of uniformly random actions (indices into the 7 actions) is replayed through
`MarioEnv` (action names; RAM decoding, text grid, view, features and the base64 emulator snapshot built
every action) and through `gymnasium-mariobros`' `SuperMarioBrosEnv(target=(1, 1))` wrapped in
`JoypadSpace(SIMPLE_MOVEMENT)`, stepped `frames_per_action` times per action (the same buttons held for the
same frames; RGB frames, no text). Both reset when a life is lost or the flag is reached. Actions per
CPU-second of the process (one core, single-threaded; CPU time rather than wall time so that other jobs on
the machine do not skew the ratio), median over `repeats`, runs interleaved; overhead = reference / ours - 1
(target <= 0.20).

Bots: expert vs random mean score (furthest x) with 95% t-intervals over the same seeded episodes, the
share of expert episodes reaching the flag, and the ratio.

Run: ``python -m benchmarks.env_bench.mario`` (speed at the default 8 frames per action and, the worst
case for our per-action overhead, at 1) or ``... --bots`` (also bot strength; minutes).
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
from coplay_envs.mario.bots import evaluate
from coplay_envs.mario.env import FRAMES_PER_ACTION, LEGAL_ACTIONS, MarioEnv

COMMAND = "python -m benchmarks.env_bench.mario"
ACTIONS_PER_RUN = 200


def action_sequence(seed: int, steps: int = ACTIONS_PER_RUN) -> list[int]:
    return np.random.default_rng(seed).integers(0, len(LEGAL_ACTIONS), size=steps).tolist()


def time_ours(actions: list[int], frames_per_action: int) -> float:
    """Actions/s of `MarioEnv` on the sequence (resets included)."""
    env = MarioEnv(frames_per_action=frames_per_action, max_actions=10**9, max_noop_frames=0)
    names = [LEGAL_ACTIONS[index] for index in actions]
    env.reset(seed=0)
    start = time.process_time()
    for name in names:
        _, _, terminated, truncated, _ = env.step(name)
        if terminated or truncated:
            env.reset(seed=0)
    elapsed = time.process_time() - start
    env.close()
    return len(actions) / elapsed


def time_reference(actions: list[int], frames_per_action: int) -> float:
    """Actions/s of the raw emulator env, each action held for `frames_per_action` frames."""
    from gymnasium_mariobros import SuperMarioBrosEnv
    from gymnasium_mariobros.actions import SIMPLE_MOVEMENT
    from gymnasium_mariobros.wrappers import JoypadSpace

    env = JoypadSpace(SuperMarioBrosEnv(target=(1, 1)), SIMPLE_MOVEMENT)
    env.reset(seed=0)
    start = time.process_time()
    for action in actions:
        for _ in range(frames_per_action):
            _, _, done, _, _ = env.step(action)
            if done:
                env.reset()
                break
    elapsed = time.process_time() - start
    env.close()
    return len(actions) / elapsed


def run(repeats: int = 5, frames_per_action: int = FRAMES_PER_ACTION) -> dict[str, Any]:
    """Median actions/s of ours and the raw env over `repeats` interleaved runs, and the overhead."""
    actions = action_sequence(0)
    time_ours(actions[:20], frames_per_action)  # imports and first-use costs out of the timing
    time_reference(actions[:20], frames_per_action)
    ours, reference = [], []
    for _ in range(repeats):
        ours.append(time_ours(actions, frames_per_action))
        reference.append(time_reference(actions, frames_per_action))
    ours_median, reference_median = statistics.median(ours), statistics.median(reference)
    return {
        "game": "mario",
        "command": COMMAND,
        "workload": f"{len(actions)} uniformly random actions of 7 (seed 0), {frames_per_action} frames each,"
                    " reset on life lost or flag",
        "repeats": repeats,
        "ours_steps_per_s": round(ours_median, 2),
        "reference": f"gymnasium-mariobros {metadata.version('gymnasium-mariobros')} SuperMarioBrosEnv(1-1) +"
                     " JoypadSpace(SIMPLE_MOVEMENT), same frames per action",
        "reference_steps_per_s": round(reference_median, 2),
        "ratio": round(ours_median / reference_median, 3),
        "overhead": round(reference_median / ours_median - 1, 3),
        "target_overhead": 0.20,
        "ours_runs": [round(x, 2) for x in ours],
        "reference_runs": [round(x, 2) for x in reference],
        "includes": "ours: RAM decode + text observation + view + features + emulator snapshot every action",
        "timer": "time.process_time (CPU seconds of this process)",
        "python": sys.version.split()[0],
    }


def score_bots(episodes: int = 20, first_seed: int = 1000) -> dict[str, Any]:
    """Expert and random bots on the same seeded 1-1 episodes: mean furthest x with 95% t-intervals."""
    results: dict[str, Any] = {}
    seeds = range(first_seed, first_seed + episodes)
    for kind in ("expert", "random"):
        start = time.perf_counter()
        episodes_played = evaluate(kind, seeds)
        summary = summarize([float(episode["score"]) for episode in episodes_played])
        results[kind] = {
            "mean": round(summary.mean, 1),
            "ci95": [round(summary.ci_low, 1), round(summary.ci_high, 1)],
            "flags": sum(episode["flag"] for episode in episodes_played),
            "mean_actions": round(statistics.mean(episode["steps"] for episode in episodes_played), 1),
            "episodes": episodes,
            "seconds": round(time.perf_counter() - start, 1),
        }
    results["ratio"] = round(results["expert"]["mean"] / results["random"]["mean"], 2)
    results["seeds"] = [first_seed, first_seed + episodes - 1]
    return results


if __name__ == "__main__":
    report = run()
    report["one_frame_per_action"] = {key: value for key, value in run(frames_per_action=1).items()
                                      if key in ("ours_steps_per_s", "reference_steps_per_s", "overhead")}
    if "--bots" in sys.argv:
        report["bots"] = score_bots()
    print(json.dumps(report, indent=2))
