"""The bank's concurrent model calls (`skill_bank.calls`, coplay/skills/concurrent_calls.py, issue 35 item 3):
the same bank as the old sequential path on the same shards, answers independent of how calls are split and
in which order they complete, and prompts already answered never sent again.

The "model" is a pure function of what it is asked (a content model: a ranking, verdict or protocol picked by
a hash of the prompt), so the old path (seeds by call order) and the new (seeds by content) must give the
same bank; a seeded model (answers picked by the seed) checks that the new path's seeds depend on nothing
but the prompt. In-process backends stand in for the rollout workers (the SkillBankActor's is
`WorkerBackend`, the same submit / wait / ready over ray futures)."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import random
import re
from typing import Any

import pytest

from coplay.config import SkillBankConfig
from coplay.rollout.bot_episodes import play_bot_episodes
from coplay.skills import Bank, FunctionCaller, update_bank
from coplay.skills.concurrent_calls import ConcurrentCaller
from coplay.types import Trajectory

ENGINES = {"segment": "segment@v3", "contract": "contract@v2", "curator": "curator@v5"}
CALLER_KEYS = ("calls",)  # report keys that are about the caller, not the bank


def _pick(text: str, salt: int = 0) -> int:
    return int(hashlib.sha256(f"{salt}/{text}".encode()).hexdigest()[:8], 16)


def answer(adapter: str, prompt: list[dict[str, str]], j: int, seed: int | None) -> str:
    """A plausible answer chosen by a hash of the prompt (and of the seed, when given, else of j)."""
    text = json.dumps(prompt)
    h = _pick(text, seed if seed is not None else j)
    if adapter == "segment":
        match = re.search(r"Rank these ids: (.+)$", prompt[-1]["content"], re.MULTILINE)
        ids = [i.strip() for i in match.group(1).split(",")]
        random.Random(h).shuffle(ids)
        return "RANK: " + " > ".join(ids)
    if adapter == "curator":
        return ["VERDICT: APPROVE", "VERDICT: REJECT", "maybe"][h % 3]
    effects = re.search(r"Effects seen \(share of instances\): (.*)$", prompt[-1]["content"], re.MULTILINE)
    literals = [item.rsplit(" ", 1)[0] for item in effects.group(1).split(", ")] if effects else []
    if h % 4 == 3:
        return "EFFECTS: " + ", ".join(literals[:1]) + "\n{not json"
    protocol = {"summary": f"s{h % 97}", "plan": ["a", "b"], "preconditions": "true", "success": "false",
                "abort": "false"}
    return "EFFECTS: " + ", ".join(literals[:1 + h % 2]) + "\n" + json.dumps(protocol)


class Workers:
    """A `Backend` of `workers` fake rollout workers: a submit is split in contiguous slices; answers are
    computed when waited for, slices in a shuffled order (completion order must not matter)."""

    def __init__(self, workers: int = 2, seeded: bool = False, shuffle_seed: int = 0) -> None:
        self.workers, self.seeded = workers, seeded
        self.rng = random.Random(shuffle_seed)
        self.sent: list[tuple[str, list[Any]]] = []  # (adapter, prompts) per submit, in order
        self.waits = 0
        self.log: list[str] = []  # "submit <adapter>" / "wait" in order

    def submit(self, adapter: str, prompts: list[Any], seeds: list[int], n: int, max_tokens: int,
               regex: str | None) -> list[tuple[str, list[Any], list[int], int]]:
        self.sent.append((adapter, list(prompts)))
        self.log.append(f"submit {adapter}")
        parts = min(self.workers, len(prompts))
        size = -(-len(prompts) // parts)
        return [(adapter, prompts[i:i + size], seeds[i:i + size], n) for i in range(0, len(prompts), size)]

    def wait(self, handle: list[tuple[str, list[Any], list[int], int]]) -> list[list[str]]:
        self.waits += 1
        self.log.append("wait")
        done: dict[int, list[list[str]]] = {}
        for k in self.rng.sample(range(len(handle)), len(handle)):
            adapter, prompts, seeds, n = handle[k]
            done[k] = [[answer(adapter, p, j, s + j if self.seeded else None) for j in range(n)]
                       for p, s in zip(prompts, seeds, strict=True)]
        return [group for k in range(len(handle)) for group in done[k]]

    def ready(self, handle: Any) -> bool:
        return True

    def prompts(self, adapter: str | None = None) -> int:
        return sum(len(p) for a, p in self.sent if adapter in (None, a))


def old_caller() -> FunctionCaller:
    """The old path's caller: one call per round, answers from the content model (seeds by call order are
    what the actor passed; the content model does not read them)."""
    def generate(adapter: str, prompts: list[Any], n: int, max_tokens: int,
                 regex: str | None = None) -> list[list[str]]:
        return [[answer(adapter, p, j, None) for j in range(n)] for p in prompts]
    return FunctionCaller(generate, pass_max_tokens=True, pass_regex=True)


def new_caller(backend: Workers, cache: Any = None, **kw: Any) -> ConcurrentCaller:
    return ConcurrentCaller(backend, ENGINES, run_seed=7, cache=cache, **kw)


@pytest.fixture(scope="module")
def shards() -> tuple[Bank, list[Trajectory], list[Trajectory]]:
    """A deterministic seed bank from expert 2048 play and two fresh shards (the second with a duplicated
    trajectory: identical segments under another episode id)."""
    cfg = config()
    expert = play_bot_episodes("2048", "expert", list(range(8)), max_steps=40)
    seeded, _, _ = update_bank(Bank("2048"), expert, None, cfg, iteration=0)
    fresh = play_bot_episodes("2048", "expert", list(range(8, 16)), max_steps=40)
    twin = dataclasses.replace(copy.deepcopy(fresh[6]), episode_id=fresh[6].episode_id + "-twin")  # in train
    return seeded, fresh, fresh + [twin]


def config(**calls: Any) -> SkillBankConfig:
    return SkillBankConfig(group_size=2, constrained_contracts=True, calls=calls,
                           segmentation={"max_prompts": 8}, maintenance={"min_instances": 2})


def bank_json(bank: Bank) -> str:
    return json.dumps(bank.to_json(), sort_keys=True)


def bank_outcome(bank: Bank, samples: list, report: dict[str, Any]) -> tuple[Any, ...]:
    """What must not change: the bank (skills, contracts, protocols, stats, operations, metrics), the report
    without the caller's own counts, and the samples (text, group, reward)."""
    return (bank_json(bank), json.dumps({k: v for k, v in report.items() if k not in CALLER_KEYS},
                                        sort_keys=True, default=str),
            [(s.adapter, s.group_id, s.sample_id, s.completion_text, s.reward) for s in samples])


@pytest.mark.parametrize("prefetch", [False, True])
def test_concurrent_calls_give_the_same_bank_as_the_old_path(shards, prefetch):
    seeded, _, fresh = shards
    old_bank, old_samples, old_report = update_bank(seeded, fresh, old_caller(), config(concurrent=False), 1)
    backend = Workers(workers=3)
    caller = new_caller(backend)
    new_bank, new_samples, new_report = update_bank(seeded, fresh, caller, config(prefetch=prefetch), 1)
    assert bank_outcome(new_bank, new_samples, new_report) == bank_outcome(old_bank, old_samples, old_report)
    # the shards exercise every round, rejections and relabels included
    assert old_report["segment_prompts"] > 0 and old_report.get("contract_accepted", 0) > 0, old_report
    assert {"approve", "reject"} <= {s.meta["verdict"] for s in old_samples if s.adapter == "curator"}
    assert old_report["operations"] and any(not r["applied"] for r in old_report["operations"])
    # the engines saw no more prompts than the old path asked (the duplicated trajectory's are sent once)
    usage = caller.usage_json()
    asked = {a: c // 2 for a, c in old_caller_calls(seeded, fresh).items()}
    for adapter, prompts in asked.items():  # each asked prompt was sent (once) or answered from the cache
        row = usage[adapter]
        assert row["prompts"] - row["unused"] + row["cached"] == prompts, (adapter, usage)
    assert usage["segment"]["cached"] > 0  # the twin's segments
    if prefetch:  # every round's prompts left before the first answer was waited for
        assert backend.log.index("wait") > backend.log.index("submit contract"), backend.log
        assert usage["segment"]["prefetch_used"] > 0 and usage["contract"]["prefetch_used"] > 0, usage


def test_without_relabels_the_three_rounds_cost_one_round_trip(shards, monkeypatch):
    """A segment adapter that keeps the segmentation's order (as its teacher examples do) relabels nothing:
    every curator and contract prompt was guessed right, so all prompts leave before the first wait and no
    round sends anything after it; the bank is the old path's."""
    def in_score_order(adapter: str, prompt: list[dict[str, str]], j: int, seed: int | None) -> str:
        if adapter == "segment":
            match = re.search(r"Rank these ids: (.+)$", prompt[-1]["content"], re.MULTILINE)
            return "RANK: " + " > ".join(i.strip() for i in match.group(1).split(","))
        return content_answer(adapter, prompt, j, seed)

    content_answer = answer
    monkeypatch.setattr(f"{__name__}.answer", in_score_order)
    seeded, fresh, _ = shards
    old = bank_outcome(*update_bank(seeded, fresh, old_caller(), config(concurrent=False), 1))
    backend = Workers()
    caller = new_caller(backend)
    assert bank_outcome(*update_bank(seeded, fresh, caller, config(prefetch=True), 1)) == old
    first_wait = backend.log.index("wait")
    assert backend.log[:first_wait] == ["submit segment", "submit curator", "submit contract"], backend.log
    assert all(entry == "wait" for entry in backend.log[first_wait:]), backend.log
    assert all(row["prefetch_used"] == row["prompts"] - row["unused"] for row in caller.usage_json().values())


def old_caller_calls(seeded: Bank, fresh: list[Trajectory]) -> dict[str, int]:
    caller = old_caller()
    update_bank(seeded, fresh, caller, config(concurrent=False), 1)
    return caller.calls


def test_seeds_depend_only_on_the_prompt_not_on_splitting_or_completion_order(shards):
    """A model that reads its seed: the bank is the same over 1 or 3 workers, one prompt per call or a
    round per call, any completion order, with or without prefetching."""
    seeded, fresh, _ = shards
    outcomes = []
    for workers, chunk, shuffle, prefetch in ((1, 0, 0, False), (3, 1, 1, True), (2, 3, 2, True)):
        caller = new_caller(Workers(workers, seeded=True, shuffle_seed=shuffle), chunk_prompts=chunk)
        bank, samples, report = update_bank(seeded, fresh, caller, config(prefetch=prefetch), 1)
        outcomes.append(bank_outcome(bank, samples, report))
    assert outcomes[1:] == outcomes[:1] * 2


def test_prompts_already_answered_are_not_asked_again(shards):
    """The same shard again with the same adapter versions: every prompt comes from the cache (nothing
    reaches the engines) and the update is the same; a new adapter version asks again."""
    seeded, fresh, _ = shards
    cache: Any = None
    first_backend = Workers()
    first = new_caller(first_backend)
    cache = first.cache
    outcome = bank_outcome(*update_bank(seeded, fresh, first, config(), 1))
    assert first_backend.prompts() > 0 and len(cache) > 0
    again_backend = Workers()
    again = new_caller(again_backend, cache=cache)
    assert bank_outcome(*update_bank(seeded, fresh, again, config(), 1)) == outcome
    assert again_backend.prompts() == 0, again_backend.sent
    usage = again.usage_json()
    assert all(row["cached"] > 0 and row["calls"] == 0 for row in usage.values()), usage
    retrained = ConcurrentCaller(Workers(), {**ENGINES, "curator": "curator@v6"}, run_seed=7, cache=cache)
    update_bank(seeded, fresh, retrained, config(), 1)
    assert retrained.usage_json()["curator"]["calls"] > 0
    assert retrained.usage_json()["segment"]["calls"] == 0


def test_a_small_cache_keeps_what_the_running_update_still_needs(shards):
    """`cache_size: 0`: nothing survives the update, but prefetched answers are kept until asked."""
    seeded, fresh, _ = shards
    reference = bank_outcome(*update_bank(seeded, fresh, new_caller(Workers()), config(), 1))
    caller = new_caller(Workers(), cache_size=0)
    result = update_bank(seeded, fresh, caller, config(cache_size=0, prefetch=True), 1)
    assert bank_outcome(*result) == reference
    assert len(caller.cache) == 0


class FakeRef:
    """What a fake actor method's `.remote` returns: the call, run when `ray.get` asks for it."""

    def __init__(self, fn: Any, *args: Any) -> None:
        self.fn, self.args = fn, args

    def value(self) -> Any:
        return self.fn(*self.args)


class FakeMethod:
    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def remote(self, *args: Any) -> FakeRef:
        return FakeRef(self.fn, *args)


class FakeWorker:
    """A rollout worker's `complete` over the content model (seeds as the real one derives them)."""

    def __init__(self) -> None:
        self.prompts = 0
        self.complete = FakeMethod(self._complete)

    def _complete(self, adapter: str | None, prompts: list[Any], n: int, max_tokens: int, temperature: float,
                  seed: int | list[int], regex: str | None = None) -> list[list[Any]]:
        from coplay.skills.caller import Completion

        self.prompts += len(prompts)
        short = (adapter or "").split("@")[0]
        return [[Completion(text=answer(short, p, j, None), completion_ids=[1] * (j + 1)) for j in range(n)]
                for p in prompts]


class FakeStore:
    def __init__(self) -> None:
        self.published: dict[str, bytes] = {}
        self.publish_bank = FakeMethod(self._publish)

    def _publish(self, key: str, version: int, data: bytes, iteration: int) -> None:
        self.published[key] = data


def test_the_bank_actor_publishes_the_same_bank_on_either_path(shards, monkeypatch):
    """The SkillBankActor's own callers (the old one and `WorkerBackend` over two workers), ray's get and
    wait stood in for: the same published bank and samples; the new path sends no prompt twice (so without
    prefetching it sends fewer than the old path; prefetched prompts that a relabel made useless are counted
    `unused`) and its usage counts exactly what the workers were sent."""
    import coplay.actors.skill_bank_actor as actor_module
    from coplay.config import CoplayConfig
    from coplay.types import Shard, encode_shard

    def get(ref: Any) -> Any:
        return [r.value() for r in ref] if isinstance(ref, list) else ref.value()

    monkeypatch.setattr(actor_module.ray, "get", get)
    monkeypatch.setattr(actor_module.ray, "wait", lambda refs, num_returns, timeout: (refs, []))
    seeded, _, fresh = shards
    results, sent = {}, {}
    for concurrent, prefetch in ((False, False), (True, False), (True, True)):
        workers = {"w0": FakeWorker(), "w1": FakeWorker()}
        monkeypatch.setattr(actor_module, "named_actor",
                            lambda a, w=workers: w.get(a, a) if isinstance(a, str) else a)
        bank_cfg = config(concurrent=concurrent, prefetch=prefetch)
        cfg = CoplayConfig(skill_bank=bank_cfg.model_dump()).model_dump()
        store = FakeStore()
        impl = actor_module.SkillBankImpl(cfg, store, ["w0", "w1"])
        impl.banks["2048"] = seeded
        impl.submit(1, encode_shard(Shard(shard_id="s", iteration=1, worker=0, trajectories=fresh)))
        update = impl.update(1, {a: f"{a}@v1" for a in ("segment", "contract", "curator")})
        results[concurrent, prefetch] = (store.published["2048"],
                                         [(s.group_id, s.completion_text, s.reward) for s in update.samples])
        sent[concurrent, prefetch] = sum(w.prompts for w in workers.values())
        assert sent[concurrent, prefetch] == sum(u["prompts"] for u in update.calls.values())
        if concurrent:
            assert all(w.prompts for w in workers.values())  # both workers answered
    assert results[True, False] == results[False, False] == results[True, True]
    assert 0 < sent[True, False] < sent[False, False]  # the duplicated trajectory's prompts went out once
