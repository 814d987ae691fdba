"""What one iteration of the loop decides on the driver: which episodes to play with whom (start seeds,
GRPO groups, self-play seats from the opponent pool), and how finished trajectories become rewarded,
advantage-weighted Samples for the learner. Pure Python (no ray, no torch), so the loop stays one screen
and these decisions are unit-tested.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from coplay.agent.decision import ModelSeat, derive_seed
from coplay.agent.openai_player import OpenAIEndpoint
from coplay.config import CoplayConfig
from coplay.engines.base import SamplingParams
from coplay.learn.advantages import all_advantages
from coplay.learn.rewards import assign_rewards
from coplay.rollout.model_episodes import EpisodePlan, SeatPlayer
from coplay.skills.schema import Bank, bank_key_for
from coplay.types import Sample, Trajectory

MULTI_SEAT = {"avalon": [f"player_{i}" for i in range(5)],
              "diplomacy": ["AUSTRIA", "ENGLAND", "FRANCE", "GERMANY", "ITALY", "RUSSIA", "TURKEY"]}


def model_seat(cfg: CoplayConfig, versions: Mapping[str, int], evaluation: bool = False) -> ModelSeat:
    """The seat settings of the policy at the given adapter versions."""
    temperature = cfg.sampling.eval_temperature if evaluation else cfg.sampling.temperature
    budget = cfg.engine.max_model_len - max(cfg.sampling.max_tokens.values())
    return ModelSeat(
        act=f"act@v{versions['act']}", retrieve=f"retrieve@v{versions['retrieve']}",
        act_sampling=SamplingParams(temperature=temperature, top_p=cfg.sampling.top_p,
                                    max_tokens=cfg.sampling.max_tokens["act"]),
        retrieve_sampling=SamplingParams(temperature=temperature, top_p=cfg.sampling.top_p,
                                         max_tokens=cfg.sampling.max_tokens["retrieve"]),
        prompt_budget=budget, retrieve_every=cfg.rollout.retrieve_every, top_k=cfg.rollout.top_k_skills,
        history_len=cfg.rollout.history_len)


def start_seeds(cfg: CoplayConfig, iteration: int, game_index: int) -> list[int]:
    """`rollout.start_states` seeds from `seeds.train`, a fresh window per iteration and game."""
    lo, hi = cfg.seeds.train.start, cfg.seeds.train.stop
    n = cfg.rollout.start_states
    first = ((iteration - 1) * len(cfg.games) + game_index) * n
    return [lo + (first + i) % (hi - lo) for i in range(n)]


def draw_opponent(cfg: CoplayConfig, rng: random.Random, act_versions: list[int], current: ModelSeat) -> SeatPlayer:
    """One opponent from the pool (DESIGN.md §6): the current policy, a frozen earlier version (half the
    draws the newest, the rest spread over older ones), an expert or random bot, or the configured
    OpenAI-compatible endpoint (sampled like the current policy's `act`)."""
    pool = cfg.rollout.opponents
    kinds = ["current", "frozen", "expert", "random", "openai"]
    has_endpoint = bool(pool.openai_base_url and pool.openai_model)
    weights = [pool.current, pool.frozen if act_versions else 0.0, pool.expert, pool.random,
               pool.openai if has_endpoint else 0.0]
    kind = rng.choices(kinds, weights=weights)[0] if sum(weights) > 0 else "current"
    if kind == "current":
        return SeatPlayer("model", current)
    if kind == "frozen":
        older = sorted(act_versions)
        version = older[-1] if rng.random() < 0.5 or len(older) == 1 else rng.choice(older[:-1])
        frozen = ModelSeat(**{**current.__dict__, "act": f"act@v{version}", "retrieve": None})
        return SeatPlayer("frozen", frozen)
    if kind == "openai":
        return SeatPlayer("openai", current, OpenAIEndpoint.from_config(pool))
    return SeatPlayer(kind)


def iteration_plans(cfg: CoplayConfig, iteration: int, versions: Mapping[str, int], frozen_act: list[int],
                    bank_version: int) -> list[EpisodePlan]:
    """Every episode of one iteration: per game, G episodes per start seed; in multi-seat games seat 0 of
    each episode is the current policy and the other seats come from the opponent pool."""
    seat = model_seat(cfg, versions)
    plans = []
    for gi, game in enumerate(cfg.games):
        game_cfg = cfg.game[game]
        for seed in start_seeds(cfg, iteration, gi):
            for g in range(cfg.rollout.group_size):
                episode_id = f"it{iteration}-{game}-s{seed}-g{g}"
                players: dict[str, SeatPlayer] = {}
                for name in MULTI_SEAT.get(game, [])[1:]:
                    rng = random.Random(derive_seed(cfg.seeds.run, iteration, episode_id, name, "opponent"))
                    players[name] = draw_opponent(cfg, rng, frozen_act, seat)
                plans.append(EpisodePlan(game=game, seed=seed, episode_id=episode_id, default=SeatPlayer("model", seat),
                                         players=players, env_kwargs=dict(game_cfg.env_kwargs),
                                         max_steps=cfg.rollout.max_steps, iteration=iteration,
                                         bank_version=bank_version))
    return plans


def bank_lookups(banks: Mapping[str, Bank], traj: Trajectory) -> tuple[Any, Any]:
    """(contract_of, preconditions_hold) over the bank this trajectory played with."""
    bank = banks.get(bank_key_for(traj.game, traj.seat, traj.role))

    def contract_of(skill_id: str) -> list[str]:
        return list(bank.get(skill_id).contract.literals) if bank is not None else []

    def preconditions_hold(skill_id: str, features: Mapping[str, Any]) -> bool:
        return bank is not None and bank.get(skill_id).expression("preconditions").holds(features)

    return contract_of, preconditions_hold


def training_batch(cfg: CoplayConfig, trajectories: list[Trajectory], banks: Mapping[str, Bank],
                   bank_samples: list[Sample]) -> tuple[list[Sample], dict[str, float]]:
    """Rewards on every model sample (DESIGN.md §5), then advantages; returns (samples, advantages)."""
    learners = [t for t in trajectories if t.policy == "model"]
    for traj in learners:
        contract_of, holds = bank_lookups(banks, traj)
        assign_rewards(traj, cfg.game[traj.game].reward_scale, contract_of, holds, cfg.learner.gamma)
    advantages = all_advantages(learners, bank_samples)
    samples = [s for t in learners for s in t.samples] + list(bank_samples)
    return [s for s in samples if s.sample_id in advantages], advantages


def nonzero_advantages(samples: list[Sample], advantages: Mapping[str, float]) -> dict[str, int]:
    """Per adapter, how many samples carry a non-zero advantage (a group with reward variance)."""
    out: dict[str, int] = {}
    for s in samples:
        if advantages.get(s.sample_id, 0.0) != 0.0:
            out[s.adapter] = out.get(s.adapter, 0) + 1
    return out
