"""Mario rollouts with the emulator stepping in the worker's event loop vs on env threads
(`rollout.env_threads`), side by side in one process: wall time per round of episodes, the env share
(time inside env reset/step over wall time) and generated tokens/s, medians over `--repeats` rounds, and the
ratio (in-loop wall / threaded wall; above 1: threads overlap emulation with generation).

Workload: `--episodes` concurrent Super Mario Bros. episodes of `--steps` decisions each (seeds 0..), the tiny
local model's base weights through the `hf` engine in this process (the worker's runner and prompts, no Ray),
32 new tokens per decision at temperature 1; the two settings alternate round by round so load drifts hit
both. On a 2-core machine generation and emulation compete for the same cores: the ratio is what this
machine allows, not a GPU cluster's.

Run: ``python -m benchmarks.env_threads [--repeats 3] [--episodes 4] [--steps 6] [--threads 4]``.
Prints one JSON object (with the command).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from typing import Any

COMMAND = "python -m benchmarks.env_threads"


def one_round(engine: Any, episodes: int, steps: int, threads: int) -> dict[str, float]:
    import coplay_envs
    from coplay.agent.decision import ModelSeat
    from coplay.engines.base import SamplingParams
    from coplay.rollout.model_episodes import RunnerContext, SeatPlayer, group_plans, play_episodes

    sampling = SamplingParams(temperature=1.0, max_tokens=32)
    seat = ModelSeat(act=None, retrieve=None, act_sampling=sampling, retrieve_sampling=sampling,
                     prompt_budget=2000, history_len=2)
    plans = group_plans("mario", list(range(episodes)), 1, SeatPlayer("model", seat), "bench",
                        max_steps=steps)
    ctx = RunnerContext(engine=engine, rules=coplay_envs.rules, skills_for=lambda game, role: None,
                        env_threads=threads)
    started = time.perf_counter()
    trajectories = asyncio.run(play_episodes(ctx, plans, episodes))
    wall = time.perf_counter() - started
    tokens = sum(len(s.completion_ids) for t in trajectories for s in t.samples)
    return {"wall_s": wall, "env_share": ctx.counters.get("env_ns", 0) / 1e9 / wall,
            "generated_tokens_per_s": tokens / wall}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=4)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args(argv)
    from coplay.config import EngineConfig, ModelConfig
    from coplay.engines.factory import make_engine

    engine = make_engine(ModelConfig(name="tiny", dtype="float32"),
                         EngineConfig(backend="hf", max_model_len=2048, dtype="float32"))
    load_before = os.getloadavg()[0]
    rounds: dict[str, list[dict[str, float]]] = {"in_loop": [], "env_threads": []}
    one_round(engine, 1, 2, 0)  # warm-up: first emulator and model calls
    for _ in range(args.repeats):
        rounds["in_loop"].append(one_round(engine, args.episodes, args.steps, 0))
        rounds["env_threads"].append(one_round(engine, args.episodes, args.steps, args.threads))
    medians = {name: {k: statistics.median(r[k] for r in runs) for k in runs[0]}
               for name, runs in rounds.items()}
    result = {
        "command": " ".join([COMMAND, *(argv if argv is not None else sys.argv[1:])]),
        "workload": {"game": "mario", "episodes": args.episodes, "steps": args.steps, "threads": args.threads,
                     "engine": "hf", "model": "tiny", "repeats": args.repeats},
        "median": medians,
        "speedup_env_threads": medians["in_loop"]["wall_s"] / medians["env_threads"]["wall_s"],
        "rounds": rounds,
        "load_average_1min": {"before": load_before, "after": os.getloadavg()[0]},
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
