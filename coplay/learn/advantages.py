"""GRPO group advantages (docs/rewards.md), as pure functions over rewards already set on `Sample`s.

Group-normalised advantage of member i of a group with rewards R_1..R_G:

    A_i = (R_i - mean(R)) / (std(R) + 1e-6)           std: population std (ddof = 0)
    A_i = 0 for every member when G == 1 or all R are equal (never noise from a degenerate group)

Leave-one-out variant (`retrieve`): the baseline is the mean of the *other* members,

    A_i = (R_i - mean_{j != i} R_j) / (std(R) + 1e-6)

Groups per adapter:
- `act`: episodes of the model's policy that share a start state and line-up (`Trajectory.group`, set by
  self-play plans; else (game, seed)) and seat (hence role: advantages are normalised per role within a
  group, as SPIRAL's role-conditioned advantages), compared at the same step index t; an episode that ended
  before t does not enter step t's statistics.
  `Sample.reward` of an `act` sample is its step's return-to-go R_t (see `rewards.py`).
  State grouping (`Trajectory.kind`, docs/rewards.md): a branch's group is its anchor, and only its step 0
  (the model's decision at the anchor; R_0 = its reward + the continuation's return) enters; a trunk's `act`
  samples enter no group (it stands alone at its start state, and comparing it per step index is the bias
  state grouping removes: its states become the next iteration's anchors instead).
- `retrieve`: all retrieval samples of the same game and role in the learner step, leave-one-out baseline;
  never a branch's (the continuation cuts the chosen skill's activation short, so its reward would not mean
  what it means elsewhere).
- `segment`, `contract`, `curator`: samples sharing `Sample.group_id`.

Pure Python: no torch, no ray.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable

from coplay.types import Sample, Trajectory

STD_EPS = 1e-6


def _degenerate(values: list[float]) -> bool:
    return len(values) < 2 or max(values) - min(values) <= 1e-12 * max(1.0, abs(max(values)))


def _std(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def group_normalized(values: list[float]) -> list[float]:
    """A_i = (R_i - mean) / (std + 1e-6); zeros for a group of one or of equal rewards."""
    if _degenerate(values):
        return [0.0] * len(values)
    mean, std = sum(values) / len(values), _std(values)
    return [(v - mean) / (std + STD_EPS) for v in values]


def leave_one_out(values: list[float]) -> list[float]:
    """A_i = (R_i - mean of the others) / (std + 1e-6); zeros for a group of one or of equal rewards."""
    if _degenerate(values):
        return [0.0] * len(values)
    total, n, std = sum(values), len(values), _std(values)
    return [(v - (total - v) / (n - 1)) / (std + STD_EPS) for v in values]


def _reward(sample: Sample) -> float:
    if sample.reward is None:
        raise ValueError(f"sample {sample.sample_id!r} ({sample.adapter}) has no reward; "
                         f"assign rewards first")
    return float(sample.reward)


def trains(traj: Trajectory) -> bool:
    """Whether a trajectory's samples may train: the policy's own seats (`model`) and state grouping's
    branches (policy `model+<continuation>`: the model decided at step 0). Opponents' seats never do."""
    return traj.policy == "model" or traj.kind == "branch"


def act_steps(traj: Trajectory) -> int:
    """How many leading steps of `traj` have trainable `act` samples: all of an episode, none of a trunk,
    the first of a branch (module docstring)."""
    return {"trunk": 0, "branch": 1}.get(traj.kind, len(traj.steps))


def act_advantages(trajectories: Iterable[Trajectory]) -> dict[str, float]:
    """Advantages of `act` samples: groups keyed by (group or (game, seed), seat, role, step index t);
    a branch's group is its anchor at t = 0 (same-state groups)."""
    groups: dict[tuple[str, str, str, str, int], list[Sample]] = defaultdict(list)
    for traj in trajectories:
        if not trains(traj):
            continue
        by_id = {s.sample_id: s for s in traj.samples}
        for t, step in enumerate(traj.steps[:act_steps(traj)]):
            for sid in step.sample_ids:
                sample = by_id.get(sid)
                if sample is not None and sample.adapter == "act":
                    group = traj.group or f"{traj.game}/seed{traj.seed}"
                    seat = traj.seat if traj.group else ""  # by-seed groups pool the seats of a role
                    groups[(group, seat, traj.role, t)].append(sample)
    out: dict[str, float] = {}
    for members in groups.values():
        for sample, adv in zip(members, group_normalized([_reward(s) for s in members]), strict=True):
            out[sample.sample_id] = adv
    return out


def retrieve_advantages(trajectories: Iterable[Trajectory]) -> dict[str, float]:
    """Advantages of `retrieve` samples: one group per (game, role), leave-one-out baseline."""
    groups: dict[tuple[str, str], list[Sample]] = defaultdict(list)
    for traj in trajectories:
        if not trains(traj) or traj.kind == "branch":
            continue
        for sample in traj.samples:
            if sample.adapter == "retrieve":
                groups[(traj.game, traj.role)].append(sample)
    out: dict[str, float] = {}
    for members in groups.values():
        for sample, adv in zip(members, leave_one_out([_reward(s) for s in members]), strict=True):
            out[sample.sample_id] = adv
    return out


def sample_group_advantages(samples: Iterable[Sample]) -> dict[str, float]:
    """Advantages of bank-adapter samples (`segment`, `contract`, `curator`): groups by `group_id`."""
    groups: dict[tuple[str, str], list[Sample]] = defaultdict(list)
    for sample in samples:
        groups[(sample.adapter, sample.group_id)].append(sample)
    out: dict[str, float] = {}
    for members in groups.values():
        for sample, adv in zip(members, group_normalized([_reward(s) for s in members]), strict=True):
            out[sample.sample_id] = adv
    return out


def all_advantages(trajectories: list[Trajectory], bank_samples: Iterable[Sample] = ()) -> dict[str, float]:
    """Every trainable sample's advantage, keyed by sample id: act + retrieve from trajectories, and the
    bank adapters' samples (those in trajectories plus `bank_samples`) grouped by `group_id`."""
    out = act_advantages(trajectories)
    out.update(retrieve_advantages(trajectories))
    in_trajectories = [
        s for t in trajectories if trains(t)
        for s in t.samples if s.adapter not in ("act", "retrieve")
    ]
    out.update(sample_group_advantages([*in_trajectories, *bank_samples]))
    return out
