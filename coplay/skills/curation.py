"""The curator round of a bank update: every maintenance proposal is checked, judged and, if approved,
applied, and what happened is counted (docs/agents.md "Maintenance").

Per proposal, in the order `propose_operations` made them:
1. invalid against the bank as it stands (`maintenance.invalid_reason`): counted `invalid_<op>`, never shown
   to the curator;
2. the held-out bank quality before and after applying it is measured (also without a model, so every
   applied operation has its quality change on record);
3. the verdict: with a model, the first of the `curator` adapter's G samples that says approve or reject
   (samples are interchangeable draws; the rest still earn their GRPO rewards). When none does, the
   `maintenance.unparseable_verdict` fallback decides: `reject`, or `quality` (approve iff the held-out
   quality does not drop, the rule the curator's teacher examples follow), counted `verdict_fallback_*`.
   Without a model every valid proposal is approved (the deterministic policy);
4. the quality gate (`maintenance.quality_gate`): an approved operation whose held-out quality change is
   below -`maintenance.quality_tolerance` is not applied (`gated`, counted `gated_<op>`): the curator's
   approval is a proposal to the measure, never a way around it (maintenance operations; inductions, whose
   evidence the held-out shards cannot contain, are exempt: `GATED_OPS`). The deterministic policy (no
   model: the seed banks of the cold start) applies every valid proposal, as before;
5. applied: the bank becomes the bank with the operation applied; otherwise the bank object is not
   touched, so a rejected or gated operation leaves every skill exactly as it was. Each record carries the
   fingerprint of the bank's skills computed before and again after the decision (`skills_before`,
   `skills_after`: recomputed from the bank object, never carried over), so the run folder shows which
   operations changed the bank and a test can see one that changed it without being applied. Each judged
   record also says whether the curator's verdict agreed with the measured change (`agrees`: approve
   where the quality did not fall beyond the tolerance, reject where it did); the curator's GRPO reward is
   that change signed by its verdict (`coplay.skills.rewards.curator_reward`).
Standard library only; never imports ray or torch.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from coplay.config import SkillBankConfig
from coplay.skills.caller import ChatMessages, ModelCaller, call_adapter
from coplay.skills.maintenance import Proposal, apply_proposal, invalid_reason
from coplay.skills.model_rounds import group_prefix
from coplay.skills.prompts import curator_prompt, parse_verdict
from coplay.skills.rewards import curator_reward
from coplay.skills.schema import Bank
from coplay.types import Sample

QUALITY_TOLERANCE = 1e-9
# The operations the quality gate judges: those whose evidence is the policy's own trajectories, which the
# held-out shards sample. An induction's evidence is an exploration task the held-out episodes never played
# (the curriculum's stream, docs/curriculum.md), so the held-out measure sees only its size penalty.
GATED_OPS = frozenset({"materialize", "merge", "split", "refine", "retire"})


def skills_fingerprint(bank: Bank) -> str:
    """A short hash of the bank's skills exactly as they are saved (12 hex digits of sha256)."""
    skills = [bank.skills[k].to_json() for k in sorted(bank.skills)]
    return hashlib.sha256(json.dumps(skills, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:12]


def quality_holds(quality_before: float, quality_after: float, tolerance: float = 0.0) -> bool:
    """The measure's answer to an operation: the held-out quality fell by at most `tolerance` (the rule of
    the `quality` fallback, of the quality gate and of the curator's agreement)."""
    return quality_after >= quality_before - tolerance - QUALITY_TOLERANCE


def decide(verdicts: Sequence[str | None], quality_before: float, quality_after: float,
           fallback: str, tolerance: float = 0.0) -> tuple[str, bool]:
    """(verdict on record, approved) from the curator samples' parsed verdicts: the first that is approve or
    reject; none: the fallback (`reject`, or `quality`: approve iff `quality_holds`)."""
    for verdict in verdicts:
        if verdict in ("approve", "reject"):
            return verdict, verdict == "approve"
    if fallback == "quality":
        approved = quality_holds(quality_before, quality_after, tolerance)
        return ("fallback_approve" if approved else "fallback_reject"), approved
    return "fallback_reject", False


def curator_prompts(bank: Bank, valid: Sequence[Proposal]) -> list[ChatMessages]:
    """The curator prompts of the proposals that are valid against `bank` (one builder for the round and
    for `coplay.skills.update.speculate`, which sends them ahead)."""
    return [curator_prompt(bank.game, p.op, [bank.skills[t] for t in p.targets], p.evidence, p.new_skills)
            for p in valid]


def curator_round(caller: ModelCaller | None, bank: Bank, proposals: Sequence[Proposal], cfg: SkillBankConfig,
                  iteration: int, max_tokens: int, quality: Callable[[Bank], float],
                  counts: Counter[str]) -> tuple[Bank, list[Sample], list[dict[str, Any]]]:
    """Judge and apply `proposals` in order; returns the resulting bank, the curator samples (rewards filled)
    and one record per proposal (op, targets, new, evidence, verdict, applied, quality before/after)."""
    records: list[dict[str, Any]] = []
    valid: list[Proposal] = []
    for proposal in proposals:
        reason = invalid_reason(bank, proposal, cfg)
        if reason is None:
            valid.append(proposal)
            continue
        counts[f"invalid_{proposal.op}"] += 1
        records.append({**proposal.describe(), "verdict": "invalid", "applied": False, "reason": reason})
    groups: list[list[Sample]] = [[] for _ in valid]
    if caller is not None and valid:
        groups = call_adapter(caller, "curator", curator_prompts(bank, valid), cfg.group_size, max_tokens,
                              group_prefix(bank, iteration))
    samples: list[Sample] = []
    q_now = quality(bank) if valid else 0.0  # the bank's quality, carried along (the bank changes only here)
    tolerance = cfg.maintenance.quality_tolerance
    for proposal, group in zip(valid, groups, strict=True):
        reason = invalid_reason(bank, proposal, cfg)  # an earlier approved operation may have changed it
        if reason is not None:
            counts[f"invalid_{proposal.op}"] += 1
            records.append({**proposal.describe(), "verdict": "invalid", "applied": False, "reason": reason})
            continue
        fp_before = skills_fingerprint(bank)
        after = apply_proposal(bank, proposal)
        q_before, q_after = q_now, quality(after)
        verdicts = [parse_verdict(s.completion_text) for s in group]
        for sample, verdict in zip(group, verdicts, strict=True):
            sample.reward = curator_reward(verdict, q_before, q_after)
            sample.meta.update({"bank_key": bank.bank_key, "iteration": iteration, "op": proposal.op,
                                "targets": proposal.targets, "verdict": verdict,
                                "quality_before": q_before, "quality_after": q_after})
            counts["curator_unparseable"] += verdict is None
            samples.append(sample)
        if caller is None:
            verdict, applied = "deterministic", True
        else:
            verdict, applied = decide(verdicts, q_before, q_after, cfg.maintenance.unparseable_verdict,
                                      tolerance)
        counts[f"verdict_{verdict}"] += 1
        holds = quality_holds(q_before, q_after, tolerance)
        gated = (applied and cfg.maintenance.quality_gate and not holds and proposal.op in GATED_OPS
                 and caller is not None)
        approved, applied = applied, applied and not gated
        if gated:
            counts[f"gated_{proposal.op}"] += 1
        counts[f"{'applied' if applied else 'rejected'}_{proposal.op}"] += 1
        if applied:
            bank, q_now = after, q_after
        record = {**proposal.describe(), "verdict": verdict, "approved": approved, "gated": gated,
                  "applied": applied, "quality_before": round(q_before, 6),
                  "quality_after": round(q_after, 6),
                  "skills_before": fp_before, "skills_after": skills_fingerprint(bank)}
        if verdict in ("approve", "reject"):  # the curator's own verdict, not a fallback's
            record["agrees"] = approved == holds
        if group:
            record["curator_group"] = group[0].group_id
        records.append(record)
    return bank, samples, records
