"""Self-play scaling: episodes/s and trained samples/s of Avalon and Diplomacy self-play with 1 and 2 rollout
workers, and the ratio 2 workers / 1 worker measured in the same run (per GPU where GPUs exist, per CPU slot
otherwise).

Workload per (game, workers): a real `coplay.loop.train` run (its own local Ray cluster) from
`launch/configs/tiny-<game>.yaml` (tiny model, hf engine, plain-torch learner) with the cold-start SFT off,
evaluation off, `--iterations` iterations (staleness 1), `rollout.start_states` a multiple of the worker
count so whole GRPO groups split evenly over the workers, and the fair self-play line-ups of
`rollout.selfplay` (the pool's default weights). Figures from `metrics.jsonl`, over the measured iterations
k >= 2 (iteration 1 has no learner step):
    episodes/s        = sum(episodes) / W            W = sum(timings.iteration_s)
    rollout episodes/s = sum(episodes) / sum(timings.rollout_wall_s)
    trained samples/s = sum(samples of the learner step in the iteration) / W
    per slot          = figure / (rollout workers + learner ranks)   (GPUs they hold, on GPU)
Ray gets `workers + 1` logical CPUs (one per worker, one for the learner rank): on a 2-core machine two
workers oversubscribe the cores, which the JSON records with the core count and the load average.

Run: ``python -m benchmarks.selfplay [--quick] [--games avalon,diplomacy] [--workers 1,2] [--iterations 3]``
Imports ray and torch only through `coplay.loop` (lazily).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
COMMAND = "python -m benchmarks.selfplay"


def run_one(game: str, workers: int, iterations: int, start_states_per_worker: int, group_size: int,
            max_steps: int, out_dir: Path) -> dict[str, Any]:
    """One loop run; its figures over the measured iterations."""
    import torch

    from coplay.config import load_config
    from coplay.loop import train

    overrides = [f"run.out_dir={out_dir}", f"run.name={game}-w{workers}", "cluster.address=null",
                 f"cluster.num_cpus={workers + 1}", "sft.enabled=false", "eval.every=0",
                 f"loop.iterations={iterations}", "loop.staleness=1",
                 f"loop.checkpoint_every={iterations + 1}",
                 f"rollout.workers={workers}", f"rollout.start_states={start_states_per_worker * workers}",
                 f"rollout.group_size={group_size}", f"rollout.max_steps={max_steps}",
                 "logging.console=false", "logging.tensorboard=false"]
    cfg = load_config(REPO / "launch" / "configs" / f"tiny-{game}.yaml", overrides)
    started = time.perf_counter()
    run_dir = Path(train(cfg))
    total = time.perf_counter() - started
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line]
    measured = [r for r in records if r.get("iteration", 0) >= 2 and "timings" in r]
    wall = sum(r["timings"]["iteration_s"] for r in measured)
    rollout = sum(r["timings"]["rollout_wall_s"] for r in measured)
    episodes = sum(r["episodes"] for r in measured)
    samples = sum(part.get("n", 0) for r in measured
                  for part in r.get("train", {}).get("reward_parts", {}).values())
    gpu = torch.cuda.is_available()
    slots = workers + cfg.learner.ranks  # on GPU each holds one GPU in these configs' cluster settings
    return {"game": game, "workers": workers, "measured_iterations": len(measured), "wall_s": wall,
            "episodes": episodes, "trained_samples": samples,
            "episodes_per_s": episodes / wall, "rollout_episodes_per_s": episodes / rollout,
            "trained_samples_per_s": samples / wall,
            f"episodes_per_s_per_{'gpu' if gpu else 'slot'}": episodes / wall / slots,
            f"trained_samples_per_s_per_{'gpu' if gpu else 'slot'}": samples / wall / slots,
            "iteration_s": [r["timings"]["iteration_s"] for r in measured],
            "run_s_incl_startup": round(total, 1), "run_dir": str(run_dir)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", default="avalon,diplomacy")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--start-states-per-worker", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=2)
    parser.add_argument("--max-steps", type=int, default=8)
    parser.add_argument("--quick", action="store_true", help="2 iterations, 1 start state per worker")
    parser.add_argument("--out-dir", default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.iterations, args.start_states_per_worker = 2, 1
    out_dir = Path(args.out_dir or tempfile.mkdtemp(prefix="selfplay-bench-"))
    load_before = os.getloadavg()
    runs = [run_one(game, int(w), args.iterations, args.start_states_per_worker, args.group_size,
                    args.max_steps, out_dir)
            for game in args.games.split(",") for w in args.workers.split(",")]
    scaling = {}
    for game in args.games.split(","):
        by_w = {r["workers"]: r for r in runs if r["game"] == game}
        if 1 in by_w and 2 in by_w:
            one, two = by_w[1], by_w[2]
            scaling[game] = {"episodes_per_s_2_over_1": two["episodes_per_s"] / one["episodes_per_s"],
                             "trained_samples_per_s_2_over_1": (two["trained_samples_per_s"]
                                                                / max(one["trained_samples_per_s"], 1e-9))}
    result = {"benchmark": "selfplay",
              "command": f"{COMMAND} --games {args.games} --workers {args.workers} --iterations "
                         f"{args.iterations} --start-states-per-worker {args.start_states_per_worker} "
                         f"--group-size {args.group_size} --max-steps {args.max_steps}",
              "cpus": os.cpu_count(), "platform": platform.platform(), "load_before": load_before,
              "load_after": os.getloadavg(), "runs": runs, "scaling": scaling,
              "headline": {f"{r['game']}_w{r['workers']}_episodes_per_s": r["episodes_per_s"] for r in runs}}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
