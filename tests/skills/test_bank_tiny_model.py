"""The skill bank with the real tiny model as its caller (its answers are mostly garbage): the bank stays
valid, every unusable answer is counted, nothing crashes, and the previous version is untouched.

The caller is the same `FunctionCaller` the SkillBankActor builds, backed here by the `hf` engine (the loop
tests cover the vLLM path inside Ray)."""

from __future__ import annotations

import json

import pytest

from coplay.agent.prompts import encode
from coplay.config import EngineConfig, SkillBankConfig
from coplay.engines.base import GenerationRequest, SamplingParams
from coplay.engines.factory import make_engine
from coplay.rollout.bot_episodes import play_bot_episodes
from coplay.skills import Bank, FunctionCaller, update_bank
from coplay.skills.caller import Completion


@pytest.fixture(scope="module")
def tiny_caller(tiny_model_config):
    engine = make_engine(tiny_model_config, EngineConfig(backend="hf", max_model_len=4096))

    def generate(adapter, prompts, n, max_tokens):
        requests = [GenerationRequest(encode(engine.tokenizer, p), None,
                                      SamplingParams(temperature=1.0, max_tokens=min(max_tokens, 48)),
                                      seed=17 * i + j)
                    for i, p in enumerate(prompts) for j in range(n)]
        outs = engine.generate(requests)
        return [[Completion(text=o.text, prompt_ids=list(r.prompt_ids), completion_ids=list(o.token_ids),
                            logprobs=list(o.logprobs), temperature=1.0, finish_reason=o.finish_reason)
                 for r, o in zip(requests[i * n:(i + 1) * n], outs[i * n:(i + 1) * n], strict=True)]
                for i in range(len(prompts))]

    yield FunctionCaller(generate, pass_max_tokens=True)
    engine.close()


def test_bank_stays_valid_and_counts_rejections_with_the_tiny_model(tiny_caller):
    cfg = SkillBankConfig(group_size=2, segmentation={"max_prompts": 4})
    expert = play_bot_episodes("2048", "expert", list(range(8)), max_steps=40)
    seeded, _, _ = update_bank(Bank("2048"), expert, None, cfg, iteration=0)  # the deterministic seed bank
    assert seeded.skills
    before = json.dumps(seeded.to_json(), sort_keys=True)
    fresh = play_bot_episodes("2048", "expert", list(range(8, 14)), max_steps=40)
    new_bank, samples, report = update_bank(seeded, fresh, tiny_caller, cfg, iteration=1)
    assert json.dumps(seeded.to_json(), sort_keys=True) == before  # the previous version is never touched
    assert new_bank.version == seeded.version + 1
    assert Bank.from_json(json.loads(json.dumps(new_bank.to_json()))).to_json() == new_bank.to_json()
    assert samples and {s.adapter for s in samples} <= {"segment", "contract", "curator"}
    assert all(s.reward is not None and s.completion_ids for s in samples)
    rejected = {k: v for k, v in report.items()
                if k.endswith(("unparseable", "_invalid_samples", "_rejected"))}
    print("tiny-model caller counts:", rejected, "samples:", report["samples"])
    assert sum(rejected.values()) > 0, \
        f"the random-ish tiny model's answers should be mostly unusable: {report}"
