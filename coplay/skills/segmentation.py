"""Infer a segmentation: dynamic programming over candidate boundaries, each segment labelled with an
existing skill or NEW.

Label score of a segment of n steps (all terms deterministic):
  skill s: n/2 * (W_CONTRACT * (2c - 1) + W_INTENT * (2i - 1)) - W_DURATION * |ln(n / d_s)| + bonus
  NEW:     n/2 * W_INTENT * (2h - 1) - W_DURATION * |ln(n / d_game)| - new_skill_penalty
c = share of s's contract literals among the segment's effects (contract compatibility), i = intention fit
(the steps' tags weighed by s's tag distribution), h = share of the majority tag, d_s = s's mean duration
(the per-game prior d_game until it has uses), bonus = the `segment` adapter's ranking when it was asked.
The DP keeps the best total over segmentations whose cuts are candidate boundaries (plus forced cuts every
`max_len` steps), looking back a bounded number of candidates: cost is linear in steps.
Standard library only; never imports ray or torch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from coplay.skills.boundaries import intention_tag
from coplay.skills.literals import literals_of_views, satisfied_share, segment_windows, window_view
from coplay.skills.schema import Bank, Instance
from coplay.types import Step, Trajectory

NEW = "NEW"
W_CONTRACT, W_INTENT, W_DURATION = 1.0, 1.0, 1.0
MAX_LOOKBACK = 8


@dataclass
class Segment:
    """Steps [start, end) of one trajectory with their label and the evidence behind it."""

    episode_id: str
    start: int
    end: int
    label: str
    effects: frozenset[str]
    tag: str
    reward: float
    positive_reward: float
    start_view: dict[str, float | bool]
    end_view: dict[str, float | bool]
    candidates: list[tuple[str, float]] = field(default_factory=list)  # label scores, best first

    @property
    def length(self) -> int:
        return self.end - self.start

    @property
    def margin(self) -> float:
        return self.candidates[0][1] - self.candidates[1][1] if len(self.candidates) > 1 else math.inf

    def instance(self, iteration: int) -> Instance:
        return Instance(effects=sorted(self.effects), duration=self.length, reward=self.reward, tag=self.tag,
                        episode_id=self.episode_id, start=self.start, iteration=iteration,
                        start_view=_rounded(self.start_view), end_view=_rounded(self.end_view))


def _rounded(view: Mapping[str, float | bool]) -> dict[str, float | bool]:
    return {k: v if isinstance(v, bool) else round(float(v), 4) for k, v in view.items()}


@dataclass(frozen=True)
class SkillProfile:
    """What the scorer needs of a skill, precomputed once per segmentation."""

    skill_id: str
    literals: tuple[str, ...]
    tag_weight: dict[str, float]  # p(tag) / max p
    duration: float


def skill_profiles(bank: Bank, prior: float) -> list[SkillProfile]:
    profiles = []
    for skill_id in sorted(bank.skills):
        skill = bank.skills[skill_id]
        top = max(skill.tags.values(), default=0)
        weights = {t: c / top for t, c in skill.tags.items()} if top else {}
        duration = skill.stats.mean_duration if skill.stats.uses and skill.stats.mean_duration > 0 else prior
        profiles.append(SkillProfile(skill_id, tuple(skill.contract.literals), weights, duration))
    return profiles


class _TrajectoryIndex:
    """Prefix sums over one trajectory so any segment's tag counts and rewards cost O(tags)."""

    def __init__(self, steps: Sequence[Step]) -> None:
        self.steps = steps
        self.tags = [intention_tag(s.intention) for s in steps]
        self.tag_names = sorted(set(self.tags))
        self.prefix = {t: [0] for t in self.tag_names}
        self.reward = [0.0]
        self.positive = [0.0]
        for s, tag in zip(steps, self.tags, strict=True):
            for t in self.tag_names:
                self.prefix[t].append(self.prefix[t][-1] + (tag == t))
            self.reward.append(self.reward[-1] + float(s.reward))
            self.positive.append(self.positive[-1] + max(0.0, float(s.reward)))

    def tag_counts(self, i: int, j: int) -> dict[str, int]:
        return {t: c for t in self.tag_names if (c := self.prefix[t][j] - self.prefix[t][i])}


def _duration_term(n: int, duration: float) -> float:
    return -W_DURATION * abs(math.log(n / max(duration, 1e-6)))


def label_scores(n: int, effects: frozenset[str], tags: Mapping[str, int], profiles: Sequence[SkillProfile],
                 prior: float, new_penalty: float,
                 bonus: Mapping[str, float] | None = None) -> list[tuple[str, float]]:
    """Every label's score for one segment, best first (ties: NEW last, then by id)."""
    majority = max(tags.values(), default=0) / n
    scores = [(NEW, n / 2 * W_INTENT * (2 * majority - 1) + _duration_term(n, prior) - new_penalty)]
    for p in profiles:
        c = satisfied_share(p.literals, effects)
        fit = sum(count * p.tag_weight.get(tag, 0.0) for tag, count in tags.items()) / n
        scores.append((p.skill_id, n / 2 * (W_CONTRACT * (2 * c - 1) + W_INTENT * (2 * fit - 1))
                       + _duration_term(n, p.duration)))
    if bonus:
        scores = [(label, s + bonus.get(label, 0.0)) for label, s in scores]
    return sorted(scores, key=lambda x: (-x[1], x[0] == NEW, x[0]))


def cut_points(n_steps: int, boundaries: Sequence[int], max_len: int) -> list[int]:
    """0, the candidate boundaries, forced cuts so no gap exceeds `max_len`, and the end."""
    points = [0]
    for b in sorted(set(boundaries)) + [n_steps]:
        if not 0 < b <= n_steps:
            continue
        while b - points[-1] > max_len:
            points.append(points[-1] + max_len)
        if b > points[-1]:
            points.append(b)
    return points


def make_segment(trajectory: Trajectory, index: _TrajectoryIndex, i: int, j: int, window: int) -> Segment:
    start, end = segment_windows(trajectory.steps[i:j], window)
    start_view, end_view = window_view(start, "first"), window_view(end, "last")
    tags = index.tag_counts(i, j)
    tag = min(tags, key=lambda t: (-tags[t], t)) if tags else ""
    return Segment(trajectory.episode_id, i, j, NEW, literals_of_views(start_view, end_view), tag,
                   index.reward[j] - index.reward[i], index.positive[j] - index.positive[i], start_view,
                   end_view)


def segment_trajectory(trajectory: Trajectory, boundaries: Sequence[int], bank: Bank, prior: float,
                       new_penalty: float, window: int, max_len: int,
                       profiles: Sequence[SkillProfile] | None = None) -> list[Segment]:
    """The best-scoring segmentation of one trajectory (empty for an empty trajectory)."""
    steps = trajectory.steps
    if not steps:
        return []
    profiles = skill_profiles(bank, prior) if profiles is None else profiles
    index = _TrajectoryIndex(steps)
    points = cut_points(len(steps), boundaries, max_len)
    best = [-math.inf] * len(points)
    back: list[tuple[int, Segment | None]] = [(-1, None)] * len(points)
    best[0] = 0.0
    for b in range(1, len(points)):
        for a in range(b - 1, max(-1, b - 1 - MAX_LOOKBACK), -1):
            n = points[b] - points[a]
            if n > max_len and a < b - 1:
                break
            seg = make_segment(trajectory, index, points[a], points[b], window)
            seg.candidates = label_scores(n, seg.effects, index.tag_counts(points[a], points[b]), profiles,
                                          prior, new_penalty)
            seg.label = seg.candidates[0][0]
            total = best[a] + seg.candidates[0][1]
            if total > best[b] + 1e-12:
                best[b], back[b] = total, (a, seg)
    segments: list[Segment] = []
    b = len(points) - 1
    while b > 0:
        a, seg = back[b]
        assert seg is not None
        segments.append(seg)
        b = a
    return segments[::-1]


def relabel(segment: Segment, bonus: Mapping[str, float], profiles: Sequence[SkillProfile], prior: float,
            new_penalty: float, tags: Mapping[str, int]) -> str:
    """The label a segment gets when the `segment` adapter's ranking adds `bonus` to the scores."""
    scores = label_scores(segment.length, segment.effects, tags, profiles, prior, new_penalty, bonus)
    return scores[0][0]


def segment_tags(trajectory: Trajectory, segment: Segment) -> dict[str, int]:
    """Intention tag counts of a segment's steps."""
    counts: dict[str, int] = {}
    for s in trajectory.steps[segment.start:segment.end]:
        tag = intention_tag(s.intention)
        counts[tag] = counts.get(tag, 0) + 1
    return counts


def coverage(segments: Sequence[Segment]) -> float:
    """Share of steps inside segments labelled with a skill."""
    total = sum(s.length for s in segments)
    return sum(s.length for s in segments if s.label != NEW) / total if total else 0.0
