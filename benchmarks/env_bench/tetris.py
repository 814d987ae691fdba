"""Tetris env speed and bot strength: placements/s on one core with full text + info, against the bare rules.

Baseline measured in the same run: the same seeded placement sequences replayed on `TetrisGame` alone
(legal list + drop + line clears + next piece, no text, no view/state/features). The ratio shows what the
observation text and the info dicts cost. Sequences come from the random and the expert bot; the expert's
own decision time is reported separately. Also: expert vs random mean score with 95% t-intervals.

Run: ``python -m benchmarks.env_bench.tetris`` (prints JSON). Single process, pure Python.
"""

from __future__ import annotations

import json
import statistics
import time
from typing import Any

from coplay.eval.stats import summarize
from coplay_envs.tetris.bots import ExpertBot, RandomBot
from coplay_envs.tetris.env import TetrisEnv, parse_placement
from coplay_envs.tetris.features import compute_features
from coplay_envs.tetris.rules import TetrisGame
from coplay_envs.tetris.text import render_observation

COMMAND = "python -m benchmarks.env_bench.tetris"
RANDOM_EPISODES = 100
EXPERT_EPISODES = 5
EVAL_SEEDS = range(20)


def record_episodes(bot_class: type, seeds: range) -> tuple[list[tuple[int, list[str]]], float, int]:
    """Play one episode per seed; return (seed, actions) pairs, the bots' total decision seconds and count."""
    env = TetrisEnv()
    episodes: list[tuple[int, list[str]]] = []
    decide_s = 0.0
    decisions = 0
    for seed in seeds:
        bot = bot_class(seed=seed)
        obs, info = env.reset(seed=seed)
        actions: list[str] = []
        while True:
            start = time.perf_counter()
            action = bot.act(obs, info).action
            decide_s += time.perf_counter() - start
            decisions += 1
            actions.append(action)
            obs, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        episodes.append((seed, actions))
    return episodes, decide_s, decisions


def replay_env(episodes: list[tuple[int, list[str]]]) -> tuple[float, list[int]]:
    """Seconds to replay the episodes through `TetrisEnv` (reset + steps, text and info included)."""
    env = TetrisEnv()
    scores = []
    start = time.perf_counter()
    for seed, actions in episodes:
        env.reset(seed=seed)
        for action in actions:
            _, _, _, _, info = env.step(action)
        scores.append(info["score"])
    return time.perf_counter() - start, scores


def replay_rules(episodes: list[tuple[int, list[str]]]) -> tuple[float, list[int]]:
    """Seconds to replay the same episodes on the bare rules (parsing and legality check included)."""
    scores = []
    start = time.perf_counter()
    for seed, actions in episodes:
        game = TetrisGame.new(seed)
        legal = game.legal()
        for action in actions:
            placement = parse_placement(action, game.current)
            if placement is None or placement not in legal:
                raise ValueError(f"recorded action {action!r} is not legal in the bare-rules replay")
            game.play(*placement)
            legal = game.legal()
        scores.append(game.score)
    return time.perf_counter() - start, scores


def measure_speed(episodes: list[tuple[int, list[str]]], repeats: int) -> dict[str, Any]:
    placements = sum(len(actions) for _, actions in episodes)
    env_s, rules_s = [], []
    for _ in range(repeats):
        seconds, env_scores = replay_env(episodes)
        env_s.append(seconds)
        seconds, rules_scores = replay_rules(episodes)
        rules_s.append(seconds)
        if env_scores != rules_scores:
            raise RuntimeError("env and bare-rules replays disagree on scores")
    env_median, rules_median = statistics.median(env_s), statistics.median(rules_s)
    return {
        "episodes": len(episodes),
        "placements": placements,
        "env_placements_per_s": placements / env_median,
        "rules_placements_per_s": placements / rules_median,
        "env_us_per_placement": 1e6 * env_median / placements,
        "rules_us_per_placement": 1e6 * rules_median / placements,
        "rendering_cost_ratio": env_median / rules_median,
    }


def measure_parts(episodes: list[tuple[int, list[str]]], repeats: int) -> dict[str, float]:
    """Median microseconds per call of the observation parts, on the positions of the episodes."""
    env = TetrisEnv()
    positions: list[tuple[dict, list[tuple[int, int]]]] = []
    for seed, actions in episodes:
        _, info = env.reset(seed=seed)
        for action in actions:
            legal = [parse_placement(a, info["view"]["current"]) for a in info["legal_actions"]]
            positions.append((info["view"], [p for p in legal if p is not None]))
            _, _, _, _, info = env.step(action)
    parts = {
        "text_us": lambda view, legal: render_observation(view, legal),
        "features_from_view_us": lambda view, legal: compute_features(view),
    }
    result = {}
    for name, part in parts.items():
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            for view, legal in positions:
                part(view, legal)
            times.append(time.perf_counter() - start)
        result[name] = 1e6 * statistics.median(times) / len(positions)
    return result


def expert_vs_random(seeds: range = EVAL_SEEDS, max_placements: int = 200) -> dict[str, Any]:
    """Mean score ± 95% t-interval of both bots on the same seeded games, and the ratio of means."""
    env = TetrisEnv(max_placements=max_placements)
    result: dict[str, Any] = {"seeds": [seeds.start, seeds.stop], "max_placements": max_placements}
    for name, bot_class in (("expert", ExpertBot), ("random", RandomBot)):
        scores, survived = [], 0
        for seed in seeds:
            bot = bot_class(seed=seed)
            obs, info = env.reset(seed=seed)
            while True:
                obs, _, terminated, truncated, info = env.step(bot.act(obs, info).action)
                if terminated or truncated:
                    break
            scores.append(float(info["score"]))
            survived += int(truncated)
        summary = summarize(scores)
        result[name] = {"mean": summary.mean, "ci_low": summary.ci_low, "ci_high": summary.ci_high,
                        "half_width": summary.half_width, "min": summary.min, "max": summary.max,
                        "survived_share": survived / len(seeds)}
    result["ratio_of_means"] = result["expert"]["mean"] / result["random"]["mean"]
    return result


def run(repeats: int = 5) -> dict[str, Any]:
    """All Tetris figures as a JSON-serialisable dict (medians over ``repeats``)."""
    random_episodes, random_decide_s, random_decisions = record_episodes(RandomBot, range(RANDOM_EPISODES))
    expert_episodes, expert_decide_s, expert_decisions = record_episodes(ExpertBot, range(EXPERT_EPISODES))
    random_speed = measure_speed(random_episodes, repeats)
    random_speed["bot_decisions_per_s"] = random_decisions / random_decide_s
    expert_speed = measure_speed(expert_episodes, repeats)
    expert_speed["bot_decisions_per_s"] = expert_decisions / expert_decide_s
    expert_speed["parts_us_per_placement"] = measure_parts(expert_episodes, repeats)
    return {
        "game": "tetris",
        "command": COMMAND,
        "repeats": repeats,
        "note": "one process, one core; env = TetrisEnv.reset/step with text, view, state, features; "
                "rules = TetrisGame legal list + drop on the same seeded sequences (the in-run baseline)",
        "random_policy": random_speed,
        "expert_policy": expert_speed,
        "expert_vs_random": expert_vs_random(),
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
