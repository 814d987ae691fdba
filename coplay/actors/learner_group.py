"""The LearnerGroup: N learner ranks (Ray actors on a placement group, one per GPU or CPU slot) forming one
torch.distributed group for DeepSpeed; rank 0 publishes adapter versions (docs/architecture.md).

Every call goes to all ranks (ZeRO collectives need them all) and the group returns rank 0's answer.
The training logic is `coplay.learn.learner.Learner`.
"""

from __future__ import annotations

import os
from typing import Any

import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from coplay.artifacts.bundle import AdapterBundle
from coplay.config import CoplayConfig
from coplay.types import Sample, TrainStep


def actor_gpus(configured: float | None) -> float:
    """GPUs per actor: as configured, else one when the cluster has GPUs (a real cluster's resources are
    only known once connected), else none."""
    if configured is not None:
        return configured
    return 1.0 if ray.cluster_resources().get("GPU", 0) >= 1 else 0.0


class LearnerRankImpl:
    """One rank: the process-group environment, then a `Learner`."""

    def __init__(self, rank: int, world_size: int, master_addr: str, master_port: int,
                 cfg: dict[str, Any]) -> None:
        os.environ.update({"RANK": str(rank), "LOCAL_RANK": "0", "WORLD_SIZE": str(world_size),
                           "MASTER_ADDR": master_addr, "MASTER_PORT": str(master_port)})
        from coplay.learn.learner import Learner
        from coplay.models import default_device

        default_device()
        self.cfg = CoplayConfig.model_validate(cfg)
        self.rank = rank
        self.learner = Learner(self.cfg.model, self.cfg.adapters, self.cfg.learner,
                               self.cfg.sampling.max_tokens, seed=self.cfg.seeds.run)

    def train_step(self, samples: list[Sample], advantages: dict[str, float]) -> TrainStep:
        metrics = self.learner.train_step(samples, advantages)
        return TrainStep(metrics.learner_step, metrics.adapters, metrics.trained_tokens,
                         dict(self.learner.versions))

    def sft(self, examples: list[Any], epochs: int, lr: float,
            min_batches: dict[str, int] | None = None) -> dict[str, Any]:
        """Cold-start SFT of every adapter that has examples; per adapter the first and last batch loss.
        An adapter with few examples runs more epochs, until it has at least `min_batches[adapter]`
        batches."""
        from coplay.learn.sft import run_sft, sft_epochs

        report = {}
        for adapter in self.learner.adapter_names:
            mine = [e for e in examples if e.adapter == adapter]
            if mine:
                adapter_epochs = sft_epochs(len(mine), epochs, (min_batches or {}).get(adapter, 0))
                losses = run_sft(self.learner, adapter, mine, epochs=adapter_epochs, lr=lr,
                                 seed=self.cfg.seeds.run)
                report[adapter] = {"examples": len(mine), "epochs": adapter_epochs, "batches": len(losses),
                                   "first_loss": losses[0], "last_loss": losses[-1]}
        return report

    def export(self, adapters: list[str]) -> dict[str, AdapterBundle]:
        """Bundles of the given adapters at their current versions (`Learner.export`: collective under
        ZeRO-3; rank 0 returns them)."""
        return self.learner.export(adapters)

    def save_checkpoint(self, folder: str, bank_version: Any, data_cursor: Any, extra: dict[str, Any]) -> str:
        from coplay.learn.checkpoint import save_checkpoint

        return str(save_checkpoint(self.learner, folder, bank_version, data_cursor, extra))

    def load_checkpoint(self, folder: str) -> Any:
        from coplay.learn.checkpoint import load_checkpoint

        return load_checkpoint(self.learner, folder)

    def versions(self) -> dict[str, int]:
        return dict(self.learner.versions)


LearnerRank = ray.remote(LearnerRankImpl)


class LearnerGroup:
    """Driver-side handle of the ranks: calls fan out to every rank; rank 0's result comes back."""

    def __init__(self, cfg: CoplayConfig) -> None:
        from coplay.learn.distributed import free_port

        world = cfg.learner.ranks
        gpus = actor_gpus(cfg.cluster.learner_rank_gpus)
        self.pg = placement_group([{"CPU": 1, **({"GPU": gpus} if gpus else {})}] * world, strategy="PACK")
        ray.get(self.pg.ready())
        master = ray.util.get_node_ip_address() if cfg.cluster.address else "127.0.0.1"
        port = free_port()
        dump = cfg.model_dump(mode="json")
        self.ranks = [
            LearnerRank.options(
                num_cpus=1, num_gpus=gpus, max_restarts=0,
                scheduling_strategy=PlacementGroupSchedulingStrategy(placement_group=self.pg,
                                                                     placement_group_bundle_index=r),
            ).remote(r, world, master, port, dump)
            for r in range(world)
        ]

    def _all(self, method: str, *args: Any) -> Any:
        return ray.get([getattr(rank, method).remote(*args) for rank in self.ranks])[0]

    def train_step(self, samples: list[Sample], advantages: dict[str, float]) -> TrainStep:
        return self._all("train_step", samples, advantages)

    def sft(self, examples: list[Any], epochs: int, lr: float,
            min_batches: dict[str, int] | None = None) -> dict[str, Any]:
        return self._all("sft", examples, epochs, lr, min_batches)

    def export(self, adapters: list[str]) -> dict[str, AdapterBundle]:
        return self._all("export", adapters)

    def save_checkpoint(self, folder: str, bank_version: Any, data_cursor: Any, extra: dict[str, Any]) -> str:
        return self._all("save_checkpoint", folder, bank_version, data_cursor, extra)

    def load_checkpoint(self, folder: str) -> Any:
        return self._all("load_checkpoint", folder)

    def versions(self) -> dict[str, int]:
        return self._all("versions")

    def shutdown(self) -> None:
        """Kill the ranks and free their placement group (another run may share the cluster)."""
        from ray.util.placement_group import remove_placement_group

        for rank in self.ranks:
            ray.kill(rank, no_restart=True)
        remove_placement_group(self.pg)
