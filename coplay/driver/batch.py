"""The training batch of one learner step (docs/rewards.md): finished trajectories become rewarded,
advantage-weighted Samples, with the rewards computed against the bank each episode played with; and the
learner step over them (`train_on`). Pure Python (no ray, no torch): the System does the remote calls.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from coplay.config import CoplayConfig
from coplay.driver.metrics import reward_parts
from coplay.driver.progress import phase
from coplay.driver.records import IterationData
from coplay.driver.schedule import VersionLedger
from coplay.learn.advantages import all_advantages, trains
from coplay.learn.rewards import PartTotals, assign_rewards, merge_totals, reward_shares
from coplay.skills.schema import Bank, bank_key_for
from coplay.types import Sample, TrainStep, Trajectory


def bank_lookups(banks: Mapping[str, Bank], traj: Trajectory) -> tuple[Any, Any]:
    """(contract_of, preconditions_hold) over the bank this trajectory played with."""
    bank = banks.get(bank_key_for(traj.game, traj.seat, traj.role))

    def contract_of(skill_id: str) -> list[str]:
        return list(bank.get(skill_id).contract.literals) if bank is not None else []

    def preconditions_hold(skill_id: str, features: Mapping[str, Any]) -> bool:
        return bank is not None and bank.get(skill_id).expression("preconditions").holds(features)

    return contract_of, preconditions_hold


def assign_batch_rewards(cfg: CoplayConfig, learners: list[Trajectory],
                         banks: Mapping[str, Bank]) -> PartTotals:
    """Rewards on every sample of the learner's trajectories (docs/rewards.md, weights from `rewards`), each
    against the bank its episode played with; returns the reward parts' absolute sums per adapter (the
    input of `reward_shares`)."""
    totals = []
    for traj in learners:
        contract_of, holds = bank_lookups(banks, traj)
        totals.append(assign_rewards(traj, cfg.rewards.game_scale[traj.game], contract_of, holds,
                                     cfg.learner.gamma, cfg.skill_bank.contracts.literal_window,
                                     cfg.rewards.act, cfg.rewards.retrieve))
    return merge_totals(totals)


@dataclass
class TrainingBatch:
    """What one learner step trains on: the samples with an advantage, the advantages by sample id, and per
    adapter each reward part's share of the total absolute reward (`coplay.learn.rewards.reward_shares`)."""

    samples: list[Sample]
    advantages: dict[str, float]
    reward_shares: dict[str, dict[str, float]] = field(default_factory=dict)


def training_batch(cfg: CoplayConfig, trajectories: list[Trajectory], banks: Mapping[str, Bank],
                   bank_samples: list[Sample]) -> TrainingBatch:
    """Rewards on every model sample (docs/rewards.md), then advantages."""
    learners = [t for t in trajectories if trains(t)]  # the policy's seats and state-grouping branches
    shares = reward_shares(assign_batch_rewards(cfg, learners, banks))
    advantages = all_advantages(learners, bank_samples)
    samples = [s for t in learners for s in t.samples] + list(bank_samples)
    return TrainingBatch([s for s in samples if s.sample_id in advantages], advantages, shares)


def nonzero_advantages(samples: list[Sample], advantages: Mapping[str, float]) -> dict[str, int]:
    """Per adapter, how many samples carry a non-zero advantage (a group with reward variance)."""
    out: dict[str, int] = {}
    for s in samples:
        if advantages.get(s.sample_id, 0.0) != 0.0:
            out[s.adapter] = out.get(s.adapter, 0) + 1
    return out


def trained_samples(samples: list[Sample], advantages: Mapping[str, float], skip_zero: bool) -> list[Sample]:
    """The samples the learner step gets: all, or (`learner.skip_zero_advantage`) those with a non-zero
    advantage, which alone carry a policy gradient when there is no KL term."""
    return [s for s in samples if not skip_zero or advantages.get(s.sample_id, 0.0) != 0.0]


def trained_episodes(trajectories: list[Trajectory]) -> list[str]:
    """Episode ids of the learner's trajectories (recorded per learner step for exactly-once audits)."""
    return sorted({t.episode_id for t in trajectories if trains(t)})


def train_on(system: Any, cfg: CoplayConfig, data: IterationData, ledger: VersionLedger) -> TrainStep | None:
    """Learner step j on the samples of iteration j (rewards with the banks those episodes played with);
    the ledger records the versions it published. None, and no step, when `ablation.variant` trains no GRPO
    (`sft_*`, `base`): the adapters stay those of the cold start while rollouts and evaluations go on."""
    if not cfg.ablation.trains_grpo:
        return None
    with phase(f"GRPO step {data.iteration} on the samples of iteration {data.iteration}") as bar:
        started = time.perf_counter()
        batch = training_batch(cfg, data.trajectories, system.banks_for(data.bank_versions),
                               data.bank_samples)
        samples, advantages = batch.samples, batch.advantages
        nonzero = nonzero_advantages(samples, advantages)
        batch_s = time.perf_counter() - started  # rewards and advantages, on the driver
        trained = trained_samples(samples, advantages, cfg.learner.skip_zero_advantage)
        step = system.train(trained, advantages)
        step.timings["batch_s"] = batch_s
        bar.note = step_note(len(trained), step)
    step.nonzero_advantages = nonzero
    step.reward_parts = reward_parts(samples)
    step.reward_shares = batch.reward_shares
    step.trained_iteration, step.trained_episodes = data.iteration, trained_episodes(data.trajectories)
    ledger.record(data.iteration, step.published)
    return step


def train_last(system: Any, cfg: CoplayConfig, k: int, data: IterationData,
               ledger: VersionLedger) -> TrainStep | None:
    """With staleness >= 1, learner step k trains on iteration k's samples while iteration k+1 plays; the
    last iteration has no next one, so its step runs here, before the last evaluation and probe, which then
    measure the run's final adapters (as verl and OpenRLHF validate after their last update). None before
    the last iteration, with staleness 0 (the iteration's own step already ran), when the variant trains no
    GRPO, or when an extended run's step already trained this iteration."""
    if (k != cfg.loop.iterations or cfg.loop.staleness < 1 or not cfg.ablation.trains_grpo
            or ledger.latest_step >= k):
        return None
    return train_on(system, cfg, data, ledger)


def step_note(samples: int, step: TrainStep) -> str:
    """The GRPO step's end line after its time: `12 samples: rewards 0.1 s, step 40.2 s, export and publish
    1.3 s, update measure 5.9 s` (its parts, `TrainStep.timings`)."""
    t = step.timings
    parts = [("rewards", t.get("batch_s", 0.0)), ("step", t.get("step_s", 0.0)),
             ("export and publish", t.get("export_s", 0.0) + t.get("publish_s", 0.0)),
             ("update measure", step.measure_seconds)]
    return f"{samples} samples: " + ", ".join(f"{name} {float(s):.1f} s" for name, s in parts)
