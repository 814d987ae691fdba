"""How much maintenance happens and what is counted: per-kind caps defer proposals, `every` skips updates,
invalid proposals never reach the curator, segments that fail their skill's contract become evidence for a
new skill, a rejected operation leaves the bank byte-identical, and each update's report carries the
maintenance block the metrics log shows per iteration."""

from __future__ import annotations

import copy
import json
from collections import Counter

import pytest

from coplay.config import SkillBankConfig
from coplay.skills import Bank, FunctionCaller, update_bank
from coplay.skills.curation import curator_round
from coplay.skills.maintenance import Proposal, propose_operations
from tests.skills.synthetic import shard

CFG = SkillBankConfig()


def _with_duplicate(bank: Bank) -> Bank:
    bank = bank.copy()
    dup = copy.deepcopy(next(iter(bank.skills.values())))
    dup.id = bank.new_id()
    bank.skills[dup.id] = dup
    return bank


def test_a_cap_of_zero_defers_every_proposal_of_that_kind(two_skill_bank):
    bank = _with_duplicate(two_skill_bank)
    counts: Counter[str] = Counter()
    capped = CFG.with_values({"maintenance.max_proposals.merge": 0})
    proposals = propose_operations(bank, capped, iteration=2, trivial=frozenset({"score↑"}), counts=counts)
    assert not any(p.op == "merge" for p in proposals)
    assert counts["deferred_merge"] == 1 and counts["proposed_merge"] == 0
    uncapped: Counter[str] = Counter()
    again = propose_operations(bank, CFG, iteration=2, trivial=frozenset({"score↑"}), counts=uncapped)
    assert [p.op for p in again].count("merge") == 1 and uncapped["proposed_merge"] == 1


def test_maintenance_runs_on_every_kth_update_only():
    cfg = CFG.with_values({"maintenance.every": 2})
    skipped, _, report = update_bank(Bank("2048"), shard(8), None, cfg, iteration=1)
    assert report["proposals"] == 0 and not skipped.skills and report["maintenance"]["skipped"]
    assert len(skipped.pending) > 0  # the evidence waits for the next maintenance update
    done, _, report = update_bank(skipped, shard(8, first_seed=40), None, cfg, iteration=2)
    assert report["maintenance"]["proposed"].get("materialize", 0) >= 1 and done.skills


def test_segments_failing_their_skill_join_the_pending_pool(two_skill_bank):
    bank = two_skill_bank.copy()
    skill = next(s for s in bank.skills.values() if "x↑" in s.contract.literals)
    skill.contract.add = sorted(skill.contract.add + ["z↑"])  # a literal the behaviour never shows
    new, _, report = update_bank(bank, shard(8, first_seed=50, kinds="A"), None,
                                 CFG.with_values({"maintenance.every": 10}), iteration=2)
    assert report["poor_fit_segments"] > 0
    assert len(new.pending) - len(bank.pending) == report["poor_fit_segments"] + report.get("new_segments", 0)
    off = CFG.with_values({"maintenance.every": 10, "maintenance.poor_fit_pending": False})
    kept, _, report = update_bank(bank, shard(8, first_seed=50, kinds="A"), None, off, iteration=2)
    assert len(kept.pending) - len(bank.pending) == report.get("new_segments", 0)


def test_an_invalid_proposal_is_counted_and_never_shown_to_the_curator(two_skill_bank):
    bank = two_skill_bank.copy()
    asked: list[int] = []

    def approve(adapter, prompts, n):
        asked.append(len(prompts))
        return [["VERDICT: APPROVE"] * n for _ in prompts]

    caller = FunctionCaller(approve)
    ghost = Proposal("retire", ["s99"], [], {"reason": "test"})
    counts: Counter[str] = Counter()
    out, samples, records = curator_round(caller, bank, [ghost], CFG, 2, 16, lambda b: 0.0, counts)
    assert out is bank and samples == [] and asked == []
    assert counts["invalid_retire"] == 1
    assert records[0]["verdict"] == "invalid" and "s99" in records[0]["reason"]


def test_a_rejected_operation_leaves_the_bank_byte_identical(two_skill_bank):
    bank = _with_duplicate(two_skill_bank)
    proposals = propose_operations(bank, CFG, iteration=2, trivial=frozenset({"score↑"}))
    before = json.dumps(bank.to_json(), sort_keys=True)  # proposing reserves the new skills' ids (next_id)
    assert {p.op for p in proposals} >= {"merge"}
    reject = FunctionCaller(lambda adapter, prompts, n: [["VERDICT: REJECT"] * n for _ in prompts])
    counts: Counter[str] = Counter()
    out, samples, records = curator_round(reject, bank, proposals, CFG, 2, 16,
                                          lambda b: len(b.skills) / 10, counts)
    assert json.dumps(out.to_json(), sort_keys=True) == before
    assert all(r["verdict"] == "reject" and not r["applied"] for r in records)
    assert counts["verdict_reject"] == len(proposals) and samples


def test_the_update_report_carries_the_maintenance_block(two_skill_bank):
    bank = _with_duplicate(two_skill_bank)
    new, _, report = update_bank(bank, shard(8, first_seed=20), None, CFG, iteration=2)
    block = report["maintenance"]
    assert block["proposed"]["merge"] == 1 and block["applied"]["merge"] == 1
    assert block["verdicts"] == {"deterministic": sum(block["applied"].values())}
    merge = next(op for op in report["operations"] if op["op"] == "merge")
    assert block["quality_delta"]["merge"] == pytest.approx(merge["quality_after"] - merge["quality_before"],
                                                            abs=1e-5)
    assert block["evidence"]["new_segments"] == report.get("new_segments", 0)
