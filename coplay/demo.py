"""`make demo`: the main job on embedded defaults (CPU, tiny model, local everything).

Today's end-to-end path: build the tiny model, play 2048 with the expert and random bots on the training
seeds, write the trajectories as msgpack shards into a fresh run folder with per-policy metrics, and print
where everything is. It grows into a short co-evolution run as the loop lands (issue 8).
"""

from __future__ import annotations

import sys
import time

from coplay.config import load_config
from coplay.play import score_table
from coplay.rollout.bot_episodes import play_bot_episodes
from coplay.runs import RunDir
from coplay.stats import summarize
from coplay.types import Shard, write_shard


def main(argv: list[str] | None = None) -> int:
    cfg = load_config(None, ["run.name=demo", *(argv or [])])
    started = time.time()
    from coplay.models.tiny import build_tiny_model

    model_dir = build_tiny_model(cfg.model.tiny)
    run = RunDir.create(cfg.run.out_dir, cfg.run.name, cfg.to_yaml())
    seeds = list(range(cfg.seeds.train.start, cfg.seeds.train.start + 8))
    for game in cfg.games:
        for index, policy in enumerate(("expert", "random")):
            t0 = time.time()
            trajectories = play_bot_episodes(game, policy, seeds)
            write_shard(run.shard_path(0, 0, index),
                        Shard(f"demo-{game}-{policy}", iteration=0, worker=0, trajectories=trajectories))
            scores = summarize([t.score for t in trajectories])
            run.append_metrics({"iteration": 0, "game": game, "policy": policy, "episodes": len(trajectories),
                                "score_mean": scores.mean, "score_ci95": [scores.ci_low, scores.ci_high],
                                "steps": sum(len(t.steps) for t in trajectories), "seconds": time.time() - t0})
            print(score_table(trajectories, f"{game}: {policy} bots on training seeds {seeds[0]}..{seeds[-1]}"))
    print(f"tiny model:  {model_dir}")
    print(f"run folder:  {run.root}")
    print(f"  metrics:   {run.metrics_path}")
    print(f"  shards:    {run.shards}")
    print(f"done in {time.time() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
