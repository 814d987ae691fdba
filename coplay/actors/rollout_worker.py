"""The RolloutWorker actor: one engine (vLLM by default) with LoRA slots, the episode runners, and the
model calls of the skill bank's adapters (docs/architecture.md).

It pulls adapter and bank versions from the ArtifactStore by version, verifies them (the engine checks
adapter checksums; banks are checked here), acknowledges the checksum it loaded, and keeps serving the
previous version when a new one is refused. A worker remembers nothing across a restart: its constructor
pulls the store's serving set (the versions the driver last asked every worker to serve), so a restarted or
newly added worker serves the current versions by itself. Threaded (`max_concurrency`), so the skill bank's
`complete` calls share the engine with a running `rollout`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import ray

from coplay.actors.adapter_pull import pull_adapter
from coplay.actors.connect import actor_restarted, named_actor
from coplay.agent.bank_view import BankSkills
from coplay.artifacts import ArtifactError, Refusal, SyncReport
from coplay.artifacts.serving import adapters_to_load, adapters_to_retire, check_bank_delivery
from coplay.config import CoplayConfig
from coplay.driver.progress import quiet_third_party
from coplay.engines.base import AdapterRejected, GenerationRequest, SamplingParams, engine_name
from coplay.rollout.env_hosts import EnvHosts
from coplay.rollout.model_episodes import EpisodePlan, RunnerContext, play_episodes
from coplay.skills.caller import Completion as BankCompletion
from coplay.skills.schema import Bank, BankError, bank_key_for
from coplay.types import RolloutResult, Shard, encode_shard


class RolloutWorkerImpl:
    """The worker's logic; `RolloutWorker` is this class as a Ray actor."""

    def __init__(self, worker_id: int, cfg: dict[str, Any], store: Any) -> None:
        """`store`: the ArtifactStore's handle or name (a run passes its name, `named_actor`)."""
        started = time.perf_counter()
        import coplay_envs
        from coplay.engines.factory import make_engine

        self.worker_id = worker_id
        self.name = f"worker-{worker_id}"
        self.cfg = CoplayConfig.model_validate(cfg)
        # third-party log levels and warning filters in this process too, before vLLM is imported: its
        # environment is Ray's, which may have started before the run set them (tests, a joined cluster)
        quiet_third_party(self.cfg.logging.verbose)
        self.store = named_actor(store)
        self.engine = make_engine(self.cfg.model, self.cfg.engine, seed=self.cfg.seeds.run + worker_id)
        self.rules = coplay_envs.rules
        self.banks: dict[str, Bank] = {}
        self.bank_versions: dict[str, int] = {}
        self.live: dict[str, tuple[int, int]] = {}  # running chunk (first episode id) -> (episodes, steps)
        # single-player envs in child processes, kept across rollout calls (`rollout.env_processes`)
        self.env_hosts = EnvHosts(self.cfg.rollout.env_processes) if self.cfg.rollout.env_processes else None
        self.restarted = actor_restarted()
        adapters, banks = ray.get(self.store.serving.remote())
        self.startup_sync = self.sync(adapters, banks) if adapters or banks else SyncReport()
        self.startup_s = time.perf_counter() - started  # the engine's start, mostly (the phase timeline)

    def startup_seconds(self) -> float:
        """How long this worker's start took (engine built, serving set pulled)."""
        return self.startup_s

    def sync(self, adapters: list[tuple[str, int]], banks: dict[str, int]) -> SyncReport:
        """Serve exactly `adapters` (engine names `<a>@v<n>`) plus what is loaded and still needed
        (`coplay.artifacts.serving`), and the given bank versions. Returns what was loaded and refused."""
        report = SyncReport()
        for adapter, version in adapters_to_load(adapters, self.engine.loaded_adapters()):
            try:  # by ObjectRef: one copy per node, not one serialization per worker (adapter_pull.py)
                bundle, record, pulled = pull_adapter(self.store, adapter, version)
            except ArtifactError as exc:
                report.failed.append(Refusal("adapter", adapter, version, str(exc)))
                continue
            report.pulled_bytes += pulled.nbytes
            report.pull_seconds += pulled.seconds
            report.resealed += pulled.resealed
            try:
                sha = self.engine.load_adapter(adapter, version, bundle.files, record.sha256)
            except AdapterRejected as exc:
                report.failed.append(Refusal("adapter", adapter, version, str(exc)))
                continue
            ray.get(self.store.acknowledge.remote(self.name, "adapter", adapter, version, sha))
            report.loaded.append(engine_name(adapter, version))
        for label in adapters_to_retire(self.engine.loaded_adapters(), adapters, report.failed):
            self.engine.retire_adapter(label)
        for key, version in banks.items():
            if self.bank_versions.get(key) == version:
                continue
            data, record = ray.get(self.store.get_bank.remote(key, version))
            try:
                check_bank_delivery(data, record)
                self.banks[key] = Bank.from_bytes(data, source=f"{key} v{version}")
            except (ArtifactError, BankError) as exc:
                report.failed.append(Refusal("bank", key, version, str(exc)))
                continue
            self.bank_versions[key] = version
            ray.get(self.store.acknowledge.remote(self.name, "bank", key, version, record.sha256))
            report.loaded.append(f"bank:{key}@v{version}")
        report.held = self.engine.loaded_adapters()
        return report

    def _skills_for(self, game: str, role: str) -> BankSkills | None:
        bank = self.banks.get(bank_key_for(game, role=role))
        return BankSkills(bank) if bank is not None and bank.skills else None

    def rollout(self, plans: list[EpisodePlan], iteration: int, index: int = 0) -> RolloutResult:
        """Play the plans; returns the shard (msgpack bytes) and counters."""
        ctx = RunnerContext(engine=self.engine, rules=self.rules, skills_for=self._skills_for,
                            run_seed=self.cfg.seeds.run, env_threads=self.cfg.rollout.env_threads,
                            env_hosts=self.env_hosts)
        key = plans[0].episode_id if plans else ""
        self.live[key] = (0, 0)

        def finished(n: int) -> None:
            self.live[key] = (self.live[key][0] + n, int(ctx.counters.get("steps", 0)))

        started = time.perf_counter()
        try:
            concurrency = self.cfg.rollout.concurrent_episodes
            trajectories = asyncio.run(play_episodes(ctx, plans, concurrency, finished))
        finally:
            self.live.pop(key, None)
        seconds = time.perf_counter() - started
        shard = Shard(shard_id=f"it{iteration}-w{self.worker_id}-{index}", iteration=iteration,
                      worker=self.worker_id, trajectories=trajectories)
        tokens = sum(len(s.completion_ids) for t in trajectories for s in t.samples)
        return RolloutResult(encode_shard(shard), sorted({t.episode_id for t in trajectories}), seconds,
                             tokens, dict(ctx.counters))

    def complete(self, adapter: str | None, prompts: list[list[dict[str, str]]], n: int, max_tokens: int,
                 temperature: float, seed: int | list[int],
                 regex: str | None = None) -> list[list[BankCompletion]]:
        """Sample n completions per chat prompt with `adapter` (engine name or None), under `regex` when
        given: the skill bank's calls. Sample j of prompt i uses seed `seed + 1000 i + j`, or `seed[i] + j`
        when `seed` is a list (one per prompt: the bank's concurrent calls derive it from the prompt's
        content, so a prompt samples the same however the calls are split over workers)."""
        if isinstance(seed, list) and len(seed) != len(prompts):
            raise ValueError(f"complete: {len(seed)} seeds for {len(prompts)} prompts")
        from coplay.agent.prompts import PromptTooLong, encode, fit_messages
        from coplay.engines.base import parse_engine_name

        version = parse_engine_name(adapter)[1] if adapter else 0
        sampling = SamplingParams(temperature=temperature, max_tokens=max_tokens)
        requests, cuts = [], []
        for i, messages in enumerate(prompts):
            # too long: the system turn (task, answer format) stays whole, the user turn's middle is cut
            budget = self.cfg.engine.max_model_len - max_tokens
            try:
                _, ids, cut = fit_messages(self.engine.tokenizer, messages, budget)
            except PromptTooLong:  # the system turn alone is too long: its tail, counted like any cut
                full = encode(self.engine.tokenizer, messages)
                ids, cut = full[-budget:], len(full) - budget
            cuts.append(cut)
            base = seed[i] if isinstance(seed, list) else seed + 1000 * i
            requests += [GenerationRequest(ids, adapter, sampling, seed=base + j, regex=regex)
                         for j in range(n)]
        outs = self.engine.generate(requests)
        groups = []
        for i in range(len(prompts)):
            group = []
            for req, out in zip(requests[i * n:(i + 1) * n], outs[i * n:(i + 1) * n], strict=True):
                group.append(BankCompletion(text=out.text, prompt_ids=list(req.prompt_ids),
                                            completion_ids=list(out.token_ids), logprobs=list(out.logprobs),
                                            adapter_version=version, temperature=temperature,
                                            finish_reason=out.finish_reason, prompt_cut_tokens=cuts[i]))
            groups.append(group)
        return groups

    def loaded(self) -> dict[str, Any]:
        return {"adapters": self.engine.loaded_adapters(), "banks": dict(self.bank_versions),
                "restarted": self.restarted, "startup_sync": self.startup_sync}

    def progress(self, first_episode: str) -> tuple[int, int]:
        """(episodes finished, their steps) of the running chunk that starts with `first_episode`; (0, 0)
        once it has ended or before it starts. Answered while `rollout` runs (a threaded actor)."""
        return self.live.get(first_episode, (0, 0))

    def ping(self) -> str:
        return self.name

    def storage_probe(self, run_root: str, token: str) -> Any:
        """Write this worker's probe file into the run folder (`coplay.actors.storage_probe`)."""
        from coplay.actors.storage_probe import write_probe

        return write_probe(run_root, f"rollout worker {self.worker_id}", token)


RolloutWorker = ray.remote(RolloutWorkerImpl)
