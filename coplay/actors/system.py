"""The driver's handle on every actor of a run, and the few operations the loop composes: start, publish,
sync (with the corrupt-artifact protocol of DESIGN.md §6), launch rollouts, update the bank, train.

Keeping these here lets `coplay/loop.py` read top to bottom on one screen.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import ray

from coplay.actors.artifact_store import ArtifactStore
from coplay.actors.learner_group import LearnerGroup, actor_gpus
from coplay.actors.rollout_worker import RolloutWorker
from coplay.actors.skill_bank_actor import SkillBankActor
from coplay.config import CoplayConfig
from coplay.rollout.model_episodes import EpisodePlan
from coplay.runs import RunDir
from coplay.skills.schema import Bank
from coplay.types import Sample, Trajectory, decode_shard


@dataclass
class Rollouts:
    """Rollouts in flight: one future per worker."""

    iteration: int
    refs: list[Any]
    started: float = field(default_factory=time.perf_counter)


class System:
    """Handles of the ArtifactStore, the RolloutWorkers, the LearnerGroup and the SkillBankActor."""

    def __init__(self, cfg: CoplayConfig, run: RunDir) -> None:
        self.cfg, self.run = cfg, run
        dump = cfg.model_dump(mode="json")
        restarts = cfg.cluster.max_restarts
        self.store = ArtifactStore.remote(str(run.root), cfg.cluster.artifact_max_failures)
        gpu = actor_gpus(cfg.cluster.rollout_worker_gpus)
        self.workers = [RolloutWorker.options(num_cpus=1, num_gpus=gpu, max_restarts=restarts, max_concurrency=8,
                                              max_task_retries=0).remote(i, dump, self.store)
                        for i in range(cfg.rollout.workers)]
        self.learner = LearnerGroup(cfg)
        self.bank = SkillBankActor.options(num_cpus=0, max_restarts=restarts).remote(dump, self.store, self.workers)
        self.bank_payloads: dict[tuple[str, int], bytes] = {}

    # ------------------------------------------------------------------ artifacts
    def publish(self, adapters: list[str], learner_step: int) -> dict[str, int]:
        """Export the adapters from the learner and publish each as its current version."""
        published = {}
        for adapter, (files, sha, version) in self.learner.export(adapters).items():
            ray.get(self.store.put_adapter.remote(adapter, version, files, sha, learner_step))
            published[adapter] = version
        return published

    def sync(self, adapter_versions: dict[str, int], frozen_act: list[int], banks: dict[str, int]) -> None:
        """Every worker serves these versions. A refused artifact is republished from the run-folder copy and
        retried; the ArtifactStore stops the run after `cluster.artifact_max_failures` failures."""
        wanted = sorted({(a, v) for a, v in adapter_versions.items()} | {("act", v) for v in frozen_act})
        pending = list(self.workers)
        while pending:
            reports = ray.get([w.sync.remote(wanted, banks) for w in pending])
            retry = []
            for worker, report in zip(pending, reports, strict=True):
                for kind, name, version, error in report["failed"]:
                    ray.get(self.store.report_failure.remote(kind, name, version, error))
                    if kind == "adapter":
                        ray.get(self.store.republish_adapter.remote(name, version))
                if report["failed"]:
                    retry.append(worker)
            pending = retry

    def acknowledgements(self, versions: dict[str, int], banks: dict[str, int]) -> dict[str, dict[str, str]]:
        """`<name>@v<n>` -> {worker: sha256 it acknowledged} for the given versions."""
        out = {}
        for adapter, version in versions.items():
            out[f"{adapter}@v{version}"] = ray.get(self.store.acknowledged_by.remote("adapter", adapter, version))
        for key, version in banks.items():
            out[f"bank:{key}@v{version}"] = ray.get(self.store.acknowledged_by.remote("bank", key, version))
        return out

    def banks_for(self, versions: dict[str, int]) -> dict[str, Bank]:
        """The bank objects of given versions (for rewards on the driver), cached by version."""
        out = {}
        for key, version in versions.items():
            if (key, version) not in self.bank_payloads:
                self.bank_payloads[(key, version)] = ray.get(self.store.get_bank.remote(key, version))[0]
            out[key] = Bank.from_json(json.loads(self.bank_payloads[(key, version)]), source=f"{key} v{version}")
        return out

    # ------------------------------------------------------------------ rollouts and bank
    def launch(self, iteration: int, plans: list[EpisodePlan]) -> Rollouts:
        """Split the plans over the workers (round robin, whole GRPO groups stay together)."""
        n = len(self.workers)
        chunks: list[list[EpisodePlan]] = [[] for _ in range(n)]
        for i, plan in enumerate(plans):
            chunks[(i // self.cfg.rollout.group_size) % n].append(plan)
        refs = [w.rollout.remote(chunk, iteration) for w, chunk in zip(self.workers, chunks, strict=True) if chunk]
        return Rollouts(iteration, refs)

    def collect(self, rollouts: Rollouts) -> tuple[list[Trajectory], list[bytes], dict[str, Any]]:
        """Wait for the rollouts; write their shards to the run folder; decode them."""
        results = ray.get(rollouts.refs)
        trajectories: list[Trajectory] = []
        shards = []
        stats: dict[str, Any] = {"generation_seconds": max(r["seconds"] for r in results),
                                 "wall_seconds": time.perf_counter() - rollouts.started}
        for i, result in enumerate(results):
            path = self.run.shard_path(rollouts.iteration, i)
            path.write_bytes(result["shard"])
            shards.append(result["shard"])
            trajectories += decode_shard(result["shard"], str(path)).trajectories
            for key in ("generated_tokens", "steps", "invalid_actions", "parse_errors", "model_calls", "env_ns"):
                stats[key] = stats.get(key, 0) + result.get(key, 0)
        return trajectories, shards, stats

    def bank_update(self, iteration: int, shards: list[bytes], versions: dict[str, int]) -> Any:
        """Queue the shards of `iteration` and start the update (a future) with the bank adapters at
        `versions`; it runs while the next rollouts play."""
        for shard in shards:
            ray.get(self.bank.submit.remote(iteration, shard))
        names = {a: f"{a}@v{versions[a]}" for a in ("segment", "contract", "curator")}
        return self.bank.update.remote(iteration, names)

    def seed_banks(self, trajectories: list[Trajectory]) -> dict[str, int]:
        return ray.get(self.bank.seed_banks.remote(trajectories, 0))

    def bank_teacher_examples(self, limit_per_adapter: int = 64) -> list[Any]:
        from coplay.learn.teacher import ChatExample

        examples = ray.get(self.bank.teacher_examples.remote(limit_per_adapter))
        return [ChatExample(adapter, messages, answer) for adapter, messages, answer in examples]

    # ------------------------------------------------------------------ learning
    def train(self, samples: list[Sample], advantages: dict[str, float]) -> dict[str, Any]:
        started = time.perf_counter()
        metrics = self.learner.train_step(samples, advantages)
        changed = sorted(metrics["adapters"])
        metrics["published"] = self.publish(changed, metrics["learner_step"]) if changed else {}
        metrics["train_seconds"] = time.perf_counter() - started
        return metrics


def evaluate(system: System, iteration: int, versions: dict[str, int], bank_versions: dict[str, int]) -> dict[str, Any]:
    """The evaluation protocol (coplay.eval) on the workers at the given versions; writes eval/it<k>.*"""
    from coplay.eval import EvalProtocol, eval_plans, evaluated, player_seat, summarize_eval, write_eval

    cfg = system.cfg
    protocol = EvalProtocol(cfg.loop.eval_episodes_single, cfg.loop.eval_episodes_per_seat, cfg.loop.eval_opponents,
                            cfg.rollout.max_steps)
    plans = eval_plans(cfg, player_seat(cfg, "model", versions), protocol, f"it{iteration}")
    rollouts = system.launch(iteration, plans)
    results = ray.get(rollouts.refs)
    trajectories = [t for r in results for t in decode_shard(r["shard"], f"eval it{iteration}").trajectories]
    summary = summarize_eval(evaluated(trajectories, plans))
    write_eval(system.run.eval, f"it{iteration:05d}", summary,
               {"iteration": iteration, "versions": versions, "bank_versions": bank_versions,
                "temperature": cfg.sampling.eval_temperature, "seeds": [cfg.seeds.eval.start, cfg.seeds.eval.stop]})
    return summary


def checkpoint(system: System, iteration: int, ledger_steps: dict[int, dict[str, int]],
               banks: dict[int, dict[str, int]]) -> str:
    """Learner state plus the driver's schedule state, atomically under checkpoints/step-<k>/."""
    extra = {"iteration": iteration, "ledger": {str(k): v for k, v in ledger_steps.items()},
             "banks": {str(k): v for k, v in banks.items()}}
    return system.learner.save_checkpoint(str(system.run.checkpoint_dir(iteration)), banks.get(max(banks)),
                                          {"iteration": iteration}, extra)
