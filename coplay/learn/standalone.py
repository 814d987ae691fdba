"""The standalone learner behind `python -m coplay.learn --shards DIR --out DIR [--config YAML] [--resume]
[KEY=VALUE ...]` (arguments: `coplay.cli.learn_main`).

Trains the adapters with GRPO from msgpack trajectory shards whose samples already carry rewards (`act`:
return-to-go R_t, `retrieve`: its R, bank adapters: their R). Each shard (in name order) is one learner step;
after each step the changed adapters are published under `OUT/adapters/<adapter>/v<n>/` and one JSON line
goes to `OUT/metrics.jsonl`; a checkpoint is written to `OUT/checkpoints/step-<k>/` every
`loop.checkpoint_every` steps and at the end. `--resume` continues from the newest checkpoint there (its
data cursor says which shard is next). Runs as one process or under `torchrun --nproc_per_node=N`.
Bad shards are reported and skipped (the others still train).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def train_from_shards(shards: Path, out: Path, config: str | None, overrides: list[str], resume: bool) -> int:
    """Train one learner step per shard of `shards` (module docstring); returns the exit status."""
    from coplay.config import ConfigError, load_config, require_trainable
    from coplay.files import append_line_atomic
    from coplay.learn.advantages import all_advantages, trains
    from coplay.learn.checkpoint import latest_checkpoint
    from coplay.learn.learner import Learner
    from coplay.learn.memory import check_learner_memory
    from coplay.models import default_device
    from coplay.types import ShardError, read_shard

    try:
        cfg = load_config(config, overrides)
        require_trainable(cfg)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    shard_paths = sorted(Path(shards).glob("*.msgpack"))
    if not shard_paths:
        print(f"no *.msgpack shards in {shards}", file=sys.stderr)
        return 2
    out = Path(out)
    try:
        check_learner_memory(cfg, int(os.environ.get("WORLD_SIZE", "1")), default_device())
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    learner = Learner(cfg.model, cfg.adapters, cfg.learner, max_tokens=cfg.sampling.max_tokens,
                      seed=cfg.seeds.run, adapter_names=cfg.active_adapters)
    next_shard = 0
    if resume:
        ckpt = latest_checkpoint(out / "checkpoints")
        if ckpt is None:
            print(f"--resume: no checkpoint under {out / 'checkpoints'}", file=sys.stderr)
            return 2
        next_shard = int(learner.load_checkpoint(ckpt).data_cursor["next_shard"])
    for index in range(next_shard, len(shard_paths)):
        try:
            shard = read_shard(shard_paths[index])
        except ShardError as exc:
            print(f"skipping: {exc}", file=sys.stderr)
            continue
        trajectories = [t for t in shard.trajectories if trains(t)]
        advantages = all_advantages(trajectories)  # a state-grouping trunk's act samples have none
        samples = [s for t in trajectories for s in t.samples if s.sample_id in advantages]
        started = time.perf_counter()
        metrics = learner.train_step(samples, advantages)
        versions = learner.publish(out / "adapters")
        seconds = time.perf_counter() - started
        if learner.rank == 0:
            out.mkdir(parents=True, exist_ok=True)
            record = {"learner_step": metrics.learner_step, "shard": shard_paths[index].name,
                      "trained_tokens": metrics.trained_tokens, "seconds": seconds,
                      "adapters": metrics.adapters, "published": [v.engine_name for v in versions]}
            append_line_atomic(out / "metrics.jsonl", json.dumps(record, sort_keys=True))
            print(json.dumps(record, sort_keys=True))
        if learner.learner_step % cfg.loop.checkpoint_every == 0 or index == len(shard_paths) - 1:
            learner.save_checkpoint(out / "checkpoints" / f"step-{learner.learner_step}",
                                    data_cursor={"next_shard": index + 1})
    final = out / "checkpoints" / f"step-{learner.learner_step}"
    if not final.exists():  # the last shard was unreadable: still checkpoint the end
        learner.save_checkpoint(final, data_cursor={"next_shard": len(shard_paths)})
    return 0

