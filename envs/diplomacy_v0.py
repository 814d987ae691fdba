"""PettingZoo entry points for Diplomacy: `parallel_env(**kwargs)` (the Parallel env), `env(**kwargs)` (the
same game as AEC, by PettingZoo's standard `parallel_to_aec` conversion) and `raw_env` (the env class).

Keyword arguments: ``max_phases`` (default 20), ``negotiation_rounds`` (default 1), ``render_mode``,
``start_years`` (default (1, 3): ``reset(seed=s)`` starts from a seeded position after that many years of bot
play; 0: the standard opening) and ``start_random_share`` (default 0.3); see `coplay_envs.diplomacy.env`.
Never imports `coplay`.
"""

from __future__ import annotations

from typing import Any

from pettingzoo.utils.conversions import parallel_to_aec

from coplay_envs.diplomacy.env import RULES, DiplomacyEnv

raw_env = DiplomacyEnv


def parallel_env(**kwargs: Any) -> DiplomacyEnv:
    """A new Parallel Diplomacy env."""
    return DiplomacyEnv(**kwargs)


def env(**kwargs: Any):
    """A new AEC Diplomacy env (the Parallel env through `parallel_to_aec`)."""
    return parallel_to_aec(DiplomacyEnv(**kwargs))


__all__ = ["RULES", "env", "parallel_env", "raw_env"]
