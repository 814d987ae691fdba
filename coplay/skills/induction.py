"""Skill induction from the curriculum's exploration stream (docs/curriculum.md "The controller").

A task the proposer wrote under no skill, which the gate kept and the solver reached at least once, is
evidence of a behaviour the bank does not name yet. The next bank update turns each such task into an
`induce` proposal: a new skill whose contract is learned from the successful attempts' effects (the same
literals as every other contract, `skills/literals.py`), whose success condition is the task's hidden
contract, and whose tasking record starts with the task as its first example. Like every maintenance
operation it goes to the curator; only an approved one changes the bank. A candidate whose contract an
existing skill already states (effect Jaccard >= `maintenance.merge_jaccard`) is not proposed and is counted.

Standard library only; never imports ray or torch.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from coplay.agent.parsing import INTENTION_TAGS
from coplay.config import SkillBankConfig
from coplay.skills.contracts import learn_contract, pass_rate
from coplay.skills.expressions import ExpressionError, parse_expression
from coplay.skills.maintenance import Proposal, build_skill, cap_proposals, jaccard
from coplay.skills.schema import Bank, Instance
from coplay.skills.tasking import TaskSpec

FALLBACK_TAG = "EXPLORE"  # the exploration stream's own tag when the solver named none


def candidate_instances(candidate: Mapping[str, Any], iteration: int, index: int) -> list[Instance]:
    """The successful attempts of one candidate task as skill instances (one per attempt)."""
    out = []
    for a, attempt in enumerate(candidate.get("attempts", [])):
        tag = str(attempt.get("tag", ""))
        out.append(Instance(effects=sorted(str(e) for e in attempt.get("effects", [])),
                            duration=max(1, int(attempt.get("steps", 1))),
                            reward=float(attempt.get("reward", 0.0)),
                            tag=tag if tag in INTENTION_TAGS else FALLBACK_TAG,
                            episode_id=f"it{iteration}/induce/{index}/{a}", start=0, iteration=iteration,
                            start_view=dict(attempt.get("start_view", {})),
                            end_view=dict(attempt.get("end_view", {}))))
    return out


def _task_contract(candidate: Mapping[str, Any]) -> str | None:
    """The task's hidden contract when it parses under the expression language, else None."""
    text = str(candidate.get("task", {}).get("contract", ""))
    try:
        parse_expression(text)
    except ExpressionError:
        return None
    return text or None


def propose_inductions(bank: Bank, candidates: Sequence[Mapping[str, Any]], cfg: SkillBankConfig,
                       iteration: int, trivial: frozenset[str], counts: Counter[str]) -> list[Proposal]:
    """One `induce` proposal per usable candidate (most solved first, then in order), within the bank's
    room (`maintenance.max_skills`) and the per-kind cap (`maintenance.max_proposals.induce`, as every
    operation: `cap_proposals` counts `proposed_induce` and `deferred_induce`). Also counted:
    `evidence_induction_candidates`, `evidence_induction_duplicates` (an existing skill already states the
    contract) and `evidence_induction_unusable` (no successful attempt or a contract that does not parse)."""
    counts["evidence_induction_candidates"] += len(candidates)
    ranked = sorted(range(len(candidates)), key=lambda i: (-float(candidates[i].get("p", 0.0)), i))
    room = max(0, cfg.maintenance.max_skills - len(bank.skills))
    seen_contracts: set[str] = set()
    out: list[Proposal] = []
    for index in ranked:
        candidate = candidates[index]
        instances = candidate_instances(candidate, iteration, index)
        contract_text = _task_contract(candidate)
        if not instances or contract_text is None:
            counts["evidence_induction_unusable"] += 1
            continue
        contract = learn_contract([i.effects for i in instances], cfg.contracts.eff_freq, trivial)
        if contract_text in seen_contracts or any(
                jaccard(contract.literals, s.contract.literals) >= cfg.maintenance.merge_jaccard
                for s in bank.skills.values()):
            counts["evidence_induction_duplicates"] += 1
            continue
        if len(out) >= room:
            counts["deferred_induce"] += 1
            continue
        seen_contracts.add(contract_text)
        task = dict(candidate.get("task", {}))
        skill = build_skill(bank, instances, contract, cfg, iteration,
                            {"op": "induce", "parents": [], "iteration": iteration})
        skill.success = contract_text
        goal = str(task.get("goal", "")).strip()
        if goal:
            skill.summary = f"{goal} ({skill.summary})"
        skill.tasking = TaskSpec(examples=[task])
        rate = pass_rate(contract.literals, [i.effects for i in instances], cfg.contracts.pass_threshold)
        out.append(Proposal("induce", [], [skill],
                            {"task_goal": goal, "task_contract": contract_text, "bound": task.get("bound"),
                             "solver_success": round(float(candidate.get("p", 0.0)), 4),
                             "instances": len(instances), "pass_rate": round(rate, 4),
                             "contract": contract.literals, "support": contract.support}))
    return cap_proposals(out, cfg, counts)
