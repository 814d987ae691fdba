"""Retrieval: rank a bank's skills for the current view and render the top k as prompt text; and the
runtime status of an active skill (docs/agents.md step 1 and the abort rule).

score = W_RELEVANCE x relevance + W_PRECONDITIONS x [preconditions hold now] + W_PASS x pass rate, where
relevance is the share of the skill's words (name, summary, intention tags) found in the observation text
and the agent's current intention tag. Deterministic; standard library only; never imports ray or torch.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from coplay.skills.literals import FeatureView
from coplay.skills.prompts import render_skill
from coplay.skills.schema import Bank, Skill

W_RELEVANCE, W_PRECONDITIONS, W_PASS = 1.0, 1.0, 1.0
ABORT_DURATION_FACTOR = 2.0
_WORD = re.compile(r"[a-z][a-z0-9]+")


@dataclass(frozen=True)
class RankedSkill:
    """A skill with the parts of its retrieval score."""

    skill: Skill
    score: float
    relevance: float
    preconditions_hold: bool
    pass_rate: float


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower().replace("_", " ")))


def rank_skills(bank: Bank, features: FeatureView, observation: str = "", intention: str = "",
                k: int | None = None) -> list[RankedSkill]:
    """Skills best first (ties by id); `k` keeps the top k."""
    context = _words(observation) | _words(intention)
    ranked = []
    for skill_id in sorted(bank.skills):
        skill = bank.skills[skill_id]
        words = _words(f"{skill.name} {skill.summary} {' '.join(skill.tags)}")
        relevance = len(words & context) / len(words) if words else 0.0
        holds = skill.expression("preconditions").holds(features)
        rate = skill.stats.pass_rate
        score = W_RELEVANCE * relevance + W_PRECONDITIONS * holds + W_PASS * rate
        ranked.append(RankedSkill(skill, score, relevance, holds, rate))
    ranked.sort(key=lambda r: (-r.score, r.skill.id))
    return ranked[:k] if k is not None else ranked


def render_ranked(ranked: Sequence[RankedSkill]) -> str:
    """The prompt block the `retrieve` adapter reads: each skill, whether its preconditions hold now."""
    if not ranked:
        return "No skills yet. Answer SKILL: NONE."
    blocks = [f"{render_skill(r.skill)}\n  preconditions hold now: {'yes' if r.preconditions_hold else 'no'}"
              for r in ranked]
    return "Skills (answer SKILL: <id> or SKILL: NONE):\n" + "\n".join(blocks)


def skill_status(skill: Skill, features: FeatureView, steps_active: int) -> str:
    """"success", "abort" or "running" for an active skill (docs/agents.md): success when its success
    expression holds; abort when its preconditions stop holding before success, its abort expression holds,
    or it has run past 2x its mean duration."""
    if skill.expression("success").holds(features):
        return "success"
    if skill.expression("abort").holds(features) or not skill.expression("preconditions").holds(features):
        return "abort"
    limit = ABORT_DURATION_FACTOR * skill.stats.mean_duration
    if limit > 0 and steps_active > limit:
        return "abort"
    return "running"


def skills_by_id(bank: Bank, ids: Sequence[str]) -> Mapping[str, Skill]:
    """Several skills at once; an unknown id raises `UnknownSkillError` naming it."""
    return {i: bank.get(i) for i in ids}
