"""Two of the three model rounds of a bank update: `segment` (rank labels of close calls) and `contract`
(write a new skill's protocol); the `curator` round is `coplay.skills.curation`.

Each round builds prompts, calls the adapter with G samples per prompt, applies the first sample's answer
when it parses and validates, counts what does not, and fills every sample's reward (`rewards.py`).
Without a model the callers of these functions use the deterministic policy instead.
Standard library only; never imports ray or torch.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from coplay.config import SkillBankConfig
from coplay.skills.caller import ChatMessages, ModelCaller, call_adapter
from coplay.skills.contract_grammar import contract_regex
from coplay.skills.contracts import dominant_tag, learn_contract, literal_frequencies, pass_rate
from coplay.skills.heldout import HeldOutEval
from coplay.skills.literals import window_view
from coplay.skills.prompts import (
    AnswerError,
    contract_prompt,
    parse_protocol,
    parse_ranking,
    read_effects,
    segment_prompt,
)
from coplay.skills.rewards import contract_reward, segment_reward
from coplay.skills.schema import Bank, Skill
from coplay.skills.segmentation import NEW, Segment, relabel, segment_tags, skill_profiles
from coplay.types import Sample, Trajectory

CANDIDATES_SHOWN = 3


def group_prefix(bank: Bank, iteration: int) -> str:
    """Group ids are unique per bank key, the version being built and the iteration."""
    return f"{bank.bank_key}/v{bank.version + 1}/it{iteration}"


def ranking_bonus(ranking: Sequence[str] | None, weight: float) -> dict[str, float]:
    """The first-ranked label gets `weight`, the last 0, linearly in between."""
    if not ranking:
        return {}
    m = len(ranking)
    return {label: weight * ((m - 1 - r) / (m - 1) if m > 1 else 1.0) for r, label in enumerate(ranking)}


def segment_requests(bank: Bank, train: Sequence[Trajectory], segments: Mapping[str, list[Segment]],
                     cfg: SkillBankConfig) -> tuple[list[ChatMessages], list[tuple[Any, ...]]]:
    """The `segment` prompts of the segments whose label margin is small (closest first, at most
    `segmentation.max_prompts`) and, per prompt, (trajectory, segment, labels shown, tags): one builder for
    the round and for `coplay.skills.update.speculate`, which sends them first."""
    if not bank.skills or cfg.segmentation.max_prompts == 0:
        return [], []
    by_id = {t.episode_id: t for t in train}
    close = sorted(((seg.margin, seg.episode_id, seg.start, seg) for segs in segments.values() for seg in segs
                    if seg.margin < cfg.segmentation.margin),
                   key=lambda x: x[:3])[:cfg.segmentation.max_prompts]
    prompts, metas = [], []
    for _, episode_id, _, seg in close:
        traj = by_id[episode_id]
        labels = [label for label, _ in seg.candidates[:CANDIDATES_SHOWN]]  # deterministic score order
        if NEW not in labels:
            labels.append(NEW)
        shown = [bank.skills[label] for label in labels if label != NEW]
        tags = segment_tags(traj, seg)
        prompts.append(segment_prompt(bank.game, tags, [s.action for s in traj.steps[seg.start:seg.end]],
                                      seg.effects, seg.reward, seg.length, shown, labels))
        metas.append((traj, seg, labels, tags))
    return prompts, metas


def segment_round(caller: ModelCaller, bank: Bank, train: Sequence[Trajectory],
                  segments: Mapping[str, list[Segment]], heldout_before: HeldOutEval, cfg: SkillBankConfig,
                  iteration: int, max_tokens: int, counts: Counter[str]) -> list[Sample]:
    """Ask the `segment` adapter about segments whose label margin is small; relabel by its first sample."""
    prompts, metas = segment_requests(bank, train, segments, cfg)
    if not prompts:
        return []
    prior = cfg.segmentation.duration_prior.get(bank.game, 5.0)
    profiles = skill_profiles(bank, prior)
    groups = call_adapter(caller, "segment", prompts, cfg.group_size, max_tokens,
                          group_prefix(bank, iteration))
    heldout_by_skill: dict[str, list[frozenset[str]]] = {}
    for seg in heldout_before.segments:
        heldout_by_skill.setdefault(seg.label, []).append(seg.effects)
    train_by_skill: dict[str, list[frozenset[str]]] = {}
    for segs in segments.values():
        for seg in segs:
            train_by_skill.setdefault(seg.label, []).append(seg.effects)
    samples: list[Sample] = []
    for (traj, seg, labels, tags), group in zip(metas, groups, strict=True):
        cache: dict[str, float] = {}
        chosen_labels = []
        for sample in group:
            ranking = parse_ranking(sample.completion_text, labels)
            if ranking is None:
                counts["segment_unparseable"] += 1
            label = relabel(seg, ranking_bonus(ranking, cfg.segmentation.rank_weight), profiles, prior,
                            cfg.segmentation.new_skill_penalty, tags)
            if label not in cache:
                cache[label] = _implied_segment_reward(bank, segments[traj.episode_id], seg, label,
                                                       train_by_skill, heldout_by_skill, cfg)
            sample.reward = cache[label]
            sample.meta.update({"bank_key": bank.bank_key, "iteration": iteration,
                                "episode_id": traj.episode_id, "start": seg.start, "end": seg.end,
                                "labels": labels, "ranking": ranking, "label": label})
            chosen_labels.append(label)
            samples.append(sample)
        counts["segment_prompts"] += 1
        if chosen_labels[0] != seg.label:
            counts["segment_relabels"] += 1
            seg.label = chosen_labels[0]
    return samples


def _implied_segment_reward(bank: Bank, trajectory_segments: Sequence[Segment], changed: Segment,
                            label: str, train_by_skill: Mapping[str, list[frozenset[str]]],
                            heldout_by_skill: Mapping[str, list[frozenset[str]]],
                            cfg: SkillBankConfig) -> float:
    """The `segment` reward (docs/rewards.md) of the segmentation in which `changed` carries `label`."""
    labels = [label if s is changed else s.label for s in trajectory_segments]
    rates = []
    for skill_id in sorted({lab for lab in labels if lab != NEW}):
        held = heldout_by_skill.get(skill_id, [])
        if not held:
            continue
        effects = list(train_by_skill.get(skill_id, []))
        if changed.label == skill_id and label != skill_id and changed.effects in effects:
            effects.remove(changed.effects)
        elif label == skill_id and changed.label != skill_id:
            effects.append(changed.effects)
        effects += [e.effects for e in bank.skills[skill_id].evidence]
        contract = learn_contract(effects, cfg.contracts.eff_freq)
        rates.append(pass_rate(contract.literals, held, cfg.contracts.pass_threshold))
    inside = sum(s.positive_reward for s, lab in zip(trajectory_segments, labels, strict=True) if lab != NEW)
    total = sum(s.positive_reward for s in trajectory_segments)
    return segment_reward(sum(rates) / len(rates) if rates else 0.0, inside, total)


def skill_contract_prompt(bank: Bank, skill: Skill) -> ChatMessages:
    """The `contract` prompt of one skill, built from its evidence (one builder for the round and for
    teacher examples)."""
    effects = [e.effects for e in skill.evidence]
    start = window_view([e.start_view for e in skill.evidence], "first")
    return contract_prompt(bank.game, dominant_tag(skill.tags), len(skill.evidence),
                           literal_frequencies(effects), bank.features, start, skill.stats.mean_duration)


def contract_requests(bank: Bank, skills: Sequence[Skill],
                      cfg: SkillBankConfig) -> tuple[list[ChatMessages], str | None]:
    """The `contract` prompts of `skills` and the grammar they are sampled under (None: unconstrained); one
    builder for the round and for `coplay.skills.update.speculate`."""
    regex = contract_regex(bank.features) if cfg.constrained_contracts else None
    return [skill_contract_prompt(bank, skill) for skill in skills], regex


def contract_round(caller: ModelCaller, bank: Bank, skill_ids: Sequence[str],
                   heldout_effects: Mapping[str, list], cfg: SkillBankConfig, iteration: int,
                   max_tokens: int, counts: Counter[str]) -> list[Sample]:
    """Ask the `contract` adapter to write each listed skill's protocol; the first sample's valid answer
    replaces the deterministic protocol, an invalid one is rejected and counted (the deterministic stands)."""
    skills: list[Skill] = [bank.skills[i] for i in skill_ids]
    if not skills:
        return []
    prompts, regex = contract_requests(bank, skills, cfg)
    groups = call_adapter(caller, "contract", prompts, cfg.group_size, max_tokens,
                          group_prefix(bank, iteration), regex=regex)
    samples: list[Sample] = []
    for skill, group in zip(skills, groups, strict=True):
        held = heldout_effects.get(skill.id, [])
        reference = "heldout" if held else "train"
        ref_effects = held or [e.effects for e in skill.evidence]
        first: dict[str, Any] | None = None
        for j, sample in enumerate(group):
            try:
                protocol, proposed = parse_protocol(sample.completion_text, bank.features)
                valid, error = True, ""
            except AnswerError as exc:  # rejected as a protocol; its stated effects still earn their F1
                protocol, valid, error = None, False, str(exc)
                proposed = read_effects(sample.completion_text, bank.features) or []
                counts["contract_invalid_samples"] += 1
            sample.reward = contract_reward(proposed, ref_effects, cfg.contracts.eff_freq, valid)
            sample.meta.update({"bank_key": bank.bank_key, "iteration": iteration, "skill_id": skill.id,
                                "valid": valid, "error": error, "reference": reference})
            if j == 0:
                first = protocol
            samples.append(sample)
        if first is None:
            counts["contract_rejected"] += 1
            continue
        counts["contract_accepted"] += 1
        skill.summary, skill.plan = first["summary"], list(first["plan"])
        skill.preconditions, skill.success, skill.abort = (first["preconditions"], first["success"],
                                                           first["abort"])
        skill.protocol_source = f"contract@{group[0].sample_id}"
    return samples
