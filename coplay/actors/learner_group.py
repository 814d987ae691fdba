"""The LearnerGroup: N learner ranks (Ray actors on a placement group, one per GPU or CPU slot) forming one
torch.distributed group for DeepSpeed; rank 0 publishes adapter versions (docs/architecture.md).

Rendezvous from rank 0: the ranks start empty; rank 0 opens a listening socket on its own node (127.0.0.1
in a local run, its node address when `cluster.address` is set) and reports `(address, port)`; then every
rank joins there (`coplay.learn.distributed.join_process_group`) and builds its learner. The driver's node
plays no part, so a driver on a head without GPUs works. Every call goes to all ranks (ZeRO collectives need
them all) and the group returns rank 0's answer. The training logic is `coplay.learn.learner.Learner`.

A dead rank: the surviving ranks would wait inside a collective until the process group's timeout, so the
group watches every call's futures as they finish; when a rank dies it kills the whole group at once and
raises `LearnerDiedError`, one line that names the rank and says how to resume (`coplay train --resume
RUN_DIR` continues exactly from the newest checkpoint). Ranks are named `<run folder>.learner-<r>`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import RayActorError, RayTaskError
from ray.util.placement_group import PlacementGroup, placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from coplay.actors.connect import actor_options
from coplay.artifacts.bundle import AdapterBundle
from coplay.config import ClusterConfig, ConfigError, CoplayConfig
from coplay.types import Sample, TrainStep


def actor_gpus(configured: float | None) -> float:
    """GPUs per actor: as configured, else one when the cluster has GPUs (a real cluster's resources are
    only known once connected), else none."""
    if configured is not None:
        return configured
    return 1.0 if ray.cluster_resources().get("GPU", 0) >= 1 else 0.0


class LearnerDiedError(RuntimeError):
    """A learner rank died: the group is gone and the run stops (the message says how to resume)."""


@dataclass(frozen=True)
class RankPlace:
    """Where a rank runs and which rendezvous it joined (operators and tests check it)."""

    rank: int
    node_id: str
    node_ip: str
    master_addr: str
    master_port: int


def sft_thread_count(configured: int | None, world_size: int) -> int:
    """Torch threads a rank trains the cold start with: `configured`, else this machine's CPUs shared by the
    ranks. Ray starts the rank with one thread (its one CPU slot), right while rollouts and GRPO overlap, but
    during the cold start nothing else runs, and on a 2-core machine one thread halves the SFT's speed."""
    return configured or max(1, len(os.sched_getaffinity(0)) // world_size)


@contextmanager
def torch_threads(count: int | None) -> Iterator[None]:
    """Run the block with `count` intra-op torch threads (None: leave them as they are), then restore the
    previous count."""
    import torch

    if count is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class LearnerRankImpl:
    """One rank: created empty; rank 0 reports a rendezvous (`rendezvous`), every rank `join`s it and builds
    its `Learner`."""

    def __init__(self, rank: int, world_size: int, cfg: dict[str, Any]) -> None:
        self.cfg = CoplayConfig.model_validate(cfg)
        self.rank, self.world_size = rank, world_size
        self.listener: Any = None
        self.master: tuple[str, int] | None = None
        self.learner: Any = None
        self.sft_session: Any = None

    def check_memory(self) -> str:
        """This rank's memory estimate against its device (`coplay.learn.memory`), before anything loads;
        raises `LearnerMemoryError` when it cannot fit. Returns the estimate's line."""
        from coplay.learn.memory import check_learner_memory
        from coplay.models import default_device

        return check_learner_memory(self.cfg, self.world_size, default_device()).describe()

    def rendezvous(self) -> tuple[str, int]:
        """Rank 0: open the group's listening socket on this node and report (address, port). A local run
        (no `cluster.address`) binds loopback only."""
        from coplay.learn.distributed import LOOPBACK, open_rendezvous

        if self.rank != 0:
            raise RuntimeError(f"rank {self.rank} asked to host the rendezvous; rank 0 hosts it")
        host = LOOPBACK if self.cfg.cluster.address is None else ray.util.get_node_ip_address()
        self.listener = open_rendezvous(host)
        return host, int(self.listener.getsockname()[1])

    def join(self, master_addr: str, master_port: int) -> RankPlace:
        """Join the process group at rank 0's address, then build the learner (collective: every rank's
        `join` runs at once)."""
        from coplay.learn.distributed import join_process_group
        from coplay.learn.learner import Learner
        from coplay.models import default_device

        listener, self.listener = self.listener, None
        join_process_group(self.rank, self.world_size, master_addr, master_port, listener,
                           node_addr=ray.util.get_node_ip_address())
        self.master = (master_addr, master_port)
        default_device()
        self.learner = Learner(self.cfg.model, self.cfg.adapters, self.cfg.learner,
                               self.cfg.sampling.max_tokens, seed=self.cfg.seeds.run,
                               adapter_names=self.cfg.active_adapters)
        return self.place()

    def place(self) -> RankPlace:
        ctx = ray.get_runtime_context()
        addr, port = self.master or ("", 0)
        return RankPlace(self.rank, ctx.get_node_id(), ray.util.get_node_ip_address(), addr, port)

    def train_step(self, samples: list[Sample], advantages: dict[str, float]) -> TrainStep:
        with torch_threads(self.cfg.learner.threads):
            metrics = self.learner.train_step(samples, advantages)
        return TrainStep(metrics.learner_step, metrics.adapters, metrics.trained_tokens,
                         dict(self.learner.versions), timings=dict(metrics.seconds))

    def sft_begin(self, examples: list[Any], epochs: int, lr: float,
                  min_batches: dict[str, int] | None = None) -> int:
        """Start the cold-start SFT of every adapter that has examples (`SftSession.for_examples`); returns
        its number of optimizer batches. `sft_run` trains it a chunk at a time, `sft_report` summarises it."""
        from coplay.learn.sft import SftSession

        self.sft_session = SftSession.for_examples(self.learner, examples, epochs, lr, min_batches,
                                                   self.cfg.seeds.run, self.cfg.sft.batch_size)
        return self.sft_session.total

    def sft_run(self, max_batches: int) -> int:
        """Train the next `max_batches` SFT batches with `sft.threads` torch threads (`sft_thread_count`);
        how many ran (0: the SFT is done)."""
        with torch_threads(sft_thread_count(self.cfg.sft.threads, self.world_size)):
            return len(self.sft_session.run(max_batches))

    def sft_report(self) -> dict[str, Any]:
        """Per adapter: examples, epochs, batches, first and last batch loss (`SftSession.report`)."""
        return self.sft_session.report()

    def export(self, adapters: list[str]) -> dict[str, AdapterBundle]:
        """Bundles of the given adapters at their current versions (`Learner.export`: collective under
        ZeRO-3; rank 0 returns them)."""
        return self.learner.export(adapters)

    def export_refs(self, adapters: list[str]) -> dict[str, tuple[list[Any], str]]:
        """`export`, with rank 0 as the publisher: each bundle is put into Ray's object store here, once,
        and only its ref travels on (adapter -> ([ObjectRef], sha256)); the store and the workers pull the
        bytes by that ref (docs/gpu-clusters.md). Other ranks take part in the gather and return {}."""
        bundles = self.export(adapters)
        return {adapter: ([ray.put(bundle)], bundle.sha256) for adapter, bundle in bundles.items()}

    def storage_probe(self, run_root: str, token: str) -> Any:
        """Write this rank's probe file into the run folder (`coplay.actors.storage_probe`)."""
        from coplay.actors.storage_probe import write_probe

        return write_probe(run_root, f"learner rank {self.rank}", token)

    def measure_update(self, adapters: list[str], prompts: dict[str, list[Sample]],
                       max_prompts: int) -> dict[str, dict[str, Any]]:
        """`Learner.measure_update` in the engines' serving dtype (`engine.dtype`), as plain dicts."""
        from coplay.engines.hf_engine import resolve_dtype
        from coplay.learn.update_size import serving_dtype

        serving = serving_dtype(resolve_dtype(self.cfg.model, self.cfg.engine,
                                              on_gpu=self.learner.device != "cpu"), self.learner.device)
        with torch_threads(self.cfg.learner.threads):
            sizes = self.learner.measure_update(adapters, prompts, serving, max_prompts)
        return {adapter: size.as_dict() for adapter, size in sizes.items()}

    def save_checkpoint(self, folder: str, bank_version: Any, data_cursor: Any, extra: dict[str, Any]) -> str:
        from coplay.learn.checkpoint import save_checkpoint

        return str(save_checkpoint(self.learner, folder, bank_version, data_cursor, extra))

    def load_checkpoint(self, folder: str) -> Any:
        from coplay.learn.checkpoint import load_checkpoint

        return load_checkpoint(self.learner, folder)

    def versions(self) -> dict[str, int]:
        return dict(self.learner.versions)


LearnerRank = ray.remote(LearnerRankImpl)


def learner_placement_group(cluster: ClusterConfig, world: int, gpus: float) -> PlacementGroup:
    """The ranks' placement group, ready: one bundle per rank (1 CPU, `gpus` GPUs, the custom resources),
    placed by `cluster.learner_placement` (STRICT_PACK by default: every rank on one node, where NCCL's
    all-reduce stays off the network; coplay/config/placement.py). A group that cannot be placed within
    `cluster.learner_placement_timeout_s` is removed and refused in one line: what it asked for, and the
    most any one node offers now."""
    from ray.exceptions import GetTimeoutError
    from ray.util.placement_group import remove_placement_group

    bundle = {"CPU": 1, **({"GPU": gpus} if gpus else {}), **cluster.learner_rank_resources}
    strategy = cluster.learner_placement
    pg = placement_group([bundle] * world, strategy=strategy)
    try:
        ray.get(pg.ready(), timeout=cluster.learner_placement_timeout_s)
    except GetTimeoutError:
        remove_placement_group(pg)
        per_node = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
        most = {key: max(r.get(key, 0) for r in per_node) for key in bundle} if per_node else {}
        hint = ("one node must hold them all; set cluster.learner_placement=PACK to let them span nodes, or "
                "lower learner.ranks" if strategy == "STRICT_PACK" else "lower learner.ranks or add nodes")
        raise ConfigError(f"cluster.learner_placement={strategy}: {world} learner ranks of {bundle} not "
                          f"placed within {cluster.learner_placement_timeout_s:g} s (the most one node "
                          f"offers: {most}); {hint}") from None
    return pg


class LearnerGroup:
    """Driver-side handle of the ranks: calls fan out to every rank; rank 0's result comes back."""

    def __init__(self, cfg: CoplayConfig, name: str = "", resume_hint: str = "") -> None:
        """`name`: the ranks' actor name prefix (`<name>.learner-<r>`; none when empty). `resume_hint`: what
        `LearnerDiedError` tells the user to run."""
        self.resume_hint = resume_hint
        self.alive = True
        world = cfg.learner.ranks
        gpus = actor_gpus(cfg.cluster.learner_rank_gpus)
        self.pg = learner_placement_group(cfg.cluster, world, gpus)
        dump = cfg.model_dump(mode="json")
        named = [{"name": f"{name}.learner-{r}"} if name else {} for r in range(world)]
        self.ranks = [
            LearnerRank.options(
                num_cpus=1, num_gpus=gpus, max_restarts=0, **named[r], **actor_options(cfg.cluster),
                scheduling_strategy=PlacementGroupSchedulingStrategy(placement_group=self.pg,
                                                                     placement_group_bundle_index=r),
            ).remote(r, world, dump)
            for r in range(world)
        ]
        try:
            self.memory: list[str] = ray.get([rank.check_memory.remote() for rank in self.ranks])
        except RayTaskError as exc:  # a config that cannot fit: the one-line reason, not a remote traceback
            self.shutdown()
            if isinstance(exc.cause, ConfigError):
                raise exc.cause from None
            raise
        self.master: tuple[str, int] = ray.get(self.ranks[0].rendezvous.remote())
        self.places: list[RankPlace] = ray.get([rank.join.remote(*self.master) for rank in self.ranks])

    def _all(self, method: str, *args: Any) -> Any:
        """Call `method` on every rank; rank 0's result. A rank that dies ends the group at once."""
        if not self.alive:
            raise LearnerDiedError(f"the learner group is gone (a rank died earlier); {self.resume_hint}")
        refs = [getattr(rank, method).remote(*args) for rank in self.ranks]
        pending = list(refs)
        while pending:
            # a bounded wait: between waits Python runs its signal handlers, so Ctrl-C / SIGTERM stop the run
            # within a second even while a long SFT chunk or GRPO step is still running on the ranks
            ready, pending = ray.wait(pending, num_returns=1, timeout=1.0)
            if not ready:
                continue
            try:
                ray.get(ready[0])
            except RayActorError as exc:
                rank = refs.index(ready[0])
                self.shutdown()
                detail = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
                raise LearnerDiedError(f"learner rank {rank} died during {method} ({detail}); the run "
                                       f"stopped. {self.resume_hint}".strip()) from None
        return ray.get(refs[0])

    def describe(self) -> dict[str, Any]:
        """Where the group formed (logged with the cold start): the rendezvous rank 0 reported, each rank's
        node and the rendezvous it joined, and each rank's memory estimate."""
        from dataclasses import asdict

        return {"rendezvous": list(self.master), "ranks": [asdict(p) for p in self.places],
                "memory": list(self.memory)}

    def train_step(self, samples: list[Sample], advantages: dict[str, float]) -> TrainStep:
        return self._all("train_step", samples, advantages)

    def sft(self, examples: list[Any], epochs: int, lr: float, min_batches: dict[str, int] | None = None,
            progress: Any = None) -> dict[str, Any]:
        """Cold-start SFT on every rank, a chunk of batches per call so that `progress` (a
        `coplay.driver.progress.Phase`: `set_total`, `advance`) moves while it trains. Per adapter the
        first and last batch loss."""
        total = self._all("sft_begin", examples, epochs, lr, min_batches)
        if progress is not None:
            progress.set_total(total)
        chunk = max(1, min(8, total // 50))
        while ran := self._all("sft_run", chunk):
            if progress is not None:
                progress.advance(ran)
        return self._all("sft_report")

    def export(self, adapters: list[str]) -> dict[str, AdapterBundle]:
        return self._all("export", adapters)

    def export_refs(self, adapters: list[str]) -> dict[str, tuple[list[Any], str]]:
        """Rank 0's bundles as object-store refs (`LearnerRankImpl.export_refs`)."""
        return self._all("export_refs", adapters)

    def measure_update(self, adapters: list[str], prompts: dict[str, list[Sample]],
                       max_prompts: int) -> dict[str, dict[str, Any]]:
        return self._all("measure_update", adapters, prompts, max_prompts)

    def save_checkpoint(self, folder: str, bank_version: Any, data_cursor: Any, extra: dict[str, Any]) -> str:
        return self._all("save_checkpoint", folder, bank_version, data_cursor, extra)

    def load_checkpoint(self, folder: str) -> Any:
        return self._all("load_checkpoint", folder)

    def versions(self) -> dict[str, int]:
        return self._all("versions")

    def shutdown(self) -> None:
        """Kill the ranks and free their placement group (another run may share the cluster); once."""
        from ray.util.placement_group import remove_placement_group

        if not self.alive:
            return
        self.alive = False
        for rank in getattr(self, "ranks", []):
            ray.kill(rank, no_restart=True)
        remove_placement_group(self.pg)
