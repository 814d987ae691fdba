"""Held-out evaluation of a bank: segment trajectories the bank did not learn from and measure how well
the skills' contracts hold there.

pass rate: share of skill-labelled held-out segments whose skill's contract passes; coverage: share of steps
inside skill-labelled segments; shuffled pass rate: the same contracts checked on randomly placed windows of
the same lengths (the chance level a contract must beat), for the bank and per skill, with the counts behind
each rate (the report judges a rate against its chance level, `coplay.report.chance`); quality Q = pass rate
x coverage - size penalty.
Standard library only; never imports ray or torch.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from coplay.config import SkillBankConfig
from coplay.skills.contracts import instance_passes
from coplay.skills.literals import segment_literals
from coplay.skills.rewards import bank_quality
from coplay.skills.schema import Bank
from coplay.skills.segmentation import NEW, Segment, segment_trajectory, skill_profiles
from coplay.types import Trajectory

SHUFFLE_DRAWS = 3


@dataclass
class HeldOutEval:
    """A bank measured on held-out trajectories."""

    segments: list[Segment] = field(default_factory=list)
    pass_rate: float = 0.0
    shuffled_pass_rate: float = 0.0
    coverage: float = 0.0
    quality: float = 0.0
    per_skill: dict[str, dict[str, float]] = field(default_factory=dict)

    shuffled_draws: int = 0

    def summary(self) -> dict[str, float]:
        """The bank's metrics: the rates, and the counts behind them (skill-labelled held-out segments, the
        shuffled windows drawn) so a reader can tell a rate from its chance level with its uncertainty."""
        return {"heldout_pass_rate": round(self.pass_rate, 4),
                "shuffled_pass_rate": round(self.shuffled_pass_rate, 4),
                "coverage": round(self.coverage, 4), "quality": round(self.quality, 4),
                "heldout_segments": len(self.segments),
                "heldout_labelled": sum(int(e["n"]) for e in self.per_skill.values()),
                "shuffled_draws": self.shuffled_draws}


def segment_all(trajectories: Sequence[Trajectory], boundaries: Mapping[str, list[int]], bank: Bank,
                cfg: SkillBankConfig) -> list[Segment]:
    """Segments of every trajectory under `bank` (deterministic: no model)."""
    prior = cfg.segmentation.duration_prior.get(bank.game, 5.0)
    profiles = skill_profiles(bank, prior)
    out: list[Segment] = []
    for traj in trajectories:
        out.extend(segment_trajectory(traj, boundaries.get(traj.episode_id, []), bank, prior,
                                      cfg.segmentation.new_skill_penalty, cfg.contracts.literal_window,
                                      cfg.segmentation.max_len, profiles))
    return out


def evaluate_bank(bank: Bank, trajectories: Sequence[Trajectory], boundaries: Mapping[str, list[int]],
                  cfg: SkillBankConfig, shuffle_seed: int | None) -> HeldOutEval:
    """Segment the held-out trajectories with `bank` and measure its contracts there (the shuffled
    baseline only with a `shuffle_seed`)."""
    segments = segment_all(trajectories, boundaries, bank, cfg)
    labelled = [s for s in segments if s.label != NEW and s.label in bank.skills]
    total = sum(s.length for s in segments)
    covered = sum(s.length for s in labelled)
    passes = [instance_passes(bank.skills[s.label].contract.literals, s.effects, cfg.contracts.pass_threshold)
              for s in labelled]
    per_skill: dict[str, dict[str, float]] = {}
    for seg, ok in zip(labelled, passes, strict=True):
        entry = per_skill.setdefault(seg.label, {"n": 0, "passes": 0})
        entry["n"] += 1
        entry["passes"] += ok
    for entry in per_skill.values():
        entry["pass_rate"] = entry["passes"] / entry["n"]
    rate = sum(passes) / len(passes) if passes else 0.0
    cov = covered / total if total else 0.0
    shuffled = ({} if shuffle_seed is None
                else shuffled_passes(bank, labelled, trajectories, cfg, shuffle_seed))
    for label, (hits, draws) in shuffled.items():
        per_skill[label].update(shuffled_pass_rate=hits / draws if draws else 0.0, shuffled_draws=draws)
    draws = sum(d for _, d in shuffled.values())
    return HeldOutEval(segments=segments, pass_rate=rate,
                       shuffled_pass_rate=sum(h for h, _ in shuffled.values()) / draws if draws else 0.0,
                       coverage=cov,
                       quality=bank_quality(rate, cov, len(bank.skills), cfg.maintenance.size_penalty),
                       per_skill=per_skill, shuffled_draws=draws)


def shuffled_pass_rate(bank: Bank, labelled: Sequence[Segment], trajectories: Sequence[Trajectory],
                       cfg: SkillBankConfig, seed: int) -> float:
    """The bank's chance level: its contracts' pass rate over all shuffled windows (`shuffled_passes`)."""
    counts = shuffled_passes(bank, labelled, trajectories, cfg, seed).values()
    draws = sum(d for _, d in counts)
    return sum(h for h, _ in counts) / draws if draws else 0.0


def shuffled_passes(bank: Bank, labelled: Sequence[Segment], trajectories: Sequence[Trajectory],
                    cfg: SkillBankConfig, seed: int) -> dict[str, tuple[int, int]]:
    """Each labelled segment's contract checked on `SHUFFLE_DRAWS` random windows of the same length drawn
    from the held-out trajectories (uniform over start positions where the window fits): per skill, the
    windows where it passed and the windows drawn."""
    rng = random.Random(seed)
    usable = [t for t in trajectories if t.steps]
    out: dict[str, tuple[int, int]] = {}
    if not labelled or not usable:
        return out
    for seg in labelled:
        fits = [t for t in usable if len(t.steps) >= seg.length]
        if not fits:
            continue
        weights = [len(t.steps) - seg.length + 1 for t in fits]
        for _ in range(SHUFFLE_DRAWS):
            traj = rng.choices(fits, weights=weights)[0]
            start = rng.randrange(len(traj.steps) - seg.length + 1)
            effects = segment_literals(traj.steps[start:start + seg.length], cfg.contracts.literal_window)
            hit = instance_passes(bank.skills[seg.label].contract.literals, effects,
                                  cfg.contracts.pass_threshold)
            hits, draws = out.get(seg.label, (0, 0))
            out[seg.label] = (hits + int(hit), draws + 1)
    return out


def evaluate_on_trajectories(bank: Bank, trajectories: Sequence[Trajectory], cfg: SkillBankConfig,
                             shuffle_seed: int = 0) -> HeldOutEval:
    """`evaluate_bank` on trajectories of the bank's key (boundaries proposed here): e.g. fresh held-out
    seeds."""
    from coplay.skills.boundaries import propose_boundaries

    known = set(bank.skills)
    boundaries = {t.episode_id: propose_boundaries(t.steps, cfg.boundaries.radius, cfg.boundaries.threshold,
                                                   known).positions for t in trajectories}
    return evaluate_bank(bank, [t for t in trajectories if t.steps], boundaries, cfg, shuffle_seed)
