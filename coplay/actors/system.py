"""The driver's handle on every actor of a run, and the few operations the loop composes: start, publish,
sync (with the corrupt-artifact protocol of docs/architecture.md), launch rollouts, update the bank, train.

Fault tolerance lives here too (docs/architecture.md): RolloutWorkers and the SkillBankActor restart
(`cluster.max_restarts`); a rollout chunk whose worker died is re-run (on the next worker, which may be the
restarted one, re-synced first) and every planned episode enters the iteration exactly once (checked by
episode id and seat); a bank update that died (its actor, or a worker it called) is rerun from its shards on
the same base versions. Actors are named `<run folder>.worker-<i>`, `<run folder>.bank` and
`<run folder>.store` in the driver's namespace (operators and kill tests find them with `ray.get_actor`, and
the actors find one another so).

Keeping these here lets `coplay/loop.py` read top to bottom on one screen.
"""

from __future__ import annotations

import time
from typing import Any

import ray
from ray.exceptions import RayActorError, RayTaskError

from coplay.actors.artifact_store import ArtifactStore
from coplay.actors.connect import actor_options
from coplay.actors.inflight import (
    BankJob,
    Rollouts,
    actor_died,
    check_exactly_once,
    rollouts_time,
    wait_alive,
    when_ready,
)
from coplay.actors.learner_group import LearnerGroup, actor_gpus
from coplay.actors.rollout_worker import RolloutWorker
from coplay.actors.skill_bank_actor import SkillBankActor
from coplay.actors.storage_probe import StorageCheck
from coplay.artifacts import ArtifactError, RepublishPolicy
from coplay.artifacts.traffic import traffic_line
from coplay.config import BANK_ADAPTERS, CoplayConfig
from coplay.driver.curriculum import induction_candidates
from coplay.driver.progress import Phase, begin, close_all, phase, say
from coplay.driver.records import CollectStats, IterationData
from coplay.driver.schedule import BankSchedule, VersionLedger
from coplay.driver.spread import spread_plans
from coplay.engines.base import engine_name
from coplay.rollout.model_episodes import EpisodePlan
from coplay.runs import RunDir
from coplay.skills.schema import Bank
from coplay.types import BankUpdate, RolloutResult, Sample, TrainStep, Trajectory, decode_shard

PROGRESS_POLL_S = 2.0  # while rollouts run, the driver asks the workers how far they are this often


def _artifact_error(exc: RayTaskError) -> ArtifactError | None:
    cause = getattr(exc, "cause", None)
    return ArtifactError(str(cause)) if isinstance(cause, ArtifactError) else None


class System:
    """Handles of the ArtifactStore, the RolloutWorkers, the LearnerGroup and the SkillBankActor."""

    def __init__(self, cfg: CoplayConfig, run: RunDir) -> None:
        self.cfg, self.run = cfg, run
        # the config travels by value, a plain dict of a few KB that Ray inlines in the actor's creation
        # task: a restarting actor reads it from there. Put in the object store it could be lost on a
        # restart (Ray issue 53727), which Ray says in an error line for every actor with max_restarts > 0
        self.actor_config = cfg.model_dump(mode="json")
        restarts = cfg.cluster.max_restarts
        # the actors take one another by name (`coplay.actors.connect.named_actor`): the store is up first
        store = f"{run.root.name}.store"
        say(traffic_line(cfg))  # what each iteration's adapters will weigh (coplay/artifacts/traffic.py)
        self.store = ArtifactStore.options(name=store).remote(
            str(run.root), int(cfg.cluster.store_window_mb * (1 << 20)))
        ray.get(self.store.ping.remote())
        # a multi-node run checks that every node shares the run folder (coplay/actors/storage_probe.py)
        self.storage = StorageCheck.for_run(run.root)
        probes = self.storage.send({"the artifact store": self.store})
        gpu = actor_gpus(cfg.cluster.rollout_worker_gpus)
        names = [f"{run.root.name}.worker-{i}" for i in range(cfg.rollout.workers)]
        self.workers = [RolloutWorker.options(name=names[i], num_cpus=1, num_gpus=gpu,
                                              resources=dict(cfg.cluster.rollout_worker_resources),
                                              max_restarts=restarts, max_concurrency=8, max_task_retries=0,
                                              **actor_options(cfg.cluster))
                        .remote(i, self.actor_config, store)
                        for i in range(cfg.rollout.workers)]
        # the engines build in the background (behind the learner's start and the cold start); the phase
        # ends when they are up, with the slowest worker's own start time
        self.engines_bar = begin(f"start-up: rollout engines ({len(self.workers)} workers)", poll=when_ready(
            [w.startup_seconds.remote() for w in self.workers], lambda s: (max(s, default=0.0), "")))
        with phase(f"start-up: learner ({cfg.learner.ranks} ranks, {cfg.learner.backend})"):
            resume = f"Resume exactly from its newest checkpoint with: coplay train --resume {run.root}"
            self.learner = LearnerGroup(cfg, name=run.root.name, resume_hint=resume)
        self.storage.check({**probes, **self.storage.send({f"learner rank {r}": rank for r, rank in
                                                            enumerate(self.learner.ranks)})})
        self.bank = SkillBankActor.options(
            name=f"{run.root.name}.bank", num_cpus=0, max_restarts=restarts, max_task_retries=0
        ).remote(self.actor_config, store, names)
        self.bank_payloads: dict[tuple[str, int], bytes] = {}
        self.serving: tuple[list[tuple[str, int]], dict[str, int]] = ([], {})
        self.held: dict[int, list[str]] = {}  # worker index -> adapters it held after its last sync
        self.frozen: list[int] = []  # frozen `act` versions of the serving set
        self.pulled = [0, 0.0]
        self.republish = RepublishPolicy(cfg.cluster.artifact_max_failures)
        self.faults: dict[str, Any] = {}
        self.probe_prompts: list[Sample] = []  # the newest probe's act samples (`kl_prompts`)

    @classmethod
    def attach(cls, cfg: CoplayConfig, run: RunDir, store: Any, workers: list[Any]) -> System:
        """The driver's artifact and rollout protocols over existing actors, without a learner or a bank
        actor (tools, and tests of the corrupt-artifact protocol)."""
        system = cls.__new__(cls)
        system.cfg, system.run, system.store, system.workers = cfg, run, store, workers
        system.learner = system.bank = None
        system.bank_payloads, system.serving, system.faults = {}, ([], {}), {}
        system.held, system.frozen, system.pulled = {}, [], [0, 0.0]
        system.engines_bar = Phase(shown=False, closed=True)
        system.probe_prompts = []
        system.storage = StorageCheck.for_run(None)
        system.republish = RepublishPolicy(cfg.cluster.artifact_max_failures)
        return system

    def shutdown(self) -> None:
        """Kill every actor of this run (no restarts) and free the learner's placement group; phases still
        open on the console (the run stopped) close without an end line."""
        close_all()
        for actor in [*self.workers, self.bank, self.store]:
            if actor is not None:
                ray.kill(actor, no_restart=True)
        if self.learner is not None:
            self.learner.shutdown()

    def engines_ready(self) -> list[float]:
        """Wait until every rollout worker has built its engine (they start with the actors, behind the cold
        start) and return the seconds each worker's start took (the phase timeline's start-up)."""
        wait_alive(self.workers)
        seconds = [float(s) for s in ray.get([w.startup_seconds.remote() for w in self.workers])]
        # the workers' storage probes, now that they answer (a probe sent earlier would wait for the engine)
        self.storage.check(self.storage.send({f"rollout worker {i}": w for i, w in enumerate(self.workers)}))
        self.storage.close()
        self.storage = StorageCheck.for_run(None)  # checked once
        self.engines_bar.end(max(seconds, default=0.0))
        return seconds

    def take_faults(self) -> dict[str, Any]:
        """What failed and was recovered since the last call (logged per iteration)."""
        faults, self.faults = self.faults, {}
        return faults

    def _fault(self, kind: str, detail: str) -> None:
        self.faults.setdefault(kind, []).append(detail)

    # ------------------------------------------------------------------ artifacts
    def publish_adapters(self, adapters: list[str], learner_step: int,
                         timings: dict[str, float] | None = None) -> dict[str, int]:
        """Export the adapters from the learner and publish each as its current version; `timings` gets the
        seconds of each (`export_s`, `publish_s`: the phase timeline)."""
        started = time.perf_counter()
        # rank 0 puts each bundle into the object store once; only refs travel (coplay/actors/adapter_pull.py)
        bundles, versions = self.learner.export_refs(adapters), self.learner.versions()
        exported = time.perf_counter()
        ray.get([self.store.publish_adapter_ref.remote(adapter, versions[adapter], refs, sha256, learner_step)
                 for adapter, (refs, sha256) in bundles.items()])
        if timings is not None:
            timings.update(export_s=exported - started, publish_s=time.perf_counter() - exported)
        return {adapter: versions[adapter] for adapter in bundles}

    def sync(self, adapter_versions: dict[str, int], frozen_act: list[int], banks: dict[str, int],
             keep_frozen: bool = False) -> None:
        """Every worker serves these versions (recorded in the store as the serving set first, so a worker
        that restarts later pulls them by itself). `keep_frozen`: also keep the frozen `act` versions served
        now (evaluation, so the next iteration does not load them again). A set larger than
        `engine.max_loras` is refused (`coplay.driver.serving` keeps the loop's within it)."""
        if keep_frozen:
            served, _ = self.serving
            current = dict(served).get("act") if served else None
            frozen_act = sorted({*frozen_act, *(v for a, v in served if a == "act" and v != current
                                               and v != adapter_versions.get("act"))})
        wanted = sorted({(a, v) for a, v in adapter_versions.items()} | {("act", v) for v in frozen_act})
        if len(wanted) > self.cfg.engine.max_loras:
            raise ValueError(f"serving set of {len(wanted)} adapter versions exceeds engine.max_loras="
                             f"{self.cfg.engine.max_loras}: {wanted}")
        self.serving, self.frozen = (wanted, dict(banks)), list(frozen_act)
        ray.get(self.store.set_serving.remote(wanted, dict(banks)))
        with phase(f"sync: {len(wanted)} adapter versions and {len(banks)} banks to the workers", quiet=True):
            for i in range(len(self.workers)):
                self.sync_worker(i)

    def sync_worker(self, index: int) -> None:
        """One worker serves the serving set. A refused artifact follows `coplay.artifacts.republish`:
        counted, republished from the run-folder copy, retried; the policy raises `ArtifactError` (naming the
        artifact) after `cluster.artifact_max_failures` failures. A worker that dies meanwhile is retried
        after its restart."""
        wanted, banks = self.serving
        deaths = 0
        while True:
            try:
                report = ray.get(self.workers[index].sync.remote(wanted, banks))
            except RayActorError as exc:
                deaths += 1
                self._fault("sync_worker_died", f"worker-{index}: {type(exc).__name__}")
                if deaths > self.cfg.cluster.max_restarts:
                    raise
                wait_alive([self.workers[index]])
                continue
            self.held[index] = list(report.held)
            self.pulled = [self.pulled[0] + report.pulled_bytes, self.pulled[1] + report.pull_seconds]
            if report.resealed:  # a version lost with its owner, put anew from the run folder
                self._fault("resealed_adapters", f"worker-{index}: {report.resealed}")
            if not report.failed:
                return
            for refusal in report.failed:
                self._fault("refused_artifacts", f"worker-{index} {refusal.kind} {refusal.label}: "
                                                 f"{refusal.error[:120]}")
                self.republish.refused(refusal)
                try:
                    if refusal.kind == "adapter":
                        ray.get(self.store.republish_adapter.remote(refusal.name, refusal.version))
                    else:
                        ray.get(self.store.republish_bank.remote(refusal.name, refusal.version))
                except RayTaskError as exc:
                    clear = _artifact_error(exc)
                    if clear is not None:
                        raise clear from None
                    raise

    def acknowledgements(self, versions: dict[str, int], banks: dict[str, int]) -> dict[str, dict[str, str]]:
        """`<name>@v<n>` -> {worker: sha256 it acknowledged} for the given versions."""
        out = {}
        for adapter, version in versions.items():
            out[f"{adapter}@v{version}"] = ray.get(
                self.store.acknowledged_by.remote("adapter", adapter, version))
        for key, version in banks.items():
            out[f"bank:{key}@v{version}"] = ray.get(self.store.acknowledged_by.remote("bank", key, version))
        return out

    def banks_for(self, versions: dict[str, int]) -> dict[str, Bank]:
        """The bank objects of given versions (for rewards on the driver), cached by version."""
        out = {}
        for key, version in versions.items():
            if (key, version) not in self.bank_payloads:
                self.bank_payloads[(key, version)] = ray.get(self.store.get_bank.remote(key, version))[0]
            out[key] = Bank.from_bytes(self.bank_payloads[(key, version)], source=f"{key} v{version}")
        return out

    # ------------------------------------------------------------------ rollouts and bank
    def launch(self, iteration: int, plans: list[EpisodePlan], what: str = "rollouts") -> Rollouts:
        """Spread the plans over the workers (`coplay.driver.spread`: whole GRPO groups round robin, or
        groups split when there are fewer groups than workers, so no worker idles); their console phase
        `iteration <k>: <what>` starts now and ends when the workers are done, with their own time."""
        n = len(self.workers)
        chunks = spread_plans(plans, n)
        slots = [i for i in range(n) if chunks[i]]
        chunks = [chunks[i] for i in slots]
        refs = [self.workers[w].rollout.remote(chunk, iteration)
                for w, chunk in zip(slots, chunks, strict=True)]
        rollouts = Rollouts(iteration, chunks, slots, refs)
        rollouts.bar = begin(f"iteration {iteration}: {what}", len(plans), "episode seats", rollouts.started,
                             when_ready(refs, rollouts_time))
        return rollouts

    def gather(self, rollouts: Rollouts) -> list[RolloutResult]:
        """One result per chunk. A chunk whose worker died is re-run on the next worker (the restarted one
        when there is one worker), after syncing it; at most `cluster.max_restarts` reruns per chunk. Every
        planned (episode, seat) then appears exactly once, or `EpisodeAccountingError`. Ends the rollouts'
        phase (if it has not ended) with the workers' own time, and when they were collected."""
        results: list[RolloutResult | None] = [None] * len(rollouts.chunks)
        reruns = [0] * len(rollouts.chunks)
        refs = list(rollouts.refs)
        pending = set(range(len(refs)))
        try:
            while pending:
                self._gather_one(rollouts, results, reruns, refs, pending, rollouts.bar)
        except BaseException:
            rollouts.bar.close()
            raise
        done = [r for r in results if r is not None]
        own, steps = rollouts_time(done)
        collected = time.perf_counter() - rollouts.started
        late = f", collected {collected:.1f} s after launch" if collected > own + 1 else ""
        rollouts.bar.end(own, steps + late)
        check_exactly_once([p.episode_id for c in rollouts.chunks for p in c], done, rollouts.iteration)
        return done

    def _show_progress(self, rollouts: Rollouts, results: list[RolloutResult | None], pending: set[int],
                       bar: Phase) -> None:
        """Move the bar to the episodes finished so far: whole finished chunks plus what the running ones
        report (`RolloutWorker.progress`); the steps played go in its note. A worker that does not answer
        in time (busy, restarting) is counted at what it last finished, i.e. not at all."""
        episodes = sum(len(rollouts.chunks[i]) for i, r in enumerate(results) if r is not None)
        steps = sum(int(r.counters.get("steps", 0)) for r in results if r is not None)
        asks = [self.workers[rollouts.workers[i]].progress.remote(rollouts.chunks[i][0].episode_id)
                for i in pending if rollouts.chunks[i]]
        ready, _ = ray.wait(asks, num_returns=len(asks), timeout=PROGRESS_POLL_S) if asks else ([], [])
        for ref in ready:
            try:
                done, played = ray.get(ref)
            except RayActorError:  # the chunk's own ref reports the death; the bar just does not move
                continue
            episodes, steps = episodes + done, steps + played
        bar.note = f"{steps} steps"
        bar.advance(episodes - bar.done)

    def _gather_one(self, rollouts: Rollouts, results: list[RolloutResult | None], reruns: list[int],
                    refs: list[Any], pending: set[int], bar: Phase) -> None:
        """Wait for the next chunk; a chunk whose worker died is started again (see `gather`)."""
        if pending:
            ready, _ = ray.wait([refs[i] for i in sorted(pending)], num_returns=1, timeout=PROGRESS_POLL_S)
            if not ready:
                self._show_progress(rollouts, results, pending, bar)
                return
            i = next(j for j in pending if refs[j] == ready[0])
            try:
                results[i] = ray.get(ready[0])
                pending.discard(i)
                self._show_progress(rollouts, results, pending, bar)
            except (RayActorError, RayTaskError) as exc:
                if not actor_died(exc) or reruns[i] >= self.cfg.cluster.max_restarts:
                    raise
                reruns[i] += 1
                worker = (rollouts.workers[i] + reruns[i]) % len(self.workers)
                episodes = [p.episode_id for p in rollouts.chunks[i]]
                self._fault("rollout_reruns",
                            f"it{rollouts.iteration} chunk {i}: worker-{rollouts.workers[i]} "
                            f"died; {len(episodes)} episodes re-run on worker-{worker}")
                wait_alive([self.workers[worker]])
                self.sync_worker(worker)
                rollouts.workers[i] = worker
                refs[i] = self.workers[worker].rollout.remote(rollouts.chunks[i], rollouts.iteration,
                                                              reruns[i])

    def collect(self, rollouts: Rollouts,
                bank_versions: dict[str, int]) -> tuple[IterationData, CollectStats]:
        """Wait for the rollouts (re-running dead workers' chunks); write one shard per chunk to the run
        folder; decode them. `bank_versions`: the banks these rollouts played with."""
        results = self.gather(rollouts)
        trajectories: list[Trajectory] = []
        for i, result in enumerate(results):
            path = self.run.shard_path(rollouts.iteration, i)
            path.write_bytes(result.shard)
            trajectories += decode_shard(result.shard, str(path)).trajectories
        data = IterationData(rollouts.iteration, trajectories, [r.shard for r in results],
                             dict(bank_versions))
        stats = CollectStats.of(results, time.perf_counter() - rollouts.started)
        frozen = {engine_name("act", v) for v in self.frozen}
        stats.adapters_held = max((len(h) for h in self.held.values()), default=0)
        stats.frozen_held = max((len(frozen.intersection(h)) for h in self.held.values()), default=0)
        # adapter bytes and seconds the workers pulled since the previous line (syncs of the probe and the
        # evaluation after a learner step count in the next iteration's line)
        (stats.pulled_bytes, stats.pull_s), self.pulled = self.pulled, [0, 0.0]
        return data, stats

    def bank_update(self, data: IterationData, versions: dict[str, int], base: dict[str, int]) -> BankJob:
        """Queue the shards of one iteration and start the bank update over it (building on bank versions
        `base`, with the bank adapters at `versions`); it runs while the next rollouts play. `bank_result`
        waits for it."""
        names = {a: f"{a}@v{versions[a]}" for a in BANK_ADAPTERS}
        candidates = (induction_candidates(self.run.root, data.iteration) if self.cfg.curriculum.induces
                      else {})
        job = BankJob(data.iteration, data.shards, names, dict(base), candidates)
        started = time.perf_counter()
        try:
            self._start_bank(job)
        except (RayActorError, RayTaskError) as exc:  # died while taking the shards: `bank_result` reruns it
            if not actor_died(exc):
                raise
            self._bank_failed(job, exc)
        # its phase ends when the actor is done, with the actor's own time (`BankUpdate.seconds`)
        job.bar = begin(f"bank update over iteration {job.iteration}", started=started,
                        poll=when_ready([job.ref], lambda r: (r[0].seconds, "")) if job.ref else None)
        return job

    def _start_bank(self, job: BankJob) -> None:
        if job.attempts:
            ray.get(self.bank.clear_queue.remote())
        for shard in job.shards:
            ray.get(self.bank.submit.remote(job.iteration, shard))
        job.ref = self.bank.update.remote(job.iteration, job.names, job.base, job.candidates)

    def bank_result(self, job: BankJob | None) -> BankUpdate:
        """The update's result; an update that died (the bank actor, or a worker it called) is rerun from its
        shards on the same base versions, at most `cluster.max_restarts` times."""
        if job is None:
            return BankUpdate()
        try:
            bank = self._bank_wait(job)
        except BaseException:
            job.bar.close()
            raise
        collected = time.perf_counter() - job.bar.started
        job.bar.end(bank.seconds, f"collected {collected:.1f} s after its start"
                    if collected > bank.seconds + 1 else "")
        return bank

    def _bank_wait(self, job: BankJob) -> BankUpdate:
        while True:
            try:
                if job.ref is None:
                    wait_alive([self.bank, *self.workers])
                    self._start_bank(job)
                return ray.get(job.ref)
            except (RayActorError, RayTaskError) as exc:
                if not actor_died(exc) or job.attempts >= self.cfg.cluster.max_restarts:
                    raise
                self._bank_failed(job, exc)

    def _bank_failed(self, job: BankJob, exc: BaseException) -> None:
        """Count a bank update that died (while taking its shards or while running) for a rerun."""
        job.attempts += 1
        job.ref = None
        self._fault("bank_reruns",
                    f"bank update over it{job.iteration}: {type(exc).__name__}; rerun {job.attempts}")

    def restore_artifacts(self, ledger: VersionLedger, banks: BankSchedule) -> None:
        """Adopt every adapter version the ledger names and every bank version the bank schedule names from
        the run folder into the (fresh) store (`coplay train --resume`), each checked against its manifest.
        Versions the stopped run published after its checkpoint are removed first: the resumed run makes
        them again (the same bytes with staleness 0), and a version is never overwritten."""
        adapters = sorted({(a, v) for versions in ledger.steps.values() for a, v in versions.items()})
        bank_versions = sorted({(key, v) for versions in banks.built.values() for key, v in versions.items()})
        self._remove_versions_after(dict(adapters), dict(bank_versions))
        ray.get([self.store.restore_adapter.remote(a, v) for a, v in adapters])
        ray.get([self.store.restore_bank.remote(key, v) for key, v in bank_versions])

    def _remove_versions_after(self, adapters: dict[str, int], banks: dict[str, int]) -> None:
        """Delete adapter and bank versions newer than the newest the checkpoint names (as faults)."""
        import shutil

        from coplay.artifacts.manifest import bank_manifest_path

        for folder in sorted(self.run.root.glob("adapters/*/v*")):
            name, version = folder.parent.name, folder.name[1:]
            if folder.is_dir() and version.isdigit() and int(version) > adapters.get(name, 0):
                shutil.rmtree(folder)
                self._fault("versions_after_checkpoint_removed", f"{name}@v{version}")
        root = self.run.root / "banks"
        for path in sorted(root.rglob("v*.json")) if root.is_dir() else []:
            key, version = path.parent.relative_to(root).as_posix(), path.stem[1:]
            if version.isdigit() and int(version) > banks.get(key, 0):
                bank_manifest_path(path).unlink(missing_ok=True)
                path.unlink()
                self._fault("versions_after_checkpoint_removed", f"bank:{key}@v{version}")

    def seed_banks(self, trajectories: list[Trajectory]) -> dict[str, int]:
        return ray.get(self.bank.seed_banks.remote(trajectories, 0))

    def publish_banks(self, banks: dict[str, Bank]) -> dict[str, int]:
        """Publish given banks as the run's (`ablation.variant=sft_final_bank`: a finished run's, frozen)."""
        ray.get([self.store.publish_bank.remote(key, bank.version, bank.to_bytes(), bank.iteration)
                 for key, bank in banks.items()])
        return {key: bank.version for key, bank in banks.items()}

    def bank_teacher_examples(self, limit_per_adapter: int = 64) -> list[Any]:
        from coplay.learn.teacher import ChatExample

        examples = ray.get(self.bank.teacher_examples.remote(limit_per_adapter))
        return [ChatExample(adapter, messages, answer) for adapter, messages, answer in examples]

    # ------------------------------------------------------------------ learning
    def train(self, samples: list[Sample], advantages: dict[str, float]) -> TrainStep:
        """One learner step, then the adapters it changed are published as their new versions."""
        started = time.perf_counter()
        step = self.learner.train_step(samples, advantages)
        step.published = (self.publish_adapters(sorted(step.adapters), step.learner_step, step.timings)
                          if step.adapters else {})
        step.seconds = time.perf_counter() - started
        if step.published:
            measured = time.perf_counter()
            step.served_change = self.learner.measure_update(
                sorted(step.published), kl_prompts(self.probe_prompts, samples, self.cfg.probe.kl_prompts),
                self.cfg.probe.kl_prompts)
            step.measure_seconds = time.perf_counter() - measured
        step.timings["measure_s"] = step.measure_seconds
        return step


def kl_prompts(probe: list[Sample], batch: list[Sample], limit: int) -> dict[str, list[Sample]]:
    """Per adapter, the prompts on which a step's served-policy KL is measured (`coplay.learn.update_size`):
    the probe's samples of that adapter when there are any (the same positions every step), else the step's
    own samples; the first `limit` of each, by sample id (deterministic)."""
    out: dict[str, list[Sample]] = {}
    for source in (batch, probe):  # probe second: it replaces the batch's where it has the adapter
        by_adapter: dict[str, list[Sample]] = {}
        for s in sorted(source, key=lambda s: s.sample_id):
            by_adapter.setdefault(s.adapter, []).append(s)
        out.update({a: v[:limit] for a, v in by_adapter.items()})
    return out if limit > 0 else {}
