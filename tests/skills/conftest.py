"""Fixtures of the skill-bank tests: the real tiny model as the bank's caller, and a small bank learned from
the synthetic behaviours (tests/skills/synthetic.py)."""

from __future__ import annotations

import pytest

from coplay.agent.prompts import encode
from coplay.config import EngineConfig, SkillBankConfig
from coplay.engines.base import GenerationRequest, SamplingParams
from coplay.engines.factory import make_engine
from coplay.skills import Bank, FunctionCaller, update_bank
from coplay.skills.caller import Completion
from tests.skills.synthetic import shard


@pytest.fixture(scope="session")
def tiny_bank_engine(tiny_model_config):
    """The tiny model on the `hf` engine, shared by the bank's callers."""
    engine = make_engine(tiny_model_config, EngineConfig(backend="hf", max_model_len=4096))
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def tiny_caller(tiny_bank_engine):
    """The tiny model on the `hf` engine answering the bank's prompts (mostly garbage: it is untrained)."""
    return FunctionCaller(_generate_with(tiny_bank_engine, cap=48), pass_max_tokens=True)


@pytest.fixture(scope="session")
def constrained_tiny_caller(tiny_bank_engine):
    """The same, sampling under the constraints the bank asks for (the SkillBankActor's caller does)."""
    return FunctionCaller(_generate_with(tiny_bank_engine, cap=2048), pass_max_tokens=True, pass_regex=True)


def _generate_with(engine, cap: int):
    def generate(adapter, prompts, n, max_tokens, regex=None):
        requests = [GenerationRequest(encode(engine.tokenizer, p), None,
                                      SamplingParams(temperature=1.0, max_tokens=min(max_tokens, cap)),
                                      seed=17 * i + j, regex=regex)
                    for i, p in enumerate(prompts) for j in range(n)]
        outs = engine.generate(requests)
        return [[Completion(text=o.text, prompt_ids=list(r.prompt_ids), completion_ids=list(o.token_ids),
                            logprobs=list(o.logprobs), temperature=1.0, finish_reason=o.finish_reason)
                 for r, o in zip(requests[i * n:(i + 1) * n], outs[i * n:(i + 1) * n], strict=True)]
                for i in range(len(prompts))]

    return generate


@pytest.fixture(scope="module")
def two_skill_bank() -> Bank:
    """The deterministic bank of 8 synthetic episodes: two skills (MERGE: x rises; BUILD: y falls)."""
    bank, _, _ = update_bank(Bank("2048"), shard(8), None, SkillBankConfig(), iteration=1)
    assert len(bank.skills) == 2
    return bank
