"""Maintenance on hand-made banks: duplicates merge, two effect clusters split, stale skills retire,
curator verdicts are applied (a rejection leaves the skills as they were)."""

from __future__ import annotations

import copy
from collections import Counter

import pytest

from coplay.config import SkillBankConfig
from coplay.skills import Bank, FunctionCaller, update_bank
from coplay.skills.contracts import learn_contract
from coplay.skills.curation import curator_round, decide, skills_fingerprint
from coplay.skills.maintenance import apply_proposal, build_skill, enforce_size, propose_operations
from coplay.skills.schema import UnknownSkillError
from coplay.skills.update import maintenance_summary
from tests.skills.synthetic import shard

CFG = SkillBankConfig()


def scripted(answers: dict[str, str]) -> FunctionCaller:
    """A test double for the model's answers: the same text for every prompt of an adapter."""
    return FunctionCaller(lambda adapter, prompts, n: [[answers[adapter]] * n for _ in prompts])


def _with_duplicate(bank: Bank) -> tuple[Bank, str, str]:
    bank = bank.copy()
    original = next(s for s in bank.skills.values() if "x↑" in s.contract.literals)
    dup = copy.deepcopy(original)
    dup.id = bank.new_id()
    bank.skills[dup.id] = dup
    return bank, original.id, dup.id


def test_two_duplicates_merge(two_skill_bank):
    bank, a, b = _with_duplicate(two_skill_bank)
    new, _, report = update_bank(bank, shard(8, first_seed=20), None, CFG, iteration=2)
    merges = [op for op in new.operations if op["op"] == "merge"]
    assert len(merges) == 1 and sorted(merges[0]["targets"]) == sorted([a, b])
    assert a not in new.skills and b not in new.skills and len(new.skills) == 2
    merged = new.skills[merges[0]["new"][0]]
    assert merged.contract.literals == ["flag=true", "x↑"]
    assert merged.lineage[-1]["op"] == "merge" and sorted(merged.lineage[-1]["parents"]) == sorted([a, b])
    assert merges[0]["evidence"]["effect_jaccard"] == 1.0
    assert report["applied_merge"] == 1


def test_a_skill_with_two_effect_clusters_splits(two_skill_bank):
    bank = two_skill_bank.copy()
    evidence = [i for s in bank.skills.values() for i in s.evidence]
    mixed_contract = learn_contract([i.effects for i in evidence], CFG.contracts.eff_freq)
    bank.skills.clear()
    mixed = build_skill(bank, evidence, mixed_contract, CFG, 1, {"op": "test"})
    bank.skills[mixed.id] = mixed
    assert mixed.stats.pass_rate < CFG.maintenance.split_pass_rate
    proposals = propose_operations(bank, CFG, iteration=2, trivial=frozenset({"score↑"}))
    splits = [p for p in proposals if p.op == "split"]
    assert len(splits) == 1 and splits[0].targets == [mixed.id]
    children = sorted(c.contract.literals for c in splits[0].new_skills)
    assert children == [["flag=false", "y↓"], ["flag=true", "x↑"]]
    assert min(splits[0].evidence["children_pass_rates"]) >= CFG.maintenance.split_child_pass_rate
    after = apply_proposal(bank, splits[0])
    assert mixed.id not in after.skills and len(after.skills) == 2
    assert all(c.lineage[-1] == {"op": "split", "parents": [mixed.id], "iteration": 2}
               for c in after.skills.values())


def test_a_stale_skill_retires(two_skill_bank):
    only_merge = shard(8, first_seed=30, kinds="A")
    new, _, _ = update_bank(two_skill_bank, only_merge, None, CFG, iteration=1 + CFG.maintenance.retire_after)
    retired = [op for op in new.operations if op["op"] == "retire"]
    build_id = next(s.id for s in two_skill_bank.skills.values() if "y↓" in s.contract.literals)
    assert [op["targets"] for op in retired] == [[build_id]]
    assert retired[0]["evidence"]["reason"] == "unused"
    assert build_id not in new.skills and len(new.skills) == 1


def test_a_skill_below_the_score_floor_retires(two_skill_bank):
    bank = two_skill_bank.copy()
    skill = next(iter(bank.skills.values()))
    for k, inst in enumerate(skill.evidence):  # effects that agree on nothing: no refinement, no split
        inst.effects = [f"f{k}↑"]
    proposals = propose_operations(bank, CFG, iteration=2, trivial=frozenset())
    assert any(p.op == "retire" and p.targets == [skill.id] and p.evidence["reason"] == "score below floor"
               for p in proposals)


def test_refine_drops_failing_literals(two_skill_bank):
    bank = two_skill_bank.copy()
    skill = next(s for s in bank.skills.values() if "x↑" in s.contract.literals)
    skill.contract.add = sorted(skill.contract.add + ["z↑"])
    proposals = propose_operations(bank, CFG, iteration=2, trivial=frozenset({"score↑"}))
    refine = next(p for p in proposals if p.op == "refine")
    assert refine.targets == [skill.id] and refine.new_skills[0].id == skill.id
    assert refine.evidence["dropped"] == {"z↑": 0.0}
    assert refine.new_skills[0].contract.literals == ["flag=true", "x↑"]


def test_curator_rejection_leaves_the_bank_unchanged(two_skill_bank):
    bank, a, b = _with_duplicate(two_skill_bank)
    caller = scripted({"segment": "RANK: NEW", "curator": "VERDICT: REJECT - keep them apart",
                       "contract": "{}"})
    new, samples, report = update_bank(bank, shard(8, first_seed=20), caller, CFG, iteration=2)
    assert sorted(new.skills) == sorted(bank.skills)
    for sid, skill in bank.skills.items():
        assert new.skills[sid].contract.literals == skill.contract.literals
        assert new.skills[sid].preconditions == skill.preconditions
    assert [op["verdict"] for op in new.operations] == ["reject"] * len(new.operations) and new.operations
    assert not any(op["applied"] for op in new.operations)
    curator = [s for s in samples if s.adapter == "curator"]
    assert len(curator) == CFG.group_size * len(new.operations)
    assert all(s.reward is not None and s.group_id and s.sample_id for s in curator)
    assert report["rejected_merge"] == 1


def test_curator_approval_is_applied_and_rewarded_by_the_counterfactual(two_skill_bank):
    bank, a, b = _with_duplicate(two_skill_bank)
    caller = scripted({"segment": "nonsense", "curator": "VERDICT: APPROVE", "contract": "no json"})
    new, samples, report = update_bank(bank, shard(8, first_seed=20), caller, CFG, iteration=2)
    assert report["applied_merge"] == 1 and a not in new.skills
    merge_samples = [s for s in samples if s.adapter == "curator" and s.meta["op"] == "merge"]
    delta = merge_samples[0].meta["quality_after"] - merge_samples[0].meta["quality_before"]
    assert all(s.reward == pytest.approx(delta) for s in merge_samples)
    assert delta > 0  # one fewer skill, same pass rate and coverage: the size penalty shrinks


def test_an_unparseable_curator_answer_is_a_rejection_when_the_fallback_is_reject():
    caller = scripted({"segment": "", "curator": "I think that maybe", "contract": ""})
    cfg = CFG.with_values({"maintenance.unparseable_verdict": "reject"})
    new, samples, report = update_bank(Bank("2048"), shard(8), caller, cfg, iteration=1)
    assert new.skills == {} and report["curator_unparseable"] == CFG.group_size * report["proposals"] > 0
    assert all(op["verdict"] == "fallback_reject" and not op["applied"] for op in new.operations)
    assert report["maintenance"]["verdicts"] == {"fallback_reject": report["proposals"]}
    assert len(new.pending) > 0  # the NEW instances wait for a later verdict
    assert all(s.reward <= 0 for s in samples if s.adapter == "curator")


def test_an_unparseable_curator_answer_falls_back_to_the_quality_gate():
    caller = scripted({"segment": "", "curator": "I think that maybe", "contract": ""})
    new, samples, report = update_bank(Bank("2048"), shard(8), caller, CFG, iteration=1)
    assert report["proposals"] > 0 and new.operations
    for op in new.operations:  # approved exactly when the held-out quality did not drop
        assert op["verdict"] == ("fallback_approve" if op["applied"] else "fallback_reject")
        assert op["applied"] == (op["quality_after"] >= op["quality_before"])
    assert len(new.skills) == report["applied_materialize"] > 0
    assert all(s.reward <= 0 for s in samples if s.adapter == "curator")  # no verdict still earns nothing


def test_the_first_sample_with_a_verdict_decides():
    assert decide([None, "reject", "approve"], 0.5, 0.9, "quality") == ("reject", False)
    assert decide([None, None], 0.5, 0.4, "quality") == ("fallback_reject", False)
    assert decide([None], 0.5, 0.5, "quality") == ("fallback_approve", True)
    assert decide([], 0.1, 0.9, "reject") == ("fallback_reject", False)


def test_bank_size_is_bounded(two_skill_bank):
    bank = two_skill_bank.copy()
    evicted = enforce_size(bank, 1)
    assert len(evicted) == 1 and len(bank.skills) == 1
    with pytest.raises(UnknownSkillError, match="has no skill"):
        bank.get(evicted[0])


def _merge_and_refine(two_skill_bank: Bank) -> tuple[Bank, list]:
    """A bank with a duplicate (a merge) and a contract literal its evidence never shows (a refine)."""
    bank, _, _ = _with_duplicate(two_skill_bank)
    build = next(s for s in bank.skills.values() if "y↓" in s.contract.literals)
    build.contract.add = sorted(build.contract.add + ["z↑"])
    proposals = propose_operations(bank, CFG, iteration=2, trivial=frozenset({"score↑"}))
    assert [p.op for p in proposals] == ["merge", "refine"]
    return bank, proposals


@pytest.mark.parametrize("gate", [True, False])
def test_an_approved_operation_that_lowers_held_out_quality_is_gated_and_recorded(two_skill_bank, gate):
    """The curator approves both proposals; under a measure that counts skills, the merge lowers the quality
    and the refine keeps it. Gated: only the refine applies, the merge is recorded `gated` with its change,
    the curator's agreement is judged by the same measure, and every record's fingerprints are of the bank
    as it stood before and after the decision. Without the gate both apply."""
    bank, proposals = _merge_and_refine(two_skill_bank)
    approve = FunctionCaller(lambda adapter, prompts, n: [["VERDICT: APPROVE"] * n for _ in prompts])
    cfg = CFG.with_values({"maintenance.quality_gate": gate})
    counts: Counter[str] = Counter()
    new, samples, records = curator_round(approve, bank, proposals, cfg, 2, 16,
                                          lambda b: float(len(b.skills)), counts)
    merge, refine = records
    assert merge["approved"] and refine["approved"]
    assert (merge["quality_before"], merge["quality_after"]) == (3.0, 2.0)
    assert (refine["quality_before"], refine["quality_after"]) == ((3.0, 3.0) if gate else (2.0, 2.0))
    assert merge["gated"] == gate and merge["applied"] == (not gate) and refine["applied"]
    assert (merge["agrees"], refine["agrees"]) == (False, True)
    assert counts["gated_merge"] == int(gate) and counts["applied_refine"] == 1
    assert len(new.skills) == (3 if gate else 2)
    assert merge["skills_before"] == skills_fingerprint(bank)
    assert (merge["skills_after"] == merge["skills_before"]) == gate
    assert refine["skills_before"] == merge["skills_after"] != refine["skills_after"]
    assert refine["skills_after"] == skills_fingerprint(new)
    assert all(s.reward == pytest.approx(-1.0) for s in samples if s.meta["op"] == "merge")


def test_the_maintenance_block_reports_gated_operations_and_the_curators_agreement():
    block = maintenance_summary(Counter({"gated_merge": 1, "applied_refine": 1}),
                                [{"op": "merge", "applied": False, "agrees": False, "quality_before": 3.0,
                                  "quality_after": 2.0},
                                 {"op": "refine", "applied": True, "agrees": True, "quality_before": 3.0,
                                  "quality_after": 3.0},
                                 {"op": "retire", "applied": True, "quality_before": 3.0,
                                  "quality_after": 3.5}])  # a fallback's verdict: not the curator's
    assert block["gated"] == {"merge": 1} and block["quality_changes"] == [-1.0, 0.0, 0.5]
    assert block["curator_agreement"] == {"judged": 2, "agreed": 1, "rate": 0.5}


def test_a_skill_that_aborts_far_more_than_it_succeeds_in_play_becomes_a_retire_candidate(two_skill_bank):
    """Runs of a skill that end in `abort` are counted into its stats by the bank update; past
    `abort_ratio` times its successes (and at least `min_instances` aborts) it is proposed for retirement."""
    from coplay.skills.update import record_play

    bank = two_skill_bank.copy()
    merge_id = next(s.id for s in bank.skills.values() if "x↑" in s.contract.literals)
    episodes = shard(2, first_seed=50)
    for traj in episodes:
        for k, step in enumerate(traj.steps[:4]):
            step.skill_id, step.skill_event = merge_id, ("abort" if k < 3 else "success")
    counts: Counter[str] = Counter()
    record_play(bank, episodes, counts)
    stats = bank.skills[merge_id].stats
    assert (stats.play_aborts, stats.play_successes) == (6, 2) and counts["play_abort"] == 6
    assert not any(p.op == "retire" and p.targets == [merge_id]
                   for p in propose_operations(bank, CFG, iteration=2, trivial=frozenset({"score↑"})))
    stats.play_aborts = 7  # 7 > 3 x 2
    retire = [p for p in propose_operations(bank, CFG, iteration=2, trivial=frozenset({"score↑"}))
              if p.op == "retire" and p.targets == [merge_id]]
    assert retire and retire[0].evidence["reason"] == "aborts in play"
    assert Bank.from_json(bank.to_json()).skills[merge_id].stats.play_aborts == 7  # saved with the bank
