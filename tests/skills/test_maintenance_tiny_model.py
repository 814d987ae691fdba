"""Maintenance end to end with the real tiny model as the curator, under the config that forces proposals
(launch/configs/tiny-2048-maintenance.yaml): within 3 bank updates on 2048 trajectories every operation kind
reaches the curator, the applied ones change the bank and the rejected (or gated) ones leave it
byte-identical: every record's fingerprints are recomputed from the bank object before and after its decision
(coplay/skills/curation.py), so an operation that changed the bank without being applied fails here."""

from __future__ import annotations

import pytest

from coplay.config import SkillBankConfig, load_config
from coplay.rollout.bot_episodes import play_bot_episodes
from coplay.skills import Bank, update_bank

OPS = {"materialize", "merge", "split", "refine", "retire"}


@pytest.mark.slow
def test_every_operation_kind_reaches_the_curator_within_three_updates(tiny_caller):
    cfg = load_config("launch/configs/tiny-2048-maintenance.yaml").skill_bank
    expert = play_bot_episodes("2048", "expert", list(range(32)), max_steps=40)
    bank, _, _ = update_bank(Bank("2048"), expert, None, SkillBankConfig(), iteration=0)  # the seed bank
    judged: dict[str, list[dict]] = {op: [] for op in OPS}
    for iteration in (1, 2, 3):
        bot = "random" if iteration < 3 else "expert"  # the bank sees a weak policy, then a strong one
        seeds = list(range(100 * iteration, 100 * iteration + 8))
        shard = play_bot_episodes("2048", bot, seeds, max_steps=40)
        new, samples, report = update_bank(bank, shard, tiny_caller, cfg, iteration)
        curated = [op for op in new.operations if op["verdict"] not in ("invalid", "size bound")]
        for earlier, later in zip(curated, curated[1:], strict=False):  # each judged on the bank left by
            assert later["skills_before"] == earlier["skills_after"]  # the one before, recomputed
        assert sum(s.adapter == "curator" for s in samples) == cfg.group_size * len(curated)
        for op in curated:
            judged[op["op"]].append(op)
            if op["applied"]:  # the operation changed the skills; its targets left, its new skills arrived
                assert op["skills_after"] != op["skills_before"]
                assert not set(op["targets"]) - set(op["new"]) & set(new.skills)
            else:  # rejected or gated: the bank it was judged against went on, byte for byte
                assert op["skills_after"] == op["skills_before"]
                if op["gated"]:  # approved, but the held-out quality fell (records round to 6 digits)
                    assert op["approved"] and op["quality_after"] <= op["quality_before"]
        for op in curated:  # nothing applied lowered the held-out quality
            assert not op["applied"] or op["quality_after"] >= op["quality_before"] - 1e-6
        block = report["maintenance"]
        assert sum(block["applied"].values()) + sum(block["rejected"].values()) == len(curated)
        bank = new
    print({op: [(r["verdict"], r["applied"]) for r in records] for op, records in judged.items()})
    assert {op for op, records in judged.items() if records} == OPS
    verdicts = [r["applied"] for records in judged.values() for r in records]
    assert any(verdicts) and not all(verdicts), "expected approved and rejected operations"
