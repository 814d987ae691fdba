"""The SkillBankActor: consumes trajectory shards from a bounded queue, updates the bank of every bank key
they touch (segment -> contract -> curator, through the rollout workers' engines), and publishes each new
bank version to the ArtifactStore (docs/architecture.md). The bank logic is
`coplay.skills.update.update_bank`.

Restart-safe: every update names the bank versions it builds on and reads them from the ArtifactStore (the
same bytes the workers serve), so a restarted actor, or a fresh one after `coplay train --resume`, continues
from exactly the published banks; an update publishes nothing until every bank key is done, so the driver
can rerun a failed update (`clear_queue`, resubmit the shards, `update` again).

Test hook: `testing_delay_next_update(seconds)` makes the next `update` sleep first, so a kill test can land
inside an update however fast the update itself is. Nothing in a run calls it.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from typing import Any

import ray

from coplay.actors.connect import named_actor
from coplay.config import CoplayConfig
from coplay.skills.caller import FunctionCaller
from coplay.skills.concurrent_calls import ConcurrentCaller
from coplay.skills.schema import TEACHING_POLICIES, Bank, bank_key_for
from coplay.skills.teacher import dedupe, seed_bank
from coplay.skills.update import held_out_part, update_bank
from coplay.types import BankUpdate, Sample, Trajectory, decode_shard


class QueueFull(RuntimeError):
    """The bounded shard queue is full: the driver must wait for an update before submitting more."""


class WorkerBackend:
    """`coplay.skills.concurrent_calls.Backend` over the rollout workers: one submit's prompts are split in
    contiguous slices over every worker (each slice one `complete` call, all in flight at once, with each
    prompt's own seed), and gathered in prompt order when a round waits for them. Which worker answers
    which slice only spreads the load: the seeds come with the prompts."""

    def __init__(self, owner: SkillBankImpl, engine_names: dict[str, str | None], temperature: float) -> None:
        self.owner = owner
        self.engine_names = engine_names
        self.temperature = temperature

    def submit(self, adapter: str, prompts: list[Any], seeds: list[int], n: int, max_tokens: int,
               regex: str | None) -> list[Any]:
        workers = self.owner.workers
        parts = min(len(workers), len(prompts))
        refs, start = [], 0
        for k in range(parts):
            stop = start + len(prompts) // parts + (1 if k < len(prompts) % parts else 0)
            worker = workers[(self.owner.next_worker + k) % len(workers)]
            refs.append(worker.complete.remote(self.engine_names.get(adapter), prompts[start:stop], n,
                                               max_tokens, self.temperature, seeds[start:stop], regex))
            start = stop
        self.owner.next_worker += 1
        return refs

    def wait(self, handle: list[Any]) -> list[list[Any]]:
        groups = [group for part in ray.get(handle) for group in part]
        self.owner.prompts_trimmed += sum(1 for group in groups if group and group[0].prompt_cut_tokens)
        return groups

    def ready(self, handle: list[Any]) -> bool:
        done, _ = ray.wait(handle, num_returns=len(handle), timeout=0)
        return len(done) == len(handle)


class SkillBankImpl:
    """The actor's logic; `SkillBankActor` is this class as a Ray actor."""

    def __init__(self, cfg: dict[str, Any], store: Any, workers: list[str]) -> None:
        """`store`: the ArtifactStore's handle or name; `workers`: the rollout workers' names, looked up
        when first called (`coplay.actors.connect.named_actor` says why a run passes names)."""
        self.cfg = CoplayConfig.model_validate(cfg)
        self.store = named_actor(store)
        self.worker_names = list(workers)
        self._workers: list[Any] | None = None
        self.banks: dict[str, Bank] = {}
        self.queue: deque[tuple[int, bytes]] = deque()
        self.reports: list[dict[str, Any]] = []
        self.teacher: list[tuple[str, list[dict[str, str]], str]] = []
        self.delay_next_update_s = 0.0
        self.prompts_trimmed = 0  # bank prompts of the current key cut to fit engine.max_model_len
        self.answers: OrderedDict[str, list[Any]] = OrderedDict()  # the concurrent calls' answer cache
        # per bank key, the trajectories the last `heldout_window - 1` updates held out (the next updates'
        # measure); in memory only: a restarted actor or a resumed run starts the window over
        self.held_out: dict[str, deque[list[Trajectory]]] = {}
        self.next_worker = 0  # where the concurrent backend's next call starts (spreads the load only)

    def submit(self, iteration: int, shard: bytes) -> int:
        """Queue one shard (msgpack bytes); raises `QueueFull` past `skill_bank.queue_size`."""
        if len(self.queue) >= self.cfg.skill_bank.queue_size:
            raise QueueFull(f"skill-bank queue holds {len(self.queue)} shards (queue_size "
                            f"{self.cfg.skill_bank.queue_size}); wait for update() before submitting more")
        self.queue.append((iteration, shard))
        return len(self.queue)

    def clear_queue(self) -> int:
        """Drop every queued shard (before the driver resubmits the shards of a failed update)."""
        dropped = len(self.queue)
        self.queue.clear()
        return dropped

    def _base_bank(self, key: str, base_versions: dict[str, int] | None) -> Bank:
        """The bank this update builds on: the published version named by the driver (read from the store),
        else what this actor holds, else an empty bank."""
        version = (base_versions or {}).get(key)
        if version is None:
            return self.banks.get(key) or Bank(bank_key=key)
        data, _ = ray.get(self.store.get_bank.remote(key, version))
        return Bank.from_bytes(data, source=f"{key} v{version}")

    @property
    def workers(self) -> list[Any]:
        """The rollout workers' handles (by name, in this job's namespace), looked up once."""
        if self._workers is None:
            self._workers = [named_actor(name) for name in self.worker_names]
        return self._workers

    def _caller(self, engine_names: dict[str, str | None],
                iteration: int) -> FunctionCaller | ConcurrentCaller:
        """The update's model caller: `skill_bank.calls.concurrent` (futures over every worker, content
        seeds, this actor's answer cache, `coplay.skills.concurrent_calls`), else the old path below."""
        calls = self.cfg.skill_bank.calls
        if calls.concurrent:
            backend = WorkerBackend(self, engine_names, self.cfg.sampling.temperature)
            return ConcurrentCaller(backend, engine_names, self.cfg.seeds.run, cache=self.answers,
                                    cache_size=calls.cache_size, chunk_prompts=calls.chunk_prompts)
        return self._sequential_caller(engine_names, iteration)

    def _sequential_caller(self, engine_names: dict[str, str | None], iteration: int) -> FunctionCaller:
        """The old path (`calls.concurrent: false`): one blocking call per round to one worker after
        another (round robin), seeds by call order."""
        worker_count = len(self.workers)
        temperature = self.cfg.sampling.temperature
        calls = {"n": 0}

        def generate(adapter: str, prompts: list[Any], n: int, max_tokens: int,
                     regex: str | None = None) -> list[list[Any]]:
            worker = self.workers[calls["n"] % worker_count]
            seed = self.cfg.seeds.run * 1_000_003 + iteration * 10_007 + calls["n"]
            calls["n"] += 1
            groups = ray.get(worker.complete.remote(engine_names.get(adapter), prompts, n, max_tokens,
                                                    temperature, seed, regex))
            self.prompts_trimmed += sum(1 for group in groups if group and group[0].prompt_cut_tokens)
            return groups

        return FunctionCaller(generate, pass_max_tokens=True, pass_regex=True)

    def update(self, iteration: int, engine_names: dict[str, str | None],
               base_versions: dict[str, int] | None = None,
               candidates: dict[str, list[dict[str, Any]]] | None = None) -> BankUpdate:
        """Drain the queue: one bank update per bank key found in the queued shards (building on
        `base_versions`, read from the store), all published as their next versions once every key is done.
        `candidates`: per bank key, the curriculum's exploration-stream tasks to propose as `induce`.
        Returns {bank_key: version}, the bank adapters' Samples (rewards set), reports and the
        seconds the update took."""
        started = time.perf_counter()
        if self.delay_next_update_s:
            time.sleep(self.delay_next_update_s)
            self.delay_next_update_s = 0.0
        by_key: dict[str, list[Trajectory]] = {}
        skipped = 0
        while self.queue:
            _, data = self.queue.popleft()
            for traj in decode_shard(data, f"iteration {iteration} shard").trajectories:
                if traj.policy not in TEACHING_POLICIES:  # opponents do not teach the bank
                    skipped += 1
                    continue
                by_key.setdefault(bank_key_for(traj.game, traj.seat, traj.role), []).append(traj)
        use_model = self.cfg.skill_bank.use_model and bool(self.worker_names)
        caller = self._caller(engine_names, iteration) if use_model else None
        new_banks: dict[str, Bank] = {}
        samples: list[Sample] = []
        reports = []
        for key in sorted(by_key):
            bank = self._base_bank(key, base_versions)
            self.prompts_trimmed = 0
            window = self.held_out.setdefault(key, deque(maxlen=self.cfg.skill_bank.heldout_window - 1))
            new_bank, new_samples, report = update_bank(bank, by_key[key], caller, self.cfg.skill_bank,
                                                        iteration, max_tokens=self.cfg.sampling.max_tokens,
                                                        candidates=(candidates or {}).get(key, ()),
                                                        heldout_pool=[t for held in window for t in held])
            window.append(held_out_part(by_key[key], self.cfg.skill_bank.heldout_every))
            new_banks[key] = new_bank
            samples += new_samples
            reports.append({**report, "skipped_trajectories": skipped,
                            "prompts_trimmed": self.prompts_trimmed})
        versions: dict[str, int] = {}
        for key, new_bank in new_banks.items():
            ray.get(self.store.publish_bank.remote(key, new_bank.version, new_bank.to_bytes(), iteration))
            self.banks[key] = new_bank
            versions[key] = new_bank.version
        self.reports += reports
        return BankUpdate(versions, samples, reports, time.perf_counter() - started,
                          caller.usage_json() if caller is not None else {})

    def seed_banks(self, trajectories: list[Trajectory], iteration: int = 0) -> dict[str, int]:
        """Build the initial banks deterministically from teacher trajectories (the expert bots'):
        `coplay.skills.teacher.seed_bank` per bank key (`SEED_UPDATES` updates, then a labelling pass, with
        the deterministic policy answering), which also records the bank adapters' teacher examples for the
        cold-start SFT."""
        by_key: dict[str, list[Trajectory]] = {}
        for traj in trajectories:
            by_key.setdefault(bank_key_for(traj.game, traj.seat, traj.role), []).append(traj)
        versions = {}
        for key in sorted(by_key):
            bank, examples = seed_bank(self.banks.get(key) or Bank(bank_key=key), by_key[key],
                                       self.cfg.skill_bank, iteration, self.cfg.sft.bank_example_groups)
            self.teacher += examples
            ray.get(self.store.publish_bank.remote(key, bank.version, bank.to_bytes(), iteration))
            self.banks[key] = bank
            versions[key] = bank.version
        return versions

    def teacher_examples(self, limit_per_adapter: int) -> list[tuple[str, list[dict[str, str]], str]]:
        """(adapter, prompt, answer) examples for `segment`, `contract`, `curator` from `seed_banks`."""
        return dedupe(self.teacher, limit_per_adapter)

    def testing_delay_next_update(self, seconds: float) -> None:
        """TEST HOOK: the next `update` sleeps `seconds` before it starts (see the module docstring)."""
        self.delay_next_update_s = float(seconds)

    def ping(self) -> str:
        return "bank"

    def versions(self) -> dict[str, int]:
        return {k: b.version for k, b in self.banks.items()}


SkillBankActor = ray.remote(SkillBankImpl)
