"""Bank maintenance: proposals with their evidence, and applying the approved ones.

- materialize: a cluster of NEW instances (same intention tag, similar effects) with >= `min_instances`
  members whose learned contract has >= `min_literals` literals and passes on >= `pass_threshold` of them.
- merge: two skills whose contracts have effect Jaccard >= `merge_jaccard` and similar usage (intention-tag
  cosine >= 0.5 and mean durations within a factor 2).
- split: a skill passing < `split_pass_rate` on its recent instances whose instances fall into two effect
  clusters, each passing >= `split_child_pass_rate` of its own instances.
- refine: the contract relearned on the recent instances differs (failing literals dropped, consistent added).
- retire: unused for `retire_after` iterations, a pass rate below `score_floor` over enough uses, or
  runs in play that abort more than `abort_ratio` times as often as they succeed.
Each skill is the target of at most one proposal per update. The curator's verdicts are applied by `update`.
Standard library only; never imports ray or torch.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from coplay.config import SkillBankConfig
from coplay.skills.contracts import (
    deterministic_protocol,
    dominant_tag,
    instance_passes,
    learn_contract,
    pass_rate,
    skill_name,
)
from coplay.skills.literals import LiteralError, parse_literal
from coplay.skills.schema import Bank, Contract, Instance, Skill, SkillStats

SIMILAR_TAGS = 0.5
SIMILAR_DURATION = 2.0
CLUSTER_JACCARD = 0.5
SPLIT_ROUNDS = 6


@dataclass
class Proposal:
    """One maintenance operation: the skills it removes (`targets`) and those it adds (`new_skills`)."""

    op: str
    targets: list[str]
    new_skills: list[Skill]
    evidence: dict[str, Any] = field(default_factory=dict)
    pending_used: list[tuple[str, int, int]] = field(default_factory=list)  # NEW instances it consumes

    def describe(self) -> dict[str, Any]:
        return {"op": self.op, "targets": self.targets, "new": [s.id for s in self.new_skills],
                "evidence": self.evidence}


def jaccard(a: Sequence[str] | set[str] | frozenset[str],
            b: Sequence[str] | set[str] | frozenset[str]) -> float:
    sa, sb = set(a), set(b)
    return len(sa & sb) / len(sa | sb) if sa | sb else 1.0


def _cosine(a: dict[str, int], b: dict[str, int]) -> float:
    dot = sum(a[k] * b.get(k, 0) for k in a)
    na, nb = math.sqrt(sum(v * v for v in a.values())), math.sqrt(sum(v * v for v in b.values()))
    return dot / (na * nb) if na and nb else 0.0


def instance_key(instance: Instance) -> tuple[str, int, int]:
    """What identifies an instance: its episode, first step and iteration."""
    return (instance.episode_id, instance.start, instance.iteration)


def tag_counts(instances: Sequence[Instance]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for inst in instances:
        counts[inst.tag] = counts.get(inst.tag, 0) + 1
    return dict(sorted(counts.items()))


def build_skill(bank: Bank, instances: Sequence[Instance], contract: Contract, cfg: SkillBankConfig,
                iteration: int, lineage: dict[str, Any], tags: dict[str, int] | None = None,
                skill_id: str | None = None) -> Skill:
    """A skill learned from instances, with the deterministic protocol and fresh stats."""
    tags = tags if tags is not None else tag_counts(instances)
    tag = dominant_tag(tags)
    protocol = deterministic_protocol(tag, contract, instances)
    lits = contract.literals
    passes = sum(1 for i in instances if instance_passes(lits, i.effects, cfg.contracts.pass_threshold))
    n = len(instances)
    stats = SkillStats(uses=n, successes=passes,
                       mean_reward=sum(i.reward for i in instances) / n if n else 0.0,
                       mean_duration=sum(i.duration for i in instances) / n if n else 0.0,
                       last_used=max([i.iteration for i in instances], default=iteration))
    taken = [s.name for s in bank.skills.values() if s.id != skill_id]
    return Skill(id=skill_id or bank.new_id(), name=skill_name(tag, contract, taken),
                 summary=str(protocol["summary"]),
                 plan=list(protocol["plan"]), preconditions=str(protocol["preconditions"]),  # type: ignore[arg-type]
                 success=str(protocol["success"]), abort=str(protocol["abort"]), contract=contract,
                 stats=stats,
                 version=bank.version + 1, lineage=[lineage], tags=dict(tags),
                 evidence=list(instances)[-cfg.contracts.evidence_limit:])


def _cluster_by_effects(instances: Sequence[Instance], trivial: frozenset[str]) -> list[list[int]]:
    """Greedy leader clustering by effect Jaccard (deterministic: input order)."""
    clusters: list[list[int]] = []
    signatures: list[set[str]] = []
    for idx, inst in enumerate(instances):
        effects = set(inst.effects) - trivial
        best, best_j = -1, CLUSTER_JACCARD - 1e-9
        for c, sig in enumerate(signatures):
            j = jaccard(effects, sig)
            if j > best_j:
                best, best_j = c, j
        if best < 0:
            clusters.append([idx])
            signatures.append(effects)
        else:
            clusters[best].append(idx)
            members = [set(instances[i].effects) - trivial for i in clusters[best]]
            signatures[best] = {lit for lit in set().union(*members)
                                if sum(lit in m for m in members) * 2 >= len(members)}
    return clusters


def _two_clusters(instances: Sequence[Instance], cfg: SkillBankConfig,
                  trivial: frozenset[str]) -> tuple[list[int], list[int]] | None:
    """Split instances in two by effects (seeds: the least similar pair; then alternate assign / relearn)."""
    n = len(instances)
    if n < 2 * cfg.maintenance.min_instances:
        return None
    effects = [set(i.effects) - trivial for i in instances]
    seed_a, seed_b = min(((a, b) for a in range(n) for b in range(a + 1, n)),
                         key=lambda p: (jaccard(effects[p[0]], effects[p[1]]), p))
    sig_a, sig_b = effects[seed_a], effects[seed_b]
    groups: tuple[list[int], list[int]] = ([], [])
    for _ in range(SPLIT_ROUNDS):
        new_groups: tuple[list[int], list[int]] = ([], [])
        for i, e in enumerate(effects):
            (new_groups[0] if jaccard(e, sig_a) >= jaccard(e, sig_b) else new_groups[1]).append(i)
        if not new_groups[0] or not new_groups[1] or new_groups == groups:
            groups = new_groups
            break
        groups = new_groups
        sig_a = set(learn_contract([effects[i] for i in groups[0]], cfg.contracts.eff_freq).literals)
        sig_b = set(learn_contract([effects[i] for i in groups[1]], cfg.contracts.eff_freq).literals)
    return groups if groups[0] and groups[1] else None


def propose_retirements(bank: Bank, cfg: SkillBankConfig, iteration: int, busy: set[str]) -> list[Proposal]:
    out = []
    for skill_id in sorted(set(bank.skills) - busy):
        skill = bank.skills[skill_id]
        idle = iteration - skill.stats.last_used
        recent = pass_rate(skill.contract.literals, [i.effects for i in skill.evidence],
                           cfg.contracts.pass_threshold)
        if idle >= cfg.maintenance.retire_after:
            out.append(Proposal("retire", [skill_id], [],
                                {"reason": "unused", "last_used": skill.stats.last_used,
                                 "idle_iterations": idle}))
        elif (skill.stats.uses >= cfg.maintenance.min_instances
              and len(skill.evidence) >= cfg.maintenance.min_instances
              and recent < cfg.maintenance.score_floor):
            out.append(Proposal("retire", [skill_id], [],
                                {"reason": "score below floor", "pass_rate": recent,
                                 "floor": cfg.maintenance.score_floor, "uses": skill.stats.uses}))
        elif (skill.stats.play_aborts >= cfg.maintenance.min_instances
              and skill.stats.play_aborts > cfg.maintenance.abort_ratio * skill.stats.play_successes):
            out.append(Proposal("retire", [skill_id], [],
                                {"reason": "aborts in play", "aborts": skill.stats.play_aborts,
                                 "successes": skill.stats.play_successes,
                                 "abort_ratio": cfg.maintenance.abort_ratio}))
    return out


def propose_merges(bank: Bank, cfg: SkillBankConfig, iteration: int, busy: set[str],
                   trivial: frozenset[str]) -> list[Proposal]:
    out = []
    ids = sorted(bank.skills)
    for i, a_id in enumerate(ids):
        for b_id in ids[i + 1:]:
            if a_id in busy or b_id in busy:
                continue
            a, b = bank.skills[a_id], bank.skills[b_id]
            effect_j = jaccard(a.contract.literals, b.contract.literals)
            tag_cos = _cosine(a.tags, b.tags)
            da, db = max(a.stats.mean_duration, 1e-6), max(b.stats.mean_duration, 1e-6)
            if (effect_j < cfg.maintenance.merge_jaccard or tag_cos < SIMILAR_TAGS
                    or max(da, db) / min(da, db) > SIMILAR_DURATION):
                continue
            instances = sorted(a.evidence + b.evidence, key=lambda x: (x.iteration, x.episode_id, x.start))
            contract = learn_contract([x.effects for x in instances], cfg.contracts.eff_freq, trivial)
            if len(contract.literals) < cfg.contracts.min_literals:
                continue
            tags = {t: a.tags.get(t, 0) + b.tags.get(t, 0) for t in sorted(set(a.tags) | set(b.tags))}
            merged = build_skill(bank, instances, contract, cfg, iteration,
                                 {"op": "merge", "parents": [a_id, b_id], "iteration": iteration}, tags)
            merged.stats = _combined_stats(a.stats, b.stats)
            out.append(Proposal("merge", [a_id, b_id], [merged],
                                {"effect_jaccard": round(effect_j, 4), "tag_cosine": round(tag_cos, 4),
                                 "durations": [round(da, 2), round(db, 2)], "contract": contract.literals}))
            busy.update((a_id, b_id))
    return out


def _combined_stats(a: SkillStats, b: SkillStats) -> SkillStats:
    n = a.uses + b.uses
    w = (lambda x, y: (x * a.uses + y * b.uses) / n) if n else (lambda x, y: 0.0)
    return SkillStats(uses=n, successes=a.successes + b.successes,
                      mean_reward=w(a.mean_reward, b.mean_reward),
                      mean_duration=w(a.mean_duration, b.mean_duration),
                      last_used=max(a.last_used, b.last_used))


def propose_splits_and_refinements(bank: Bank, cfg: SkillBankConfig, iteration: int, busy: set[str],
                                   trivial: frozenset[str]) -> list[Proposal]:
    out = []
    for skill_id in sorted(bank.skills):
        if skill_id in busy:
            continue
        skill = bank.skills[skill_id]
        effects = [i.effects for i in skill.evidence]
        if len(effects) < cfg.maintenance.min_instances:
            continue
        current = pass_rate(skill.contract.literals, effects, cfg.contracts.pass_threshold)
        if current < cfg.maintenance.split_pass_rate:
            groups = _two_clusters(skill.evidence, cfg, trivial)
            if groups is not None:
                children, rates = [], []
                for group in groups:
                    members = [skill.evidence[i] for i in group]
                    contract = learn_contract([m.effects for m in members], cfg.contracts.eff_freq, trivial)
                    rates.append(pass_rate(contract.literals, [m.effects for m in members],
                                           cfg.contracts.pass_threshold))
                    children.append((members, contract))
                if (all(len(m) >= cfg.maintenance.min_instances
                        and len(c.literals) >= cfg.contracts.min_literals for m, c in children)
                        and min(rates) >= cfg.maintenance.split_child_pass_rate):
                    new = [build_skill(bank, m, c, cfg, iteration,
                                       {"op": "split", "parents": [skill_id], "iteration": iteration})
                           for m, c in children]
                    out.append(Proposal("split", [skill_id], new,
                                        {"pass_rate": round(current, 4),
                                         "children_pass_rates": [round(r, 4) for r in rates],
                                         "children_sizes": [len(m) for m, _ in children],
                                         "children_contracts": [c.literals for _, c in children]}))
                    busy.add(skill_id)
                    continue
        relearned = learn_contract(effects, cfg.contracts.eff_freq, trivial)
        if (relearned.literals != skill.contract.literals
                and len(relearned.literals) >= cfg.contracts.min_literals):
            after = pass_rate(relearned.literals, effects, cfg.contracts.pass_threshold)
            if after + 1e-9 < current:
                continue
            refined = build_skill(bank, skill.evidence, relearned, cfg, iteration,
                                  {"op": "refine", "parents": [skill_id], "iteration": iteration},
                                  dict(skill.tags), skill_id=skill_id)
            refined.stats = skill.stats
            refined.lineage = skill.lineage + refined.lineage
            dropped = sorted(set(skill.contract.literals) - set(relearned.literals))
            added = sorted(set(relearned.literals) - set(skill.contract.literals))
            out.append(Proposal("refine", [skill_id], [refined],
                                {"dropped": {lit: relearned_support(effects, lit) for lit in dropped},
                                 "added": {lit: relearned.support[lit] for lit in added},
                                 "pass_before": round(current, 4), "pass_after": round(after, 4)}))
            busy.add(skill_id)
    return out


def relearned_support(effects: Sequence[Sequence[str]], literal: str) -> float:
    return round(sum(literal in e for e in effects) / len(effects), 4) if effects else 0.0


def propose_materializations(bank: Bank, cfg: SkillBankConfig, iteration: int,
                             trivial: frozenset[str]) -> list[Proposal]:
    capacity = cfg.maintenance.max_skills - len(bank.skills)
    by_tag: dict[str, list[int]] = {}
    for idx, inst in enumerate(bank.pending):
        by_tag.setdefault(inst.tag, []).append(idx)
    candidates = []
    for tag in sorted(by_tag):
        members = by_tag[tag]
        for cluster in _cluster_by_effects([bank.pending[i] for i in members], trivial):
            used = [members[i] for i in cluster]
            instances = [bank.pending[i] for i in used]
            if len(instances) < cfg.maintenance.min_instances:
                continue
            contract = learn_contract([i.effects for i in instances], cfg.contracts.eff_freq, trivial)
            # The consistent core: instances that pass the cluster's contract; the rest stay pending.
            core = [i for i in instances
                    if instance_passes(contract.literals, i.effects, cfg.contracts.pass_threshold)]
            if cfg.maintenance.min_instances <= len(core) < len(instances):
                core_ids = {id(i) for i in core}
                used = [u for u, i in zip(used, instances, strict=True) if id(i) in core_ids]
                instances = core
                contract = learn_contract([i.effects for i in instances], cfg.contracts.eff_freq, trivial)
            if len(instances) < cfg.maintenance.min_instances:
                continue
            rate = pass_rate(contract.literals, [i.effects for i in instances], cfg.contracts.pass_threshold)
            if len(contract.literals) < cfg.contracts.min_literals or rate < cfg.contracts.pass_threshold:
                continue
            if any(jaccard(contract.literals, s.contract.literals) >= cfg.maintenance.merge_jaccard
                   and dominant_tag(s.tags) == tag for s in bank.skills.values()):
                continue  # an existing skill already says this; its instances were mislabelled, not new
            candidates.append((len(instances), tag, used, instances, contract, rate))
    candidates.sort(key=lambda c: (-c[0], c[1], c[2]))
    out = []
    for size, tag, _, instances, contract, rate in candidates[:max(0, capacity)]:
        skill = build_skill(bank, instances, contract, cfg, iteration,
                            {"op": "materialize", "parents": [], "iteration": iteration})
        out.append(Proposal("materialize", [], [skill],
                            {"instances": size, "tag": tag, "pass_rate": round(rate, 4),
                             "contract": contract.literals, "support": contract.support},
                            [instance_key(i) for i in instances]))
    return out


def propose_operations(bank: Bank, cfg: SkillBankConfig, iteration: int,
                       trivial: frozenset[str], counts: Counter[str] | None = None) -> list[Proposal]:
    """All proposals for this update, in the order they are curated: retire (unused), merge, split/refine,
    retire (below the floor, when no split or refinement can save the skill), materialize. At most
    `maintenance.max_proposals.<op>` of each kind go on (in that order); the rest are counted in `counts` as
    `deferred_<op>` and come back next update if their evidence still holds. `counts` also gets the evidence
    the proposals came from (`evidence_*`) and `proposed_<op>`."""
    counts = counts if counts is not None else Counter()
    _count_evidence(bank, cfg, iteration, counts)
    stale = {sid for sid, s in bank.skills.items()
             if iteration - s.stats.last_used >= cfg.maintenance.retire_after}
    unused = propose_retirements(bank, cfg, iteration, set(bank.skills) - stale)
    # stale skills whose retirement the cap defers stay free for the other operations (merge, refine...)
    busy = {p.targets[0] for p in unused[:cfg.maintenance.max_proposals.retire]}
    merges = propose_merges(bank, cfg, iteration, busy, trivial)
    changes = propose_splits_and_refinements(bank, cfg, iteration, busy, trivial)
    weak = propose_retirements(bank, cfg, iteration, busy | stale)
    proposals = unused + merges + changes + weak + propose_materializations(bank, cfg, iteration, trivial)
    proposals = cap_proposals(proposals, cfg, counts)
    name_uniquely(bank, proposals)
    return proposals


def name_uniquely(bank: Bank, proposals: Sequence[Proposal]) -> None:
    """Rename new skills so names stay unique across the bank and this update's new skills (a refinement
    keeps its skill's own name)."""
    taken = {s.name for s in bank.skills.values()}
    for proposal in proposals:
        for skill in proposal.new_skills:
            if (skill.name in taken
                    and not (proposal.op == "refine" and bank.skills[skill.id].name == skill.name)):
                skill.name = skill_name(dominant_tag(skill.tags), skill.contract, taken)
            taken.add(skill.name)


def cap_proposals(proposals: list[Proposal], cfg: SkillBankConfig, counts: Counter[str]) -> list[Proposal]:
    """The first `max_proposals.<op>` proposals of each kind; the others are counted as deferred."""
    kept, seen = [], Counter[str]()
    for proposal in proposals:
        seen[proposal.op] += 1
        if seen[proposal.op] <= getattr(cfg.maintenance.max_proposals, proposal.op):
            kept.append(proposal)
            counts[f"proposed_{proposal.op}"] += 1
        else:
            counts[f"deferred_{proposal.op}"] += 1
    return kept


def _count_evidence(bank: Bank, cfg: SkillBankConfig, iteration: int, counts: Counter[str]) -> None:
    """What maintenance sees this update, whether or not it leads to a proposal: instances waiting in the
    pending pool, skills failing their contracts on recent evidence, skills idle for `retire_after`."""
    counts["evidence_pending"] += len(bank.pending)
    for skill in bank.skills.values():
        effects = [i.effects for i in skill.evidence]
        if (len(effects) >= cfg.maintenance.min_instances
                and pass_rate(skill.contract.literals, effects, cfg.contracts.pass_threshold)
                < cfg.maintenance.split_pass_rate):
            counts["evidence_failing_skills"] += 1
        if iteration - skill.stats.last_used >= cfg.maintenance.retire_after:
            counts["evidence_idle_skills"] += 1


def invalid_reason(bank: Bank, proposal: Proposal, cfg: SkillBankConfig) -> str | None:
    """Why a proposal cannot be applied to `bank` as it stands (its targets gone after an earlier operation,
    a new skill whose contract is too short or names features the bank never saw, an id taken by a skill it
    does not replace), or None. Invalid proposals never reach the curator; they are counted."""
    missing = [t for t in proposal.targets if t not in bank.skills]
    if missing:
        return f"unknown target skills {missing}"
    for skill in proposal.new_skills:
        if len(skill.contract.literals) < cfg.contracts.min_literals:
            return (f"new skill {skill.id} has {len(skill.contract.literals)} contract literals "
                    f"(< min_literals {cfg.contracts.min_literals})")
        try:
            features = {parse_literal(lit).feature for lit in skill.contract.literals}
        except LiteralError as exc:
            return f"new skill {skill.id}: {exc}"
        unknown = sorted(features - set(bank.features))
        if bank.features and unknown:
            return f"new skill {skill.id} names unknown features {unknown}"
        if skill.id in bank.skills and skill.id not in proposal.targets:
            return f"new skill id {skill.id} is taken by a skill the {proposal.op} does not replace"
    return None


def apply_proposal(bank: Bank, proposal: Proposal) -> Bank:
    """A bank with the operation applied (targets removed, new skills added, used NEW instances taken out
    of the pending pool). The input bank's containers are not changed; skill objects are shared."""
    out = bank.derive()
    for target in proposal.targets:
        out.get(target)  # raises UnknownSkillError with the bank's ids
        del out.skills[target]
    for skill in proposal.new_skills:
        out.skills[skill.id] = skill
        out.next_id = max(out.next_id, int(skill.id[1:]) + 1 if skill.id[1:].isdigit() else out.next_id)
    if proposal.pending_used:
        used = set(proposal.pending_used)
        out.pending = [inst for inst in out.pending if instance_key(inst) not in used]
    return out


def enforce_size(bank: Bank, max_skills: int) -> list[str]:
    """Evict the weakest skills (pass rate, then uses, then recency) until the bank fits; returns their
    ids."""
    evicted = []
    while len(bank.skills) > max_skills:
        weakest = min(bank.skills.values(),
                      key=lambda s: (s.stats.pass_rate, s.stats.uses, s.stats.last_used, s.id))
        evicted.append(weakest.id)
        del bank.skills[weakest.id]
    return evicted
