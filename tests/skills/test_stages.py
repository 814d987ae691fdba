"""Each stage on hand-made trajectories with known answers: literals, boundaries, segmentation, contracts."""

from __future__ import annotations

import pytest

from coplay.config import SkillBankConfig
from coplay.skills import Bank, update_bank
from coplay.skills.boundaries import propose_boundaries
from coplay.skills.contracts import deterministic_protocol, instance_passes, learn_contract, trivial_literals
from coplay.skills.expressions import parse_expression
from coplay.skills.literals import LiteralError, literal_holds, parse_literal, segment_literals
from coplay.skills.segmentation import NEW, segment_trajectory
from coplay.types import Step
from tests.skills.synthetic import alternating_trajectory, shard

CFG = SkillBankConfig()


def test_literals_from_start_and_end_windows():
    traj = alternating_trajectory(0, blocks=2, min_len=4, max_len=4)
    a, b = traj.steps[:4], traj.steps[4:]
    assert segment_literals(a, window=2) == {"x↑", "flag=true", "score↑"}
    assert segment_literals(b, window=2) == {"y↓", "flag=false", "score↑"}
    assert segment_literals([], window=2) == frozenset()
    assert literal_holds("x↑", {"x": 1}, {"x": 2}) and not literal_holds("x↓", {"x": 1}, {"x": 2})


def test_literal_spellings_parse_and_garbage_does_not():
    assert str(parse_literal("max_tile up")) == "max_tile↑"
    assert str(parse_literal("holes↓")) == "holes↓"
    assert str(parse_literal("danger = TRUE")) == "danger=true"
    for bad in ("", "↑", "x=maybe", "__import__↑", "1x↑"):
        with pytest.raises(LiteralError):
            parse_literal(bad)


def _flip_only_trajectory() -> list[Step]:
    """One intention throughout; a boolean flips every 3 steps (weak evidence, score 0.5 each)."""
    steps, flag = [], False
    for t in range(30):
        before = {"flag": flag, "x": float(t)}
        if t % 3 == 2:
            flag = not flag
        steps.append(Step(t=t, observation="", action="a", reward=0.0, score=0.0, intention="MERGE go",
                          features_before=before, features_after={"flag": flag, "x": float(t + 1)}))
    for t in (10, 20):  # two real behaviour changes: intention tag changes
        steps[t].intention = "BUILD go"
    return steps


def test_boundary_threshold_really_removes_candidates():
    steps = _flip_only_trajectory()
    loose = propose_boundaries(steps, radius=0, threshold=0.0)
    strict = propose_boundaries(steps, radius=0, threshold=1.0)
    assert loose.scored == len(loose.positions) > len(strict.positions) > 0
    assert set(strict.positions) <= set(loose.positions)
    assert {10, 11, 20, 21} <= set(strict.positions)  # the intention changes survive
    merged = propose_boundaries(steps, radius=2, threshold=0.0)
    assert merged.merged < merged.scored  # merging within the radius removes neighbours


def test_skill_events_make_strong_boundaries_and_unknown_ids_are_counted():
    steps = _flip_only_trajectory()
    steps[4].skill_event = "success"
    steps[6].skill_id = "s99"
    found = propose_boundaries(steps, radius=0, threshold=2.0, known_skills={"s1"})
    assert 5 in found.positions
    assert found.unknown_skill_ids == 1


def test_dp_segmentation_finds_the_behaviour_blocks():
    traj = alternating_trajectory(3, blocks=6)
    found = propose_boundaries(traj.steps, CFG.boundaries.radius, CFG.boundaries.threshold)
    segments = segment_trajectory(traj, found.positions, Bank("2048"), prior=5.0, new_penalty=1.0, window=2,
                                  max_len=40)
    starts = [s.start for s in segments]
    block_starts = [s.t for i, s in enumerate(traj.steps) if i == 0 or s.action != traj.steps[i - 1].action]
    assert starts == block_starts
    assert all(s.label == NEW for s in segments)
    assert segments[-1].end == len(traj.steps)


def test_contract_keeps_frequent_non_trivial_literals_and_passes_at_70_percent():
    effects = [{"x↑", "flag=true", "score↑"}] * 6 + [{"x↑", "score↑"}] * 2 + [{"y↓", "score↑"}] * 2
    trivial = trivial_literals(effects, 0.9)
    assert trivial == {"score↑"}
    contract = learn_contract(effects, eff_freq=0.5, trivial=trivial)
    assert contract.add == ["flag=true", "x↑"] and contract.dele == [] and contract.n == 10
    assert contract.support == {"flag=true": 0.6, "x↑": 0.8}
    assert instance_passes(contract.literals, {"x↑", "flag=true"}, 0.7)
    assert not instance_passes(contract.literals, {"x↑"}, 0.7)  # 1 of 2 < 70%
    assert not instance_passes([], {"x↑"}, 0.7)


def test_contradictory_literals_at_equal_support_are_dropped():
    contract = learn_contract([{"x↑", "y↓"}, {"x↓", "y↓"}], eff_freq=0.5)
    assert contract.literals == ["y↓"]


def test_deterministic_protocol_is_valid_and_speaks_the_contract():
    bank, _, _ = update_bank(Bank("2048"), shard(6), None, CFG, iteration=1)
    for skill in bank.skills.values():
        proto = deterministic_protocol("MERGE", skill.contract, skill.evidence)
        assert 2 <= len(proto["plan"]) <= 7
        for key in ("preconditions", "success", "abort"):
            parse_expression(proto[key], bank.features)


def test_two_alternating_behaviours_give_two_skills_with_the_expected_contracts():
    bank, samples, report = update_bank(Bank("2048"), shard(8), None, CFG, iteration=1)
    contracts = sorted((s.contract.literals, dict(s.tags)) for s in bank.skills.values())
    assert contracts == [(["flag=false", "y↓"], {"BUILD": 24}), (["flag=true", "x↑"], {"MERGE": 24})]
    assert samples == []
    assert report["heldout_pass_rate"] == 1.0 and report["coverage"] == 1.0
    assert report["shuffled_pass_rate"] < 0.8
    merge = next(s for s in bank.skills.values() if "x↑" in s.contract.literals)
    assert merge.success == "flag == true"
    assert parse_expression(merge.preconditions).holds({"flag": False, "shield": False})
    # The next shard is labelled with these skills, not NEW.
    bank2, _, report2 = update_bank(bank, shard(8, first_seed=50), None, CFG, iteration=2)
    assert report2.get("new_segments", 0) == 0 and report2["skill_segments"] > 0
    assert sorted(bank2.skills) == sorted(bank.skills)
    assert all(s.stats.uses > bank.skills[s.id].stats.uses for s in bank2.skills.values())


def test_three_behaviours_give_three_skills():
    bank, _, report = update_bank(Bank("2048"), shard(8, kinds="ABC"), None, CFG, iteration=1)
    contracts = sorted(s.contract.literals for s in bank.skills.values())
    # A always follows C here, so A also turns `shield` off.
    assert contracts == [["flag=false", "y↓"], ["flag=true", "shield=false", "x↑"], ["shield=true", "z↑"]]
    assert report["heldout_pass_rate"] - report["shuffled_pass_rate"] >= 0.2
