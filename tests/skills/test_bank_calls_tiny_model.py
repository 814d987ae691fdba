"""The bank's concurrent calls with a real model (the tiny one on the `hf` engine), greedy: answers depend on
the prompt alone, so the old sequential path and the concurrent one (prefetching, answers racing on threads)
must build the same bank with the same samples. Slow (about a minute): `make test-slow`."""

from __future__ import annotations

import concurrent.futures
import json
from typing import Any

import pytest

from coplay.config import SkillBankConfig
from coplay.rollout.bot_episodes import play_bot_episodes
from coplay.skills import Bank, FunctionCaller, update_bank
from coplay.skills.concurrent_calls import ConcurrentCaller
from tests.helpers import bank_generate

pytestmark = pytest.mark.slow
ENGINES = {"segment": None, "contract": None, "curator": None}


class ThreadBackend:
    def __init__(self, generate: Any, pool: concurrent.futures.Executor) -> None:
        self.generate, self.pool = generate, pool

    def submit(self, adapter: str, prompts: list[Any], seeds: list[int], n: int, max_tokens: int,
               regex: str | None) -> concurrent.futures.Future:
        return self.pool.submit(self.generate, adapter, prompts, n, max_tokens, regex, seeds)

    def wait(self, handle: concurrent.futures.Future) -> list[list[Any]]:
        return handle.result()

    def ready(self, handle: concurrent.futures.Future) -> bool:
        return handle.done()


def test_greedy_tiny_model_builds_the_same_bank_on_both_paths(tiny_bank_engine):
    cfg = SkillBankConfig(group_size=2, constrained_contracts=True, segmentation={"max_prompts": 4})
    expert = play_bot_episodes("2048", "expert", list(range(8)), max_steps=40)
    seeded, _, _ = update_bank(Bank("2048"), expert, None, cfg, iteration=0)
    fresh = play_bot_episodes("2048", "expert", list(range(8, 14)), max_steps=40)
    generate = bank_generate(tiny_bank_engine, cap=48, temperature=0.0)  # greedy
    old = update_bank(seeded, fresh, FunctionCaller(generate, pass_max_tokens=True, pass_regex=True),
                      cfg.with_values({"calls.concurrent": False}), 1)
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        caller = ConcurrentCaller(ThreadBackend(generate, pool), ENGINES, run_seed=0)
        new = update_bank(seeded, fresh, caller, cfg.with_values({"calls.prefetch": True}), 1)

    def outcome(result: tuple[Bank, list, dict]) -> tuple[Any, ...]:
        bank, samples, _ = result
        return (json.dumps(bank.to_json(), sort_keys=True),
                [(s.adapter, s.group_id, s.completion_ids, s.reward) for s in samples])

    assert outcome(new) == outcome(old)
    assert old[1] and any(u["prefetch_used"] for u in caller.usage_json().values())
