"""Iteration plans: which episodes one iteration plays, with whom (start seeds, GRPO groups, and in
multi-seat games one line-up per group from `coplay.driver.lineups`), and the policy's seat settings at given
adapter versions (shared with evaluation). With `rollout.grouping=state` the episodes are trunks and
same-state branches instead (`coplay.driver.anchors`). Pure Python (no ray, no torch), so the loop stays one
screen and these decisions are unit-tested.
"""

from __future__ import annotations

from collections.abc import Mapping

from coplay.agent.decision import ModelSeat
from coplay.config import CoplayConfig
from coplay.config.training import require_state_grouping
from coplay.driver.anchors import state_group_plans
from coplay.driver.league import League
from coplay.driver.lineups import draw_lineup
from coplay.driver.records import IterationData
from coplay.engines.base import SamplingParams
from coplay.rollout.model_episodes import EpisodePlan, SeatPlayer


def model_seat(cfg: CoplayConfig, versions: Mapping[str, int], evaluation: bool = False) -> ModelSeat:
    """The seat settings of the policy at the given adapter versions; `ablation.variant` decides whether the
    seat consults the bank and whether it plays through its adapters at all (`base`: the base model)."""
    temperature = cfg.eval.temperature if evaluation else cfg.sampling.temperature
    budget = cfg.engine.max_model_len - max(cfg.sampling.max_tokens.values())
    adapters = cfg.ablation.uses_adapters
    return ModelSeat(
        act=f"act@v{versions['act']}" if adapters else None,
        retrieve=f"retrieve@v{versions['retrieve']}" if adapters else None,
        act_sampling=SamplingParams(temperature=temperature, top_p=cfg.sampling.top_p,
                                    max_tokens=cfg.sampling.max_tokens["act"]),
        retrieve_sampling=SamplingParams(temperature=temperature, top_p=cfg.sampling.top_p,
                                         max_tokens=cfg.sampling.max_tokens["retrieve"]),
        prompt_budget=budget, retrieve_every=cfg.rollout.retrieve_every, top_k=cfg.rollout.top_k_skills,
        history_len=cfg.rollout.history_len, constrained_orders=cfg.rollout.constrained_orders,
        constrained_actions=cfg.rollout.constrained_actions, intention_chars=cfg.rollout.intention_chars,
        uses_bank=cfg.ablation.uses_bank, prompt_format=cfg.rollout.prompt_format)


def start_seeds(cfg: CoplayConfig, iteration: int, game_index: int, n: int | None = None) -> list[int]:
    """`n` (default `rollout.start_states`) seeds from `seeds.train`, a fresh window per iteration and
    game."""
    lo, hi = cfg.seeds.train.start, cfg.seeds.train.stop
    n = cfg.rollout.start_states if n is None else n
    first = ((iteration - 1) * len(cfg.games) + game_index) * n
    return [lo + (first + i) % (hi - lo) for i in range(n)]


def iteration_plans(cfg: CoplayConfig, iteration: int, versions: Mapping[str, int], frozen_act: list[int],
                    bank_version: int, league: League | None = None,
                    previous: IterationData | None = None) -> list[EpisodePlan]:
    """Every episode of one iteration: per game and start seed one GRPO group of G episodes that share one
    line-up (`coplay.driver.lineups`: the learner's scheduled seat, opponents drawn once per group; with a
    `league` set to PFSP, drawn by its ratings). With `rollout.grouping=state`: per game the trunks and the
    branches of anchors drawn from `previous` (the iteration before, `coplay.driver.anchors`)."""
    import coplay_envs

    seat = model_seat(cfg, versions)
    if cfg.rollout.grouping == "state":
        require_state_grouping(cfg)
        trunks = cfg.rollout.state_groups.trunks
        return [plan for gi, game in enumerate(cfg.games)
                for plan in state_group_plans(cfg, game, iteration, seat, bank_version, previous,
                                              start_seeds(cfg, iteration, gi, trunks),
                                              start_seeds(cfg, iteration, gi))]
    plans = []
    for gi, game in enumerate(cfg.games):
        game_cfg = cfg.game[game]
        multi_seat = bool(coplay_envs.seats(game))
        priority = league.priority(game, versions["act"]) if league is not None and multi_seat else None
        for i, seed in enumerate(start_seeds(cfg, iteration, gi)):
            group = f"it{iteration}-{game}-s{seed}"
            group_index = (iteration - 1) * cfg.rollout.start_states + i
            lineup = (draw_lineup(cfg, game, seed, group_index, group, iteration, frozen_act, seat, priority)
                      if multi_seat else {})
            others = {name: player for name, player in lineup.items() if player.kind != "model"}
            for g in range(cfg.rollout.group_size):
                plans.append(EpisodePlan(game=game, seed=seed, episode_id=f"{group}-g{g}",
                                         default=SeatPlayer("model", seat), players=dict(others),
                                         env_kwargs=dict(game_cfg.env_kwargs),
                                         max_steps=cfg.rollout.max_steps, iteration=iteration,
                                         bank_version=bank_version, group=group))
    return plans
