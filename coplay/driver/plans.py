"""Iteration plans: which episodes one iteration plays, with whom (start seeds, GRPO groups, self-play
seats from the opponent pool), and the policy's seat settings at given adapter versions (shared with
evaluation). Pure Python (no ray, no torch), so the loop stays one screen and these decisions are
unit-tested.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from coplay.agent.decision import ModelSeat, derive_seed
from coplay.agent.openai_player import OpenAIEndpoint
from coplay.config import CoplayConfig
from coplay.engines.base import SamplingParams
from coplay.rollout.model_episodes import EpisodePlan, SeatPlayer


def model_seat(cfg: CoplayConfig, versions: Mapping[str, int], evaluation: bool = False) -> ModelSeat:
    """The seat settings of the policy at the given adapter versions."""
    temperature = cfg.eval.temperature if evaluation else cfg.sampling.temperature
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


def draw_opponent(cfg: CoplayConfig, rng: random.Random, act_versions: list[int],
                  current: ModelSeat) -> SeatPlayer:
    """One opponent from the pool (docs/architecture.md): the current policy, a frozen earlier version (half
    the draws the newest, the rest spread over older ones), an expert or random bot, or the configured
    OpenAI-compatible endpoint (sampled like the current policy's `act`)."""
    pool = cfg.rollout.opponents
    kinds = ["current", "frozen", "expert", "random", "openai"]
    has_endpoint = pool.endpoint.configured
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
        return SeatPlayer("openai", current, OpenAIEndpoint.from_config(pool.endpoint))
    return SeatPlayer(kind)


def iteration_plans(cfg: CoplayConfig, iteration: int, versions: Mapping[str, int], frozen_act: list[int],
                    bank_version: int) -> list[EpisodePlan]:
    """Every episode of one iteration: per game, G episodes per start seed; in multi-seat games seat 0 of
    each episode is the current policy and the other seats come from the opponent pool."""
    import coplay_envs

    seat = model_seat(cfg, versions)
    plans = []
    for gi, game in enumerate(cfg.games):
        game_cfg = cfg.game[game]
        for seed in start_seeds(cfg, iteration, gi):
            for g in range(cfg.rollout.group_size):
                episode_id = f"it{iteration}-{game}-s{seed}-g{g}"
                players: dict[str, SeatPlayer] = {}
                for name in coplay_envs.seats(game)[1:]:
                    rng = random.Random(derive_seed(cfg.seeds.run, iteration, episode_id, name, "opponent"))
                    players[name] = draw_opponent(cfg, rng, frozen_act, seat)
                plans.append(EpisodePlan(game=game, seed=seed, episode_id=episode_id,
                                         default=SeatPlayer("model", seat),
                                         players=players, env_kwargs=dict(game_cfg.env_kwargs),
                                         max_steps=cfg.rollout.max_steps, iteration=iteration,
                                         bank_version=bank_version))
    return plans
