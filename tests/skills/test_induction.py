"""The controller's skill induction (docs/curriculum.md): exploration-stream tasks the solver reached become
`induce` proposals that go to the curator like every maintenance operation; an approved one adds a skill
whose success condition is the task's contract, a rejected one leaves the bank byte-identical, and a
candidate an existing skill already states is not proposed."""

from __future__ import annotations

import json
from collections import Counter

from coplay.config import SkillBankConfig
from coplay.skills import FunctionCaller, update_bank
from coplay.skills.curation import curator_round
from coplay.skills.induction import propose_inductions
from tests.skills.synthetic import shard

CFG = SkillBankConfig()
TRIVIAL = frozenset({"score↑"})


def candidate(contract: str = "z >= 4", effects: tuple[str, ...] = ("shield=true", "z↑"), p: float = 0.5,
              attempts: int = 2) -> dict:
    start = {"x": 3.0, "y": 97.0, "z": 0.0, "flag": True, "shield": False, "score": 6}
    end = {**start, "z": 4.0, "shield": True, "score": 8}
    task = {"position": {"z": 0}, "goal": "raise the shield and z to 4", "contract": contract, "bound": 4}
    return {"task": task, "p": p, "attempts": [{"effects": list(effects), "steps": 2, "reward": 0.0,
                                                "tag": "DEFEND", "start_view": start, "end_view": end}
                                               for _ in range(attempts)]}


def test_an_approved_induction_adds_a_skill_with_the_tasks_contract(two_skill_bank):
    new, _, report = update_bank(two_skill_bank, shard(4, first_seed=60), None, CFG, iteration=2,
                                 candidates=[candidate()])
    induced = [s for s in new.skills.values() if s.lineage[0]["op"] == "induce"]
    assert len(induced) == 1 and induced[0].id not in two_skill_bank.skills
    skill = induced[0]
    assert skill.success == "z >= 4" and set(skill.contract.literals) == {"shield=true", "z↑"}
    assert skill.tasking.examples == [candidate()["task"]] and skill.tags == {"DEFEND": 2}
    maintenance = report["maintenance"]
    assert maintenance["proposed"]["induce"] == maintenance["applied"]["induce"] == 1
    assert maintenance["evidence"]["induction_candidates"] == 1
    assert any(op["op"] == "induce" and op["applied"] for op in report["operations"])


def test_a_rejected_induction_leaves_the_bank_byte_identical(two_skill_bank):
    bank = two_skill_bank.copy()
    counts: Counter[str] = Counter()
    proposals = propose_inductions(bank, [candidate()], CFG, 2, TRIVIAL, counts)
    before = json.dumps(bank.to_json(), sort_keys=True)  # proposing reserves the new skill's id
    reject = FunctionCaller(lambda adapter, prompts, n: [["VERDICT: REJECT"] * n for _ in prompts])
    out, samples, records = curator_round(reject, bank, proposals, CFG, 2, 16, lambda b: 0.5, counts)
    assert [r["op"] for r in records] == ["induce"] and not records[0]["applied"]
    assert json.dumps(out.to_json(), sort_keys=True) == before
    assert counts["rejected_induce"] == 1 and len(samples) == CFG.group_size
    assert all(s.adapter == "curator" and s.meta["op"] == "induce" for s in samples)


def test_a_candidate_an_existing_skill_states_is_not_proposed(two_skill_bank):
    existing = next(iter(two_skill_bank.skills.values()))
    counts: Counter[str] = Counter()
    proposals = propose_inductions(two_skill_bank.copy(),
                                   [candidate(effects=tuple(existing.contract.literals))], CFG, 2, TRIVIAL,
                                   counts)
    assert proposals == [] and counts["evidence_induction_duplicates"] == 1


def test_the_cap_defers_and_unusable_candidates_are_counted(two_skill_bank):
    capped = CFG.with_values({"maintenance.max_proposals.induce": 1})
    counts: Counter[str] = Counter()
    candidates = [candidate(p=0.25), candidate("shield", effects=("shield=true", "x↓"), p=0.75),
                  candidate(attempts=0), candidate("max_tile(2)")]
    proposals = propose_inductions(two_skill_bank.copy(), candidates, capped, 2, TRIVIAL, counts)
    assert [p.evidence["task_contract"] for p in proposals] == ["shield"]  # the most solved first
    assert counts["deferred_induce"] == 1 and counts["evidence_induction_unusable"] == 2
    assert counts["proposed_induce"] == 1 and counts["evidence_induction_candidates"] == 4
