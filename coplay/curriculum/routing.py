"""Which skill the next proposer prompt is about (docs/curriculum.md).

`statistics` routing weighs each skill by 1 - 2|p - 0.5| (plus a floor, so none starves), p its solver
success smoothed as (successes + 1) / (attempts + 2): a skill the solver masters half the time is drawn
most, a never-tried one counts as p = 0.5. `uniform` draws every skill alike (an ablation). Skills the solver
has saturated (success >= `retire_success` over >= `retire_after` attempts) are not routed. A share of the
prompts goes to the exploration stream (None: no skill), and all of them there when no skill is left.
Seeded by (seed, iteration): the same statistics give the same draws.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from coplay.skills.tasking import TaskUsage

WEIGHT_FLOOR = 0.05


def smoothed_success(usage: TaskUsage) -> float:
    """(successes + 1) / (attempts + 2): 0.5 before any attempt."""
    return (usage.successes + 1) / (usage.attempts + 2)


def saturated(usage: TaskUsage, retire_success: float, retire_after: int) -> bool:
    """The solver solves this skill's tasks nearly always over enough attempts: no more tasks for it."""
    return usage.attempts >= retire_after and usage.successes / usage.attempts >= retire_success


class Router:
    """Draws skill ids (or None, the exploration stream) for proposer prompts."""

    def __init__(self, mode: str = "statistics", exploration_share: float = 0.2, retire_success: float = 0.95,
                 retire_after: int = 8, seed: int = 0) -> None:
        if mode not in ("statistics", "uniform"):
            raise ValueError(f"routing mode {mode!r}; expected 'statistics' or 'uniform'")
        if not 0.0 <= exploration_share <= 1.0:
            raise ValueError(f"exploration_share {exploration_share} is not in [0, 1]")
        self.mode, self.exploration_share = mode, exploration_share
        self.retire_success, self.retire_after, self.seed = retire_success, retire_after, seed

    def weights(self, usage: Mapping[str, TaskUsage]) -> dict[str, float]:
        """The draw weight of every routable skill (saturated ones left out), in id order."""
        live = {k: u for k, u in sorted(usage.items())
                if not saturated(u, self.retire_success, self.retire_after)}
        if self.mode == "uniform":
            return {k: 1.0 for k in live}
        return {k: 1.0 - 2.0 * abs(smoothed_success(u) - 0.5) + WEIGHT_FLOOR for k, u in live.items()}

    def pick(self, usage: Mapping[str, TaskUsage], n: int, iteration: int = 0) -> list[str | None]:
        """`n` draws for `iteration`; None marks an exploration-stream prompt."""
        rng = random.Random(f"{self.seed}:{iteration}")
        weights = self.weights(usage)
        ids, values = list(weights), list(weights.values())
        picks: list[str | None] = []
        for _ in range(n):
            if not ids or rng.random() < self.exploration_share:
                picks.append(None)
            else:
                picks.append(rng.choices(ids, weights=values)[0])
        return picks
