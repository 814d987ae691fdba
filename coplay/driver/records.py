"""Records the loop carries on the driver between its phases (STYLE: records, not tuples or dicts).

`IterationData` is what one iteration's rollouts leave for the two later consumers, the bank update over
it (during the next iteration) and the learner step that trains on it; `CollectStats` is what collecting
the rollouts measured. Records returned by actors (`RolloutResult`, `BankUpdate`, `TrainStep`) are in
`coplay.types`. Pure Python.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from coplay.types import RolloutResult, Sample, Trajectory


@dataclass
class IterationData:
    """The rollouts of iteration `iteration`: their trajectories and shards (msgpack bytes, as written to the
    run folder), the bank versions they played with, and the bank adapters' samples of the bank update over
    the iteration before (which the same learner step trains on)."""

    iteration: int
    trajectories: list[Trajectory]
    shards: list[bytes]
    bank_versions: dict[str, int]
    bank_samples: list[Sample] = field(default_factory=list)


COUNTED = ("steps", "invalid_actions", "parse_errors", "model_calls", "env_ns", "prompt_trim_history",
           "prompt_trim_legal", "prompt_too_long")


@dataclass
class CollectStats:
    """Timings and counters of one iteration's rollouts and of waiting for its bank update."""

    generation_seconds: float = 0.0
    wall_seconds: float = 0.0
    generated_tokens: int = 0
    steps: int = 0
    invalid_actions: int = 0
    parse_errors: int = 0
    model_calls: int = 0
    env_ns: int = 0
    prompt_trim_history: int = 0  # act prompts whose history was shortened to fit the context
    prompt_trim_legal: int = 0  # act prompts showing only part of the legal actions
    prompt_too_long: int = 0  # prompts that did not fit at all (the game's fallback action was played)
    sync_s: float = 0.0
    bank_wait_s: float = 0.0
    bank_s: float = 0.0
    adapters_held: int = 0  # the most adapter versions any worker held while these rollouts ran
    frozen_held: int = 0  # the most frozen `act` versions any worker held meanwhile
    pulled_bytes: int = 0  # adapter bytes the workers pulled from the object store since the last line
    pull_s: float = 0.0  # their pull seconds, summed over workers
    worker_seconds: list[float] = field(default_factory=list)  # per chunk (one per worker): rollout time
    worker_episodes: list[int] = field(default_factory=list)  # per chunk: episode seats played

    @classmethod
    def of(cls, results: list[RolloutResult], wall_seconds: float) -> CollectStats:
        """Generation time is the slowest worker's; counters are summed over workers."""
        stats = cls(generation_seconds=max((r.seconds for r in results), default=0.0),
                    wall_seconds=wall_seconds, generated_tokens=sum(r.generated_tokens for r in results),
                    worker_seconds=[r.seconds for r in results],
                    worker_episodes=[len(r.episodes) for r in results])
        for key in COUNTED:
            setattr(stats, key, sum(int(r.counters.get(key, 0)) for r in results))
        return stats
