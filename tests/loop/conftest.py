"""One real local Ray cluster (2 CPUs, loopback, no dashboard) for the loop tests of this folder."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def ray_cluster():
    import ray

    from coplay.config import ClusterConfig
    from coplay.security import ray_init_kwargs

    ray.init(**ray_init_kwargs(ClusterConfig(num_cpus=2)))
    yield
    ray.shutdown()


def tiny_loop_overrides(out_dir: str, cache_dir: str) -> list[str]:
    """A co-evolution run small enough for CI: 2048, tiny model, vLLM CPU engine, DeepSpeed ZeRO-2."""
    return [
        f"run.out_dir={out_dir}", "run.name=loop-test", f"model.tiny.cache_dir={cache_dir}", "games=[2048]",
        "rollout.workers=1", "rollout.start_states=2", "rollout.group_size=4", "rollout.max_steps=6",
        "rollout.concurrent_episodes=8", "rollout.retrieve_every=2",
        "sampling.max_tokens={act: 24, retrieve: 8, segment: 24, contract: 96, curator: 16}",
        "engine.max_model_len=2048", "engine.max_num_seqs=16", "engine.enforce_eager=true", "engine.dtype=float32",
        "sft.episodes_per_game=16", "sft.max_steps=40", "sft.max_examples_per_adapter=96", "sft.epochs=8", "sft.lr=1e-2",
        "sft.min_batches_per_adapter=24", "sft.adapter_min_batches={contract: 150}",
        "learner.backend=deepspeed", "learner.zero_stage=2", "learner.lr=1e-3", "learner.micro_batch_size=8",
        "sampling.temperature=0.7", "loop.iterations=2", "loop.staleness=1", "loop.eval_every=0", "loop.checkpoint_every=2",
        "skill_bank.group_size=4", "cluster.num_cpus=2", "logging.console=false",
    ]
