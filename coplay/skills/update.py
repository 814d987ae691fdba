"""`update_bank`: the one entry point of the skill-bank agent (docs/agents.md).

Trajectories -> boundary proposal -> segmentation (DP; the `segment` adapter on close calls) -> usage stats
and contract evidence -> maintenance proposals (curated; verdicts applied) -> protocols of new and changed
skills and of up to `contract_refresh` skills that gained evidence (the `contract` adapter) -> a new bank
version measured on held-out trajectories. The input bank is never changed: the previous version stays as it
was (and on disk, `save_bank` never overwrites a version).
Standard library only; never imports ray or torch.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from coplay.config import SkillBankConfig
from coplay.skills.boundaries import propose_boundaries
from coplay.skills.caller import ModelCaller
from coplay.skills.contracts import instance_passes, update_base_rates
from coplay.skills.curation import curator_prompts, curator_round
from coplay.skills.heldout import evaluate_bank, segment_all
from coplay.skills.induction import propose_inductions
from coplay.skills.literals import feature_kinds
from coplay.skills.maintenance import (
    enforce_size,
    invalid_reason,
    name_uniquely,
    propose_operations,
    tag_counts,
)
from coplay.skills.model_rounds import contract_requests, contract_round, segment_requests, segment_round
from coplay.skills.schema import Bank, BankError, Instance, bank_key_for
from coplay.skills.segmentation import NEW, Segment, segment_trajectory, skill_profiles
from coplay.types import Sample, Trajectory

OPERATION_KEYS = ("op", "targets", "new", "verdict", "approved", "gated", "applied", "agrees",
                  "quality_before", "quality_after", "reason", "skills_before", "skills_after")
DEFAULT_MAX_TOKENS = {"segment": 64, "contract": 256, "curator": 32}


def check_trajectories(bank: Bank, trajectories: Sequence[Trajectory],
                       counts: Counter[str]) -> list[Trajectory]:
    """Trajectories this bank may learn from. Another game's (or side's) trajectory is a `BankError`
    naming it; an empty one is skipped and counted."""
    usable = []
    for traj in trajectories:
        key = bank_key_for(traj.game, traj.seat, traj.role)
        if key != bank.bank_key:
            raise BankError(f"trajectory {traj.episode_id!r} (game {traj.game!r}, seat {traj.seat!r}, role "
                            f"{traj.role!r}) belongs to bank {key!r}, not to bank {bank.bank_key!r}")
        if not traj.steps:
            counts["empty_trajectories"] += 1
            continue
        counts["steps_without_features"] += sum(1 for s in traj.steps
                                                if not s.features_before or not s.features_after)
        usable.append(traj)
    return usable


def update_vocabulary(bank: Bank, trajectories: Sequence[Trajectory]) -> None:
    """Feature names and kinds seen so far (expressions are validated against them)."""
    for traj in trajectories:
        for step in traj.steps:
            for view in (step.features_before, step.features_after):
                for name, kind in feature_kinds(view).items():
                    bank.features.setdefault(name, kind)
    bank.features = dict(sorted(bank.features.items()))


def held_out_part(trajectories: Sequence[Trajectory], every: int) -> list[Trajectory]:
    """The trajectories `split_heldout` holds out of an update's (none when a lone trajectory serves as both):
    what the skill-bank actor keeps for the next updates' measure (`skill_bank.heldout_window`)."""
    _, held, is_train = split_heldout([t for t in trajectories if t.steps], every)
    return [] if is_train else held


def split_heldout(trajectories: Sequence[Trajectory],
                  every: int) -> tuple[list[Trajectory], list[Trajectory], bool]:
    """(train, held-out, held-out is train): every `every`-th trajectory by episode id is held out (at least
    one when there are two or more); a single trajectory serves as both."""
    ordered = sorted(trajectories, key=lambda t: t.episode_id)
    if len(ordered) < 2:
        return ordered, ordered, True
    held = [t for i, t in enumerate(ordered) if i % every == every - 1] or [ordered[-1]]
    held_ids = {t.episode_id for t in held}
    return [t for t in ordered if t.episode_id not in held_ids], held, False


def record_usage(bank: Bank, segments: Sequence[Segment], cfg: SkillBankConfig, iteration: int,
                 counts: Counter[str]) -> None:
    """Fold this update's labelled segments into skill stats and evidence; NEW ones into the pending pool."""
    by_skill: dict[str, list[Instance]] = {}
    for seg in segments:
        inst = seg.instance(iteration)
        if seg.label == NEW:
            bank.pending.append(inst)
            counts["new_segments"] += 1
            continue
        by_skill.setdefault(seg.label, []).append(inst)
        counts["skill_segments"] += 1
        if not instance_passes(bank.get(seg.label).contract.literals, inst.effects,
                               cfg.contracts.pass_threshold):
            counts["poor_fit_segments"] += 1
            if cfg.maintenance.poor_fit_pending:  # evidence a skill is missing: materialize may find it
                bank.pending.append(inst)
    bank.pending = bank.pending[-cfg.maintenance.pending_limit:]
    for skill_id in sorted(by_skill):
        skill, instances = bank.get(skill_id), by_skill[skill_id]
        stats, k = skill.stats, len(instances)
        n = stats.uses + k
        stats.mean_reward = (stats.mean_reward * stats.uses + sum(i.reward for i in instances)) / n
        stats.mean_duration = (stats.mean_duration * stats.uses + sum(i.duration for i in instances)) / n
        stats.successes += sum(instance_passes(skill.contract.literals, i.effects,
                                               cfg.contracts.pass_threshold) for i in instances)
        stats.uses, stats.last_used = n, iteration
        for tag, c in tag_counts(instances).items():
            skill.tags[tag] = skill.tags.get(tag, 0) + c
        skill.evidence = (skill.evidence + instances)[-cfg.contracts.evidence_limit:]


def record_play(bank: Bank, trajectories: Sequence[Trajectory], counts: Counter[str]) -> None:
    """Fold how the decision agent's runs of each skill ended in play (`Step.skill_event` success / abort on
    a step with that skill) into its stats; events of skills the bank no longer holds are counted only."""
    for traj in trajectories:
        for step in traj.steps:
            if step.skill_event not in ("success", "abort") or not step.skill_id:
                continue
            counts[f"play_{step.skill_event}"] += 1
            skill = bank.skills.get(step.skill_id)
            if skill is None:
                counts["play_events_unknown_skill"] += 1
            elif step.skill_event == "success":
                skill.stats.play_successes += 1
            else:
                skill.stats.play_aborts += 1


def maintenance_summary(counts: Counter[str], records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """This update's maintenance in one block: the evidence seen, proposals by kind (sent to the curator,
    deferred by the caps, rejected as invalid), verdicts, applied and rejected by kind, and the held-out
    quality change the applied operations caused, per kind."""
    def by_prefix(prefix: str) -> dict[str, int]:
        return {k[len(prefix):]: v for k, v in sorted(counts.items()) if k.startswith(prefix) and v}

    delta: Counter[str] = Counter()
    for r in records:
        if r.get("applied") and "quality_after" in r:
            delta[r["op"]] += r["quality_after"] - r["quality_before"]
    return {"evidence": {**by_prefix("evidence_"), "new_segments": counts["new_segments"],
                         "poor_fit_segments": counts["poor_fit_segments"]},
            "proposed": by_prefix("proposed_"), "deferred": by_prefix("deferred_"),
            "invalid": by_prefix("invalid_"), "verdicts": by_prefix("verdict_"),
            "applied": by_prefix("applied_"), "rejected": by_prefix("rejected_"),
            "gated": by_prefix("gated_"),
            "quality_delta": {op: round(d, 6) for op, d in sorted(delta.items())},
            "quality_changes": [round(r["quality_after"] - r["quality_before"], 6) for r in records
                                if "quality_after" in r],
            "curator_agreement": _agreement(records),
            "skipped": bool(counts["maintenance_skipped"])}


def _agreement(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """How often the curator's own verdicts (not fallbacks) agreed with the measured quality change."""
    judged = [r["agrees"] for r in records if "agrees" in r]
    return {"judged": len(judged), "agreed": sum(judged),
            "rate": round(sum(judged) / len(judged), 4) if judged else None}


def refreshed_skills(bank: Bank, segments: Sequence[Segment], skip: Sequence[str], limit: int) -> list[str]:
    """Skills (besides `skip`) that gained evidence in this update, most new instances first (ties by id), at
    most `limit`: their prompts show new evidence, so the `contract` adapter rewrites their protocols too
    (contract learning is a stage of every update, not only of maintenance)."""
    gained = Counter(s.label for s in segments
                     if s.label != NEW and s.label in bank.skills and s.label not in skip)
    return sorted(gained, key=lambda sid: (-gained[sid], sid))[:limit]


def speculate(caller: Any, work: Bank, train: Sequence[Trajectory], segments: Mapping[str, list[Segment]],
              flat: Sequence[Segment], cfg: SkillBankConfig, iteration: int, trivial: frozenset[str],
              candidates: Sequence[Mapping[str, Any]], tokens: Mapping[str, int]) -> None:
    """Send, before the segment round is answered, the prompts the three rounds will most likely ask
    (`skill_bank.calls.prefetch`): the segment prompts first, then the curator prompts of the proposals that
    follow if the segment adapter relabels nothing, then the contract prompts of the skills those proposals
    would create and of the skills most likely refreshed. Why: the rounds depend on each other, so asked one
    after another an update costs three engine round trips; sent together they can overlap. Measured on one
    CPU engine it cost more than it saved (the guesses a rejection made useless doubled the contract tokens:
    benchmarks/results/bank-calls-smollm2-prefetch.json), hence off by default. Nothing here
    decides anything: each round later builds its own prompts from the real state and takes from the caller's
    content-keyed cache only the answers of prompts that came out byte-identical (a relabel or a rejected
    proposal just leaves some speculative answers unused, counted `unused`). Works on a deep copy: `work`
    and the segments are not touched."""
    n = cfg.group_size
    prompts, _ = segment_requests(work, train, segments, cfg)
    if prompts:
        caller.prefetch("segment", prompts, n, tokens["segment"])
    spec, scratch = work.copy(), Counter[str]()
    record_usage(spec, flat, cfg, iteration, scratch)
    proposals = (propose_operations(spec, cfg, iteration, trivial, scratch)
                 if iteration % cfg.maintenance.every == 0 else [])
    if candidates:
        proposals += propose_inductions(spec, candidates, cfg, iteration, trivial, scratch)
        name_uniquely(spec, proposals)
    valid = [p for p in proposals if invalid_reason(spec, p, cfg) is None]
    if valid:
        caller.prefetch("curator", curator_prompts(spec, valid), n, tokens["curator"])
    targets = {t for p in valid for t in p.targets}
    created = [skill for p in valid for skill in p.new_skills]
    refreshed = [spec.skills[sid]
                 for sid in refreshed_skills(spec, flat, [], cfg.contracts.refresh + len(targets))]
    contract_prompts, regex = contract_requests(spec, created + refreshed, cfg)
    if contract_prompts:
        caller.prefetch("contract", contract_prompts, n, tokens["contract"], regex)


def update_bank(bank: Bank, trajectories: Sequence[Trajectory], caller: ModelCaller | None,
                cfg: SkillBankConfig, iteration: int, max_tokens: Mapping[str, int] | None = None,
                candidates: Sequence[Mapping[str, Any]] = (),
                heldout_pool: Sequence[Trajectory] = ()) -> tuple[Bank, list[Sample], dict[str, Any]]:
    """One bank update on a shard of trajectories of this bank's key. `candidates`: the curriculum's
    exploration-stream tasks the solver reached (`coplay.skills.induction`), proposed as `induce`.
    `heldout_pool`: trajectories earlier updates held out (`skill_bank.heldout_window`); the held-out quality
    is measured on them and this update's own held-out ones, none of which it trains on.

    Returns the next bank version, the Samples of the `segment`, `contract` and `curator` adapters (rewards
    filled; empty without a model) and a report of counts and held-out figures. With `caller=None` (or
    `cfg.use_model` off) the deterministic policy decides: DP labels stand, every proposal is applied and
    the deterministic protocols stand.
    """
    tokens = {**DEFAULT_MAX_TOKENS, **(max_tokens or {})}
    counts: Counter[str] = Counter()
    usable = check_trajectories(bank, trajectories, counts)
    model = caller if cfg.use_model else None
    work = bank.copy()
    work.operations = []
    update_vocabulary(work, usable)
    train, heldout, heldout_is_train = split_heldout(usable, cfg.heldout_every)
    mine = {t.episode_id for t in usable}
    earlier = [t for t in check_trajectories(bank, heldout_pool, Counter()) if t.episode_id not in mine]
    if earlier:  # a lone trajectory of this update is then trained on only, measured on the earlier ones
        heldout, heldout_is_train = (earlier if heldout_is_train else [*heldout, *earlier]), False

    known = set(bank.skills)
    boundaries: dict[str, list[int]] = {}
    for traj in earlier:  # measured only: not counted among this update's boundaries
        boundaries[traj.episode_id] = propose_boundaries(traj.steps, cfg.boundaries.radius,
                                                         cfg.boundaries.threshold, known).positions
    for traj in usable:
        found = propose_boundaries(traj.steps, cfg.boundaries.radius, cfg.boundaries.threshold, known)
        boundaries[traj.episode_id] = found.positions
        counts["boundary_candidates"] += found.scored
        counts["boundaries_after_merge"] += found.merged
        counts["boundaries_kept"] += len(found.positions)
        counts["unknown_skill_ids"] += found.unknown_skill_ids

    prior = cfg.segmentation.duration_prior.get(work.game, 5.0)
    profiles = skill_profiles(work, prior)
    segments = {t.episode_id: segment_trajectory(t, boundaries[t.episode_id], work, prior,
                                                 cfg.segmentation.new_skill_penalty,
                                                 cfg.contracts.literal_window, cfg.segmentation.max_len,
                                                 profiles)
                for t in train}
    flat = [s for segs in segments.values() for s in segs]
    work.literal_counts, work.segments_seen, trivial = update_base_rates(
        work.literal_counts, work.segments_seen, [s.effects for s in flat],
        cfg.contracts.trivial_literal_rate)
    heldout_before = evaluate_bank(work, heldout, boundaries, cfg, shuffle_seed=None)

    samples: list[Sample] = []
    if model is not None and cfg.calls.prefetch and hasattr(model, "prefetch"):
        speculate(model, work, train, segments, flat, cfg, iteration, trivial, candidates, tokens)
    if model is not None:
        samples += segment_round(model, work, train, segments, heldout_before, cfg, iteration,
                                 tokens["segment"], counts)
    record_usage(work, flat, cfg, iteration, counts)
    record_play(work, usable, counts)

    if iteration % cfg.maintenance.every == 0:
        proposals = propose_operations(work, cfg, iteration, trivial, counts)
    else:
        proposals, counts["maintenance_skipped"] = [], 1
    if candidates:  # the curriculum's exploration stream: offered on every update, like the tasks it played
        proposals += propose_inductions(work, candidates, cfg, iteration, trivial, counts)
        name_uniquely(work, proposals)
    counts["proposals"] += len(proposals)

    def quality(candidate: Bank) -> float:
        return evaluate_bank(candidate, heldout, boundaries, cfg, shuffle_seed=None).quality

    work, curator_samples, records = curator_round(model, work, proposals, cfg, iteration, tokens["curator"],
                                                   quality, counts)
    samples += curator_samples
    for evicted in enforce_size(work, cfg.maintenance.max_skills):
        records.append({"op": "evict", "targets": [evicted], "new": [],
                        "evidence": {"max_skills": cfg.maintenance.max_skills},
                        "verdict": "size bound", "applied": True})
        counts["evicted"] += 1

    changed = sorted({sid for r in records if r["applied"] for sid in r["new"] if sid in work.skills})
    changed += refreshed_skills(work, flat, changed, cfg.contracts.refresh)
    if model is not None and changed:
        interim = evaluate_bank(work, heldout, boundaries, cfg, shuffle_seed=None)
        held_effects: dict[str, list[frozenset[str]]] = {}
        for seg in interim.segments:
            held_effects.setdefault(seg.label, []).append(seg.effects)
        samples += contract_round(model, work, changed, held_effects, cfg, iteration, tokens["contract"],
                                  counts)

    if model is not None and hasattr(model, "finish"):
        model.finish()  # a concurrent caller: land what is done, count prefetched prompts no round asked
    final = evaluate_bank(work, heldout, boundaries, cfg, shuffle_seed=iteration)
    work.version, work.iteration = bank.version + 1, iteration
    work.operations = records
    skill_rates = [s.stats.pass_rate for s in work.skills.values() if s.stats.uses]
    work.metrics = {
        **final.summary(), "size": len(work.skills), "heldout_is_train": heldout_is_train,
        "mean_skill_pass_rate": round(sum(skill_rates) / len(skill_rates), 4) if skill_rates else 0.0,
        "trivial_literals": sorted(trivial), "per_skill_heldout": final.per_skill,
    }
    report: dict[str, Any] = {
        "bank_key": work.bank_key, "version": work.version, "iteration": iteration,
        "trajectories": len(usable), "train_trajectories": len(train), "heldout_trajectories": len(heldout),
        "heldout_earlier": len(earlier),
        "steps": sum(len(t.steps) for t in usable), "model": model is not None,
        **dict(sorted(counts.items())), **work.metrics,
        "operations": [{k: r[k] for k in OPERATION_KEYS if k in r} for r in records],
        "maintenance": maintenance_summary(counts, records),
        "samples": dict(Counter(s.adapter for s in samples)),
    }
    return work, samples, report


def segment_with_bank(bank: Bank, trajectory: Trajectory, cfg: SkillBankConfig) -> list[Segment]:
    """The deterministic segmentation of one trajectory under a bank (for labelling teacher data)."""
    counts: Counter[str] = Counter()
    check_trajectories(bank, [trajectory], counts)
    found = propose_boundaries(trajectory.steps, cfg.boundaries.radius, cfg.boundaries.threshold,
                               set(bank.skills))
    return segment_all([trajectory], {trajectory.episode_id: found.positions}, bank, cfg)
