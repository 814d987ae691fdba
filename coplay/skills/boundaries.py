"""Boundary proposal: where in a trajectory one behaviour may end and the next begin.

Every position b (a boundary just before step b, 1 <= b < T) is scored from the step before it:
intention-tag changes, boolean feature flips, reward spikes, game events (numeric features jumping far more
than they usually do in this trajectory) and the active skill's success / abort / switch or a change of the
active skill. Candidates within `radius` of a stronger one are merged into it (non-maximum suppression), and
only those scoring at least `threshold` are kept. Standard library only; never imports ray or torch.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from coplay.types import Step

INTENTION_CHANGE = 1.0
FLIP_EACH, FLIP_CAP = 0.5, 1.0
REWARD_SPIKE = 0.5
EVENT_EACH, EVENT_CAP = 0.25, 0.5
SKILL_EVENT = 2.0
SKILL_CHANGE = 1.0
SPIKE_SIGMAS = 2.0
EVENT_RATIO = 3.0


@dataclass
class Boundaries:
    """Kept boundary positions (ascending) and how many candidates each stage had."""

    positions: list[int]
    scores: dict[int, float] = field(default_factory=dict)
    scored: int = 0  # positions with a positive score
    merged: int = 0  # after merging within the radius
    unknown_skill_ids: int = 0


def intention_tag(intention: str) -> str:
    """The TAG of `TAG subgoal` (upper case), or "" when there is none."""
    head = intention.strip().split(maxsplit=1)
    return head[0].upper().rstrip(":") if head else ""


def _is_bool(value: object) -> bool:
    return isinstance(value, bool)


def score_positions(steps: Sequence[Step],
                    known_skills: Collection[str] = ()) -> tuple[dict[int, float], int]:
    """Score of every boundary position with a positive score, and the count of unknown skill ids seen."""
    n = len(steps)
    scores: dict[int, float] = {}
    if n < 2:
        return scores, 0
    rewards = [float(s.reward) for s in steps]
    mean_r = statistics.fmean(rewards)
    std_r = statistics.pstdev(rewards)
    typical_jump: dict[str, float] = {}
    for s in steps:
        for name, after in s.features_after.items():
            before = s.features_before.get(name)
            if before is not None and not _is_bool(after) and not _is_bool(before):
                typical_jump[name] = typical_jump.get(name, 0.0) + abs(float(after) - float(before))
    typical_jump = {k: v / n for k, v in typical_jump.items()}
    unknown = 0
    for s in steps:
        if s.skill_id is not None and known_skills and s.skill_id not in known_skills:
            unknown += 1
    for b in range(1, n):
        prev, cur = steps[b - 1], steps[b]
        score = 0.0
        if intention_tag(prev.intention) != intention_tag(cur.intention):
            score += INTENTION_CHANGE
        flips = sum(1 for k, v in prev.features_after.items()
                    if _is_bool(v) and k in prev.features_before and prev.features_before[k] != v)
        score += min(FLIP_CAP, FLIP_EACH * flips)
        if std_r > 0 and abs(rewards[b - 1] - mean_r) > SPIKE_SIGMAS * std_r:
            score += REWARD_SPIKE
        events = 0
        for name, mean_jump in typical_jump.items():
            if mean_jump > 0 and name in prev.features_before and name in prev.features_after:
                jump = abs(float(prev.features_after[name]) - float(prev.features_before[name]))
                events += jump > EVENT_RATIO * mean_jump
        score += min(EVENT_CAP, EVENT_EACH * events)
        if prev.skill_event in ("success", "abort", "switch"):
            score += SKILL_EVENT
        if _known(prev.skill_id, known_skills) != _known(cur.skill_id, known_skills):
            score += SKILL_CHANGE
        if score > 0:
            scores[b] = score
    return scores, unknown


def _known(skill_id: str | None, known: Collection[str]) -> str | None:
    return skill_id if skill_id is not None and (not known or skill_id in known) else None


def merge_within_radius(scores: dict[int, float], radius: int) -> dict[int, float]:
    """Keep a candidate only if no stronger one (ties: the earlier) lies within `radius` steps; the kept
    candidate absorbs nothing else, so scores stay comparable to the threshold."""
    kept: dict[int, float] = {}
    for pos in sorted(scores, key=lambda p: (-scores[p], p)):
        if all(abs(pos - k) > radius for k in kept):
            kept[pos] = scores[pos]
    return kept


def propose_boundaries(steps: Sequence[Step], radius: int, threshold: float,
                       known_skills: Collection[str] = ()) -> Boundaries:
    """Score, merge within `radius`, keep those scoring >= `threshold`."""
    scores, unknown = score_positions(steps, known_skills)
    merged = merge_within_radius(scores, radius)
    kept = {p: s for p, s in merged.items() if s >= threshold}
    return Boundaries(sorted(kept), kept, len(scores), len(merged), unknown)
