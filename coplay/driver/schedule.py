"""The deterministic co-evolution schedule (docs/architecture.md): which versions each iteration uses, and
the two records of what exists: `VersionLedger` (learner step -> adapter versions) and `BankSchedule`
(iteration -> bank versions).

Iterations are numbered from 1; learner step 0 is the starting point (the cold-start SFT result, or the
fresh adapters), and learner step k trains on the rollouts of iteration k. Bank version j is the bank built
from iterations <= j (version 0: the initial bank). With staleness s:

    rollouts of iteration k use the adapters of learner step  max(0, k - 1 - s)
                            and the bank version               max(0, k - 2)

so with s = 0 training k-1 finishes before rollouts k start (synchronous, on-policy) and with s >= 1
rollouts of k overlap training step k-1; in both cases the bank update over iteration k-1 overlaps the
rollouts of iteration k. Pure functions, no ray: the loop asks, never races.
"""

from __future__ import annotations

from dataclasses import dataclass


def policy_step_for(iteration: int, staleness: int) -> int:
    """Learner step whose adapters the rollouts of `iteration` use."""
    if iteration < 1 or staleness < 0:
        raise ValueError(f"iteration {iteration} (>= 1) and staleness {staleness} (>= 0)")
    return max(0, iteration - 1 - staleness)


def bank_version_for(iteration: int) -> int:
    """Bank version (built from iterations <= it) that the rollouts of `iteration` use."""
    if iteration < 1:
        raise ValueError(f"iteration {iteration}: iterations start at 1")
    return max(0, iteration - 2)


@dataclass
class VersionLedger:
    """Adapter versions after each learner step: step k -> {adapter: version}. An adapter's version is
    bumped only by a step that changed it, so a step may leave some adapters at older versions."""

    steps: dict[int, dict[str, int]]

    @classmethod
    def start(cls, adapters: tuple[str, ...], initial_version: int = 0) -> VersionLedger:
        return cls({0: {a: initial_version for a in adapters}})

    def record(self, step: int, changed: dict[str, int]) -> dict[str, int]:
        """Record learner step `step` (must be the next one) with the adapters it changed."""
        last = max(self.steps)
        if step != last + 1:
            raise ValueError(f"learner step {step} recorded after step {last}: steps must be consecutive")
        versions = {**self.steps[last], **changed}
        for adapter, version in changed.items():
            if version <= self.steps[last].get(adapter, -1):
                raise ValueError(f"adapter {adapter}: version {version} does not advance "
                                 f"{self.steps[last][adapter]}")
        self.steps[step] = versions
        return versions

    def at(self, step: int) -> dict[str, int]:
        if step not in self.steps:
            raise KeyError(f"learner step {step} has not happened (latest: {max(self.steps)})")
        return dict(self.steps[step])

    def latest(self) -> dict[str, int]:
        """The adapter versions after the newest learner step."""
        return self.at(self.latest_step)

    @property
    def latest_step(self) -> int:
        return max(self.steps)

    def act_versions(self) -> list[int]:
        """Every `act` version any learner step produced (the frozen-opponent candidates)."""
        return sorted({v["act"] for v in self.steps.values() if "act" in v})

    def to_json(self) -> dict[str, dict[str, int]]:
        return {str(k): dict(v) for k, v in self.steps.items()}

    @classmethod
    def from_json(cls, data: dict[str, dict[str, int]]) -> VersionLedger:
        return cls({int(k): {a: int(v) for a, v in vs.items()} for k, vs in data.items()})


@dataclass
class BankSchedule:
    """Bank versions by iteration: iteration j -> {bank key: version} built from iterations <= j (j = 0:
    the initial banks). Iteration j's update changes some keys; the others keep their versions."""

    built: dict[int, dict[str, int]]

    @classmethod
    def start(cls, initial: dict[str, int]) -> BankSchedule:
        return cls({0: dict(initial)})

    def record(self, iteration: int, changed: dict[str, int]) -> dict[str, int]:
        """Record the banks built from iterations <= `iteration` (the next one) with the keys it changed."""
        last = max(self.built)
        if iteration != last + 1:
            raise ValueError(f"bank versions of iteration {iteration} recorded after iteration {last}: "
                             "iterations must be consecutive")
        self.built[iteration] = {**self.built[last], **changed}
        return dict(self.built[iteration])

    def latest(self) -> dict[str, int]:
        """The newest bank versions."""
        return dict(self.built[max(self.built)])

    def for_iteration(self, iteration: int) -> dict[str, int]:
        """The bank versions the rollouts of `iteration` play with (`bank_version_for`)."""
        return dict(self.built[bank_version_for(iteration)])

    def to_json(self) -> dict[str, dict[str, int]]:
        return {str(j): dict(v) for j, v in self.built.items()}

    @classmethod
    def from_json(cls, data: dict[str, dict[str, int]]) -> BankSchedule:
        return cls({int(j): {key: int(v) for key, v in vs.items()} for j, vs in data.items()})
