"""Work in flight on a run's actors, and how the driver learns its fate: the rollouts and the bank update
the loop started and has not yet collected (each with its console phase, `coplay.driver.progress`, begun when
the work started), whether a failure means a dead actor, waiting for restarting actors, and the check that
every planned episode came back exactly once. Kept beside `coplay.actors.system`, whose `System` uses them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from coplay.driver.progress import Phase
from coplay.rollout.model_episodes import EpisodePlan
from coplay.types import RolloutResult, decode_shard

Poll = Callable[[], tuple[float, str] | None]


class EpisodeAccountingError(RuntimeError):
    """Rollouts came back with a planned episode missing or an episode twice."""


def actor_died(exc: BaseException) -> bool:
    """A dead (restarting or gone) actor, directly or as the cause of a failed task."""
    if isinstance(exc, RayActorError):
        return True
    return isinstance(exc, RayTaskError) and isinstance(getattr(exc, "cause", None), RayActorError)


def wait_alive(actors: list[Any], timeout_s: float = 900.0) -> None:
    """Block until every actor answers `ping` (a restarting actor refuses calls until its constructor is
    done); a permanently dead actor raises `ActorDiedError`."""
    from ray.exceptions import ActorUnavailableError

    deadline = time.monotonic() + timeout_s
    for actor in actors:
        while True:
            try:
                ray.get(actor.ping.remote(), timeout=max(1.0, deadline - time.monotonic()))
                break
            except ActorUnavailableError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1.0)


@dataclass
class Rollouts:
    """Rollouts in flight: one chunk of plans per worker slot, its worker index and its future."""

    iteration: int
    chunks: list[list[EpisodePlan]]
    workers: list[int]
    refs: list[Any]
    started: float = field(default_factory=time.perf_counter)
    bar: Phase = field(default_factory=lambda: Phase(shown=False, closed=True))  # begun at launch


@dataclass
class BankJob:
    """A bank update in flight, with what it needs to be rerun."""

    iteration: int
    shards: list[bytes]
    names: dict[str, str | None]
    base: dict[str, int]
    candidates: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    ref: Any = None
    attempts: int = 0
    bar: Phase = field(default_factory=lambda: Phase(shown=False, closed=True))  # begun when it was started


def check_exactly_once(planned: list[str], results: list[RolloutResult], iteration: int) -> None:
    """Every planned episode came back, and no (episode, seat) twice."""
    seen: set[tuple[str, str]] = set()
    episodes: set[str] = set()
    for result in results:
        for traj in decode_shard(result.shard, f"it{iteration} result").trajectories:
            key = (traj.episode_id, traj.seat)
            if key in seen:
                raise EpisodeAccountingError(f"iteration {iteration}: episode {key[0]} seat {key[1]} "
                                             f"came back twice")
            seen.add(key)
            episodes.add(traj.episode_id)
    missing = sorted(set(planned) - episodes)
    if missing:
        raise EpisodeAccountingError(f"iteration {iteration}: {len(missing)} planned episodes never came "
                                     f"back: {missing[:5]}")


def when_ready(refs: list[Any], own_time: Callable[[list[Any]], tuple[float, str]]) -> Poll:
    """A phase's `poll` (`coplay.driver.progress.begin`): None while any of `refs` is pending, then
    `own_time` of their results (the work's own seconds and a note), so the console ends the phase when the
    work is done rather than when the driver gets round to collecting it. A failed ref also gives None: the
    driver's own wait reports and handles the failure."""

    def poll() -> tuple[float, str] | None:
        if not refs:
            return None
        ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=0)
        if len(ready) < len(refs):
            return None
        try:
            return own_time(ray.get(list(refs), timeout=10.0))
        except (RayActorError, RayTaskError, GetTimeoutError):
            return None

    return poll


def rollouts_time(results: list[RolloutResult]) -> tuple[float, str]:
    """Rollouts' own time: the slowest worker's (each times its chunk), and the steps they played."""
    steps = sum(int(r.counters.get("steps", 0)) for r in results)
    return max((r.seconds for r in results), default=0.0), f"{steps} steps"
