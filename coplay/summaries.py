"""The per-iteration metrics record (one line of `metrics.jsonl`): scores per game with CIs, reward parts
and losses per adapter, invalid and parse-error rates, versions, bank sizes, timings and throughput."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from coplay.stats import summarize
from coplay.types import Sample, Trajectory


def score_summary(trajectories: list[Trajectory]) -> dict[str, dict[str, float]]:
    """Mean score, 95% t-interval, median, min, max per game (the policy's own seats only)."""
    by_game: dict[str, list[float]] = defaultdict(list)
    for t in trajectories:
        if t.policy == "model":
            by_game[t.game].append(t.score)
    return {g: summarize(v).as_dict() for g, v in sorted(by_game.items())}


def reward_parts(samples: list[Sample]) -> dict[str, dict[str, float]]:
    """Per adapter: mean, min and max reward and the number of samples a learner step trained on."""
    rewards: dict[str, list[float]] = defaultdict(list)
    for s in samples:
        if s.reward is not None:
            rewards[s.adapter].append(float(s.reward))
    return {a: {"mean": sum(v) / len(v), "min": min(v), "max": max(v), "n": len(v)} for a, v in sorted(rewards.items())}


def iteration_record(iteration: int, trajectories: list[Trajectory], stats: dict[str, Any], bank: dict[str, Any],
                     train: dict[str, Any], versions: dict[str, int], bank_versions: dict[str, int],
                     seconds: float) -> dict[str, Any]:
    steps = max(1, stats.get("steps", 0))
    bank_reports = bank.get("reports", [])
    return {
        "iteration": iteration,
        "episodes": len({t.episode_id for t in trajectories}),
        "scores": score_summary(trajectories),
        "reward_parts": train.get("reward_parts", {}),
        "invalid_rate": stats.get("invalid_actions", 0) / steps,
        "parse_error_rate": stats.get("parse_errors", 0) / steps,
        "versions": dict(versions),
        "bank_versions": dict(bank_versions),
        "bank_sizes": {r["bank_key"]: r.get("size", 0) for r in bank_reports},
        "bank_samples": {k: v for r in bank_reports for k, v in r.get("samples", {}).items()},
        "train": {k: v for k, v in train.items()
                  if k in ("learner_step", "adapters", "trained_tokens", "published", "nonzero_advantages",
                           "reward_parts")},
        "timings": {"iteration_s": seconds, "sync_s": stats.get("sync_s", 0.0),
                    "rollout_wall_s": stats.get("wall_seconds", 0.0), "generation_s": stats.get("generation_seconds", 0.0),
                    "env_s": stats.get("env_ns", 0) / 1e9, "bank_s": stats.get("bank_s", 0.0),
                    "bank_wait_s": stats.get("bank_wait_s", 0.0), "train_s": train.get("train_seconds", 0.0)},
        "generated_tokens": stats.get("generated_tokens", 0),
        "generated_tokens_per_s": stats.get("generated_tokens", 0) / max(stats.get("generation_seconds", 0.0), 1e-9),
    }
