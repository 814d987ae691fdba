"""How one iteration's episodes are spread over the rollout workers (pure Python: no ray, no torch).

GRPO groups (the G episodes of one game and start seed, or of one anchor state) are compared on the driver,
where advantages are computed, so a group may be split across workers. With at least as many groups as
workers, whole groups go round robin (episodes of one start state share their prompt prefixes: one engine's
prefix cache serves them all). With fewer groups than workers, whole groups would leave workers idle (16
groups on 24 workers: 8 idle), so the episodes, in group order, are cut into one contiguous, near-equal chunk
per worker: every worker rolls out, and a group spans as few workers as possible. Only when an iteration has
fewer episodes than workers must some idle; training refuses such a config
(`coplay.config.training.require_trainable`).
"""

from __future__ import annotations

from typing import Any


def group_key(plan: Any) -> tuple[str, str]:
    """A plan's GRPO group: its `group` label, else its game and start seed."""
    return plan.game, plan.group or f"seed{plan.seed}"


def spread_plans(plans: list[Any], workers: int) -> list[list[Any]]:
    """One chunk of plans per worker (module docstring); chunks may be empty only when there are fewer
    episodes than workers. Every plan lands in exactly one chunk, in its original order within it."""
    if workers < 1:
        raise ValueError(f"workers={workers}: need at least one")
    groups: dict[tuple[str, str], list[Any]] = {}
    for plan in plans:
        groups.setdefault(group_key(plan), []).append(plan)
    chunks: list[list[Any]] = [[] for _ in range(workers)]
    if len(groups) >= workers:
        for i, members in enumerate(groups.values()):
            chunks[i % workers].extend(members)
        return chunks
    ordered = [p for members in groups.values() for p in members]
    base, extra = divmod(len(ordered), workers)
    start = 0
    for w in range(workers):
        size = base + (1 if w < extra else 0)
        chunks[w] = ordered[start:start + size]
        start += size
    return chunks

