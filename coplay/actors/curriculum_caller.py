"""The curriculum's way to the model (docs/curriculum.md): a `ModelCaller` over the rollout workers' engines,
like the skill-bank actor's, for the `propose` and `act` adapters at the versions the workers serve."""

from __future__ import annotations

from typing import Any

import ray

from coplay.skills.caller import FunctionCaller


def worker_caller(workers: list[Any], engine_names: dict[str, str], temperature: float,
                  seed: int) -> FunctionCaller:
    """Round-robin over `workers`; each call is seeded (run seed, iteration, call number) for replays."""
    if not workers:
        raise ValueError("the curriculum needs at least one rollout worker (rollout.workers >= 1)")
    calls = {"n": 0}

    def generate(adapter: str, prompts: list[Any], n: int, max_tokens: int,
                 regex: str | None = None) -> list[list[Any]]:
        worker = workers[calls["n"] % len(workers)]
        call_seed = seed + calls["n"]
        calls["n"] += 1
        return ray.get(worker.complete.remote(engine_names[adapter], prompts, n, max_tokens, temperature,
                                              call_seed, regex))

    return FunctionCaller(generate, pass_max_tokens=True, pass_regex=True)
