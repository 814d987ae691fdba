"""Rewards of the decision agent's two adapters (docs/rewards.md), as pure functions over `Trajectory`
records.

`act`, per step t of one seat's episode:

    r_t = scale * game_reward_t
          + 0.1 * (# literals of the active skill's contract satisfied for the first time in this activation)
          + 0.3 * [the skill succeeds at t] - 0.1 * [it aborts at t]
          - 0.1 * [the agent answered `SKILL: SWITCH` at t while the skill's preconditions still held]
    R_t = sum_{k >= t} gamma^(k - t) * r_k                      (return-to-go, gamma = 1 by default)

`retrieve`, per retrieval sample (the call that chose a skill at step t, credited when that activation ends):

    R = scale * sum of game rewards over the activation's steps
        + 0.5 * (share of the skill's contract literals satisfied at the activation's end)
        - 0.5 * [the skill's preconditions did not hold at step t]
    (`SKILL: NONE` activations earn the scaled game reward only.)

An *activation* is a run of consecutive steps with the same `skill_id`; a new one starts when the skill id
changes, when the previous step ended it (`success`, `abort`, `switch`), or when a `retrieve` sample is taken.
A contract literal is "satisfied" at step t when the bank would read it as an effect of the activation's
steps so far: `coplay.skills.literals.segment_literals` over steps [start, t] with the bank's
`skill_bank.contracts.literal_window` (start and end windows, numbers by mean, booleans by majority). One
definition serves the bank's contracts and these rewards, so a skill's contract and the reward for meeting it
cannot disagree. The bank itself is reached through two callables.

The segment / contract / curator rewards live with the skill bank. Pure Python: no torch, no ray.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from coplay.skills.literals import segment_literals
from coplay.types import Step, Trajectory

CONTRACT_BONUS = 0.1
SUCCESS_BONUS = 0.3
ABORT_PENALTY = 0.1
SWITCH_PENALTY = 0.1
RETRIEVE_CONTRACT_WEIGHT = 0.5
RETRIEVE_PRECONDITION_PENALTY = 0.5
ENDING_EVENTS = ("success", "abort", "switch")

ContractLookup = Callable[[str], list[str]]  # skill id -> contract literals ("f↑", "b=true", ...)
PreconditionCheck = Callable[[str, Mapping[str, float | int | bool]], bool]  # (skill id, features) -> holds


@dataclass(frozen=True)
class Activation:
    """Steps [start, end] (inclusive) of one episode during which `skill_id` (or no skill) was active."""

    start: int
    end: int
    skill_id: str | None


def _adapter_of(traj: Trajectory) -> dict[str, str]:
    return {s.sample_id: s.adapter for s in traj.samples}


def _has_retrieve(step: Step, adapters: dict[str, str]) -> bool:
    return any(adapters.get(sid) == "retrieve" for sid in step.sample_ids)


def skill_activations(traj: Trajectory) -> list[Activation]:
    """Split an episode into activations (see the module docstring for the rule)."""
    adapters = _adapter_of(traj)
    out: list[Activation] = []
    start = 0
    for t in range(1, len(traj.steps) + 1):
        if t == len(traj.steps):
            out.append(Activation(start, t - 1, traj.steps[start].skill_id))
            break
        prev, cur = traj.steps[t - 1], traj.steps[t]
        if cur.skill_id != prev.skill_id or prev.skill_event in ENDING_EVENTS or _has_retrieve(cur, adapters):
            out.append(Activation(start, t - 1, traj.steps[start].skill_id))
            start = t
    return out


def act_step_rewards(
    traj: Trajectory, scale: float, contract_of: ContractLookup, preconditions_hold: PreconditionCheck,
    window: int = 1,
) -> list[float]:
    """r_t for every step of `traj` (formula in the module docstring); `window`: the bank's literal window."""
    rewards = [scale * step.reward for step in traj.steps]
    for act in skill_activations(traj):
        literals = set(contract_of(act.skill_id)) if act.skill_id is not None else set()
        satisfied: set[str] = set()
        for t in range(act.start, act.end + 1):
            step = traj.steps[t]
            if act.skill_id is None:
                continue
            now = literals & segment_literals(traj.steps[act.start:t + 1], window)
            rewards[t] += CONTRACT_BONUS * len(now - satisfied)
            satisfied |= now
            if step.skill_event == "success":
                rewards[t] += SUCCESS_BONUS
            elif step.skill_event == "abort":
                rewards[t] -= ABORT_PENALTY
            elif step.skill_event == "switch" and preconditions_hold(act.skill_id, step.features_before):
                rewards[t] -= SWITCH_PENALTY
    return rewards


def returns_to_go(rewards: list[float], gamma: float = 1.0) -> list[float]:
    """R_t = sum_{k >= t} gamma^(k - t) r_k."""
    out = [0.0] * len(rewards)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = rewards[t] + gamma * running
        out[t] = running
    return out


def retrieve_rewards(
    traj: Trajectory, scale: float, contract_of: ContractLookup, preconditions_hold: PreconditionCheck,
    window: int = 1,
) -> dict[str, float]:
    """R for every `retrieve` sample of `traj`, keyed by sample id (formula in the module docstring).

    A retrieval sample at step t is credited with the activation that starts at t.
    """
    adapters = _adapter_of(traj)
    by_start = {act.start: act for act in skill_activations(traj)}
    out: dict[str, float] = {}
    for t, step in enumerate(traj.steps):
        for sid in step.sample_ids:
            if adapters.get(sid) != "retrieve":
                continue
            act = by_start[t]
            reward = scale * sum(traj.steps[k].reward for k in range(act.start, act.end + 1))
            if act.skill_id is not None:
                literals = contract_of(act.skill_id)
                if literals:
                    effects = segment_literals(traj.steps[act.start:act.end + 1], window)
                    share = len(set(literals) & effects) / len(set(literals))
                    reward += RETRIEVE_CONTRACT_WEIGHT * share
                if not preconditions_hold(act.skill_id, step.features_before):
                    reward -= RETRIEVE_PRECONDITION_PENALTY
            out[sid] = reward
    return out


def assign_rewards(
    traj: Trajectory,
    scale: float,
    contract_of: ContractLookup,
    preconditions_hold: PreconditionCheck,
    gamma: float = 1.0,
    window: int = 1,
) -> None:
    """Set `Sample.reward` in place: `act` samples get R_t of their step, `retrieve` samples their R
    (`window`: the bank's `skill_bank.contracts.literal_window`)."""
    returns = returns_to_go(act_step_rewards(traj, scale, contract_of, preconditions_hold, window), gamma)
    by_id = {s.sample_id: s for s in traj.samples}
    for t, step in enumerate(traj.steps):
        for sid in step.sample_ids:
            if sid in by_id and by_id[sid].adapter == "act":
                by_id[sid].reward = returns[t]
    for sid, reward in retrieve_rewards(traj, scale, contract_of, preconditions_hold, window).items():
        by_id[sid].reward = reward
