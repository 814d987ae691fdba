"""Rewards of the decision agent's two adapters (docs/rewards.md), as pure functions over `Trajectory`
records.

`act`, per step t of one seat's episode (the weights w are the config's `rewards.act`, the scale
`rewards.game_scale.<game>`; docs/rewards.md gives their defaults and why):

    r_t = scale * game_reward_t                                                        part `game`
          + w.contract_literal * (# literals of the active skill's contract satisfied
                                   for the first time in this activation)             part `contract_literal`
          + w.skill_success * [the skill succeeds at t]                                part `skill_success`
          - w.skill_abort * [it aborts at t]                                           part `skill_abort`
          - w.skill_switch * [the agent answered `SKILL: SWITCH` at t while the
                              skill's preconditions still held]                        part `skill_switch`
    R_t = sum_{k >= t} gamma^(k - t) * r_k                      (return-to-go, gamma = 1 by default)

`retrieve`, per retrieval sample (the call that chose a skill at step t, credited when that activation ends;
weights `rewards.retrieve`):

    R = scale * sum of game rewards over the activation's steps                     part `game`
        + w.contract_share * (share of the skill's contract literals satisfied at
                              the activation's end)                                 part `contract_share`
        - w.precondition_miss * [the skill's preconditions did not hold at step t]  part `precondition_miss`
    (`SKILL: NONE` activations earn the scaled game reward only.)

Each reward is computed as its named parts (`act_step_parts`, `retrieve_parts`) and summed, so what a learner
step trained on can be split by source: `reward_shares` gives each part's share of the total absolute reward
per adapter (in every iteration's metrics line), which shows whether the game or the shaping drives learning.

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

from coplay.config.rewards import ActShaping, RetrieveShaping
from coplay.skills.literals import segment_literals
from coplay.types import Step, Trajectory

ACT_PARTS = ("game", "contract_literal", "skill_success", "skill_abort", "skill_switch")
RETRIEVE_PARTS = ("game", "contract_share", "precondition_miss")
ENDING_EVENTS = ("success", "abort", "switch")

ContractLookup = Callable[[str], list[str]]  # skill id -> contract literals ("f↑", "b=true", ...)
PreconditionCheck = Callable[[str, Mapping[str, float | int | bool]], bool]  # (skill id, features) -> holds
RewardParts = dict[str, float]  # part name -> its value (one step's r_t, or one retrieve sample's R)
PartTotals = dict[str, dict[str, float]]  # adapter -> part -> sum of |part| over what was rewarded


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


def act_step_parts(
    traj: Trajectory, scale: float, contract_of: ContractLookup, preconditions_hold: PreconditionCheck,
    window: int = 1, weights: ActShaping | None = None,
) -> list[RewardParts]:
    """r_t of every step of `traj` as its named parts (`ACT_PARTS`, formula in the module docstring);
    `window`: the bank's literal window; `weights`: `rewards.act` (None: the defaults)."""
    w = weights or ActShaping()
    parts = [dict.fromkeys(ACT_PARTS, 0.0) for _ in traj.steps]
    for t, step in enumerate(traj.steps):
        parts[t]["game"] = scale * step.reward
    for act in skill_activations(traj):
        if act.skill_id is None:
            continue
        literals = set(contract_of(act.skill_id))
        satisfied: set[str] = set()
        for t in range(act.start, act.end + 1):
            step = traj.steps[t]
            now = literals & segment_literals(traj.steps[act.start:t + 1], window)
            parts[t]["contract_literal"] = w.contract_literal * len(now - satisfied)
            satisfied |= now
            if step.skill_event == "success":
                parts[t]["skill_success"] = w.skill_success
            elif step.skill_event == "abort":
                parts[t]["skill_abort"] = -w.skill_abort
            elif step.skill_event == "switch" and preconditions_hold(act.skill_id, step.features_before):
                parts[t]["skill_switch"] = -w.skill_switch
    return parts


def act_step_rewards(
    traj: Trajectory, scale: float, contract_of: ContractLookup, preconditions_hold: PreconditionCheck,
    window: int = 1, weights: ActShaping | None = None,
) -> list[float]:
    """r_t for every step of `traj`: the sum of its parts (`act_step_parts`)."""
    return [sum(p.values()) for p in act_step_parts(traj, scale, contract_of, preconditions_hold, window,
                                                    weights)]


def returns_to_go(rewards: list[float], gamma: float = 1.0) -> list[float]:
    """R_t = sum_{k >= t} gamma^(k - t) r_k."""
    out = [0.0] * len(rewards)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = rewards[t] + gamma * running
        out[t] = running
    return out


def retrieve_parts(
    traj: Trajectory, scale: float, contract_of: ContractLookup, preconditions_hold: PreconditionCheck,
    window: int = 1, weights: RetrieveShaping | None = None,
) -> dict[str, RewardParts]:
    """R of every `retrieve` sample of `traj` as its named parts (`RETRIEVE_PARTS`), keyed by sample id
    (formula in the module docstring; `weights`: `rewards.retrieve`, None: the defaults). A retrieval
    sample at step t is credited with the activation that starts at t."""
    w = weights or RetrieveShaping()
    adapters = _adapter_of(traj)
    by_start = {act.start: act for act in skill_activations(traj)}
    out: dict[str, RewardParts] = {}
    for t, step in enumerate(traj.steps):
        for sid in step.sample_ids:
            if adapters.get(sid) != "retrieve":
                continue
            act = by_start[t]
            parts = dict.fromkeys(RETRIEVE_PARTS, 0.0)
            parts["game"] = scale * sum(traj.steps[k].reward for k in range(act.start, act.end + 1))
            if act.skill_id is not None:
                literals = contract_of(act.skill_id)
                if literals:
                    effects = segment_literals(traj.steps[act.start:act.end + 1], window)
                    share = len(set(literals) & effects) / len(set(literals))
                    parts["contract_share"] = w.contract_share * share
                if not preconditions_hold(act.skill_id, step.features_before):
                    parts["precondition_miss"] = -w.precondition_miss
            out[sid] = parts
    return out


def retrieve_rewards(
    traj: Trajectory, scale: float, contract_of: ContractLookup, preconditions_hold: PreconditionCheck,
    window: int = 1, weights: RetrieveShaping | None = None,
) -> dict[str, float]:
    """R for every `retrieve` sample of `traj`, keyed by sample id: the sum of its parts."""
    return {sid: sum(p.values()) for sid, p in retrieve_parts(traj, scale, contract_of, preconditions_hold,
                                                              window, weights).items()}


def assign_rewards(
    traj: Trajectory,
    scale: float,
    contract_of: ContractLookup,
    preconditions_hold: PreconditionCheck,
    gamma: float = 1.0,
    window: int = 1,
    act_weights: ActShaping | None = None,
    retrieve_weights: RetrieveShaping | None = None,
) -> PartTotals:
    """Set `Sample.reward` in place: `act` samples get R_t of their step, `retrieve` samples their R
    (`window`: the bank's `skill_bank.contracts.literal_window`). Returns, per adapter that has samples in
    `traj`, each part's sum of absolute values (`act` over the per-step r_t, not the returns, which would
    count a step's reward once per earlier step): the input of `reward_shares`."""
    by_id = {s.sample_id: s for s in traj.samples}
    step_parts = act_step_parts(traj, scale, contract_of, preconditions_hold, window, act_weights)
    returns = returns_to_go([sum(p.values()) for p in step_parts], gamma)
    totals: PartTotals = {}
    for t, step in enumerate(traj.steps):
        acted = False
        for sid in step.sample_ids:
            if sid in by_id and by_id[sid].adapter == "act":
                by_id[sid].reward = returns[t]
                acted = True
        if acted:
            add_parts(totals, "act", step_parts[t])
    for sid, parts in retrieve_parts(traj, scale, contract_of, preconditions_hold, window,
                                     retrieve_weights).items():
        by_id[sid].reward = sum(parts.values())
        add_parts(totals, "retrieve", parts)
    return totals


def add_parts(totals: PartTotals, adapter: str, parts: Mapping[str, float]) -> None:
    """Add |each part| of one reward into `totals[adapter]` (in place)."""
    into = totals.setdefault(adapter, {})
    for name, value in parts.items():
        into[name] = into.get(name, 0.0) + abs(value)


def merge_totals(many: list[PartTotals]) -> PartTotals:
    """The sum of several `assign_rewards` results (e.g. every learner trajectory of a step)."""
    out: PartTotals = {}
    for totals in many:
        for adapter, parts in totals.items():
            add_parts(out, adapter, parts)
    return out


def reward_shares(totals: PartTotals) -> dict[str, dict[str, float]]:
    """Per adapter, each part's share of the total absolute reward: |part| summed over the rewarded steps
    (or samples) / the same sum over all parts. Shares of an adapter add up to 1; an adapter whose rewards
    were all 0 gets every share 0 (nothing drove it). E.g. `{"act": {"game": 0.8, "skill_success": 0.15,
    ...}}`: 80% of the act reward's magnitude came from the game."""
    out: dict[str, dict[str, float]] = {}
    for adapter, parts in sorted(totals.items()):
        total = sum(parts.values())
        out[adapter] = {name: (value / total if total > 0 else 0.0) for name, value in parts.items()}
    return out
