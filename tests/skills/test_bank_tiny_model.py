"""The skill bank with the real tiny model as its caller (its answers are mostly garbage): the bank stays
valid, every unusable answer is counted, nothing crashes, and the previous version is untouched.

The caller (`tiny_caller`, tests/skills/conftest.py) is the same `FunctionCaller` the SkillBankActor builds,
backed here by the `hf` engine (the loop tests cover the vLLM path inside Ray)."""

from __future__ import annotations

import json

from coplay.config import SkillBankConfig
from coplay.rollout.bot_episodes import play_bot_episodes
from coplay.skills import Bank, FunctionCaller, update_bank


def test_bank_stays_valid_and_counts_rejections_with_the_tiny_model(tiny_caller):
    tiny_caller = FunctionCaller(tiny_caller.generate, pass_max_tokens=True)  # its own call usage
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
    # what the calls cost per kind (the phase timeline's bank rows): every completion counted, real tokens
    usage = tiny_caller.usage_json()
    assert {s.adapter for s in samples} <= set(usage) == set(tiny_caller.calls)
    for kind, u in usage.items():
        assert u["completions"] == tiny_caller.calls[kind] == u["prompts"] * cfg.group_size, kind
        assert u["calls"] >= 1 and u["tokens_in"] > 0 and u["tokens_out"] > 0 and u["seconds"] > 0, kind
    assert sum(u["tokens_out"] for u in usage.values()) == sum(len(s.completion_ids) for s in samples)


def test_constrained_contracts_make_even_the_untrained_model_write_valid_protocols(constrained_tiny_caller):
    """`skill_bank.constrained_contracts`: sampled under the protocol grammar, every contract answer of the
    random tiny model parses and validates (without it, none does: the test above), so the contract adapter's
    protocols replace the deterministic ones; its samples carry the constraint for the learner's mask."""
    cfg = SkillBankConfig(group_size=2, constrained_contracts=True, segmentation={"max_prompts": 0})
    expert = play_bot_episodes("2048", "expert", list(range(8)), max_steps=40)
    seeded, _, _ = update_bank(Bank("2048"), expert, None, cfg, iteration=0)
    fresh = play_bot_episodes("2048", "expert", list(range(8, 14)), max_steps=40)
    new_bank, samples, report = update_bank(seeded, fresh, constrained_tiny_caller, cfg, iteration=1,
                                            max_tokens={"contract": 2048})
    contract = [s for s in samples if s.adapter == "contract"]
    assert contract, report
    assert all(s.meta["valid"] and s.meta["regex"] and s.finish_reason == "stop" for s in contract), \
        [(s.meta["error"], s.completion_text[-80:]) for s in contract if not s.meta["valid"]]
    assert report["contract_accepted"] > 0 and not report.get("contract_rejected")
    assert any(s.protocol_source.startswith("contract@") for s in new_bank.skills.values())
