"""Self-play in the multi-seat games (Avalon, Diplomacy): who sits where in a GRPO group, which seat the
learning policy takes on which schedule, and the league that rates every pool member. Imports only pydantic.

Role ids and powers are owned by `coplay_envs`; the schedule's keys are checked against them when a run's
plans are first built (`coplay.driver.lineups.check_schedule`), so reading a config stays cheap.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from coplay.config.base import GAME_KEYS, Section


class LeagueConfig(Section):
    """Ratings of every pool member (OpenSkill), updated from every self-play and evaluation game."""

    enabled: bool = True
    model: Literal["PlackettLuce", "BradleyTerryFull", "ThurstoneMostellerFull"] = Field(
        "PlackettLuce", description="the openskill model that rates a game's ranking")
    sampling: Literal["weights", "pfsp"] = Field(
        "weights", description="weights: the pool's fixed draw weights; pfsp: prioritised fictitious "
                               "self-play (each kind's weight times f(P(the policy beats it)), from the "
                               "ratings)")
    pfsp: Literal["hard", "even"] = Field(
        "hard", description="hard: f(p) = (1 - p)^power (the strongest opponents most); even: "
                            "f(p) = p(1 - p)")
    pfsp_power: float = Field(2.0, gt=0.0)


class SelfPlayConfig(Section):
    """Line-ups of multi-seat games: one per GRPO group (drawn once, shared by its G episodes).

    `pool`: the learning policy takes one seat per group, chosen by `schedule`; the other seats come from the
    opponent pool (`rollout.opponents`), and a seat drawn as `current` plays the current policy without
    training. `full`: the current policy plays every seat and every seat trains, each in its own group."""

    mode: Literal["pool", "full"] = "pool"
    schedule: dict[str, dict[str, int]] = Field(
        default_factory=dict,
        description="game -> role id (Avalon: merlin, servant, minion, assassin; Diplomacy: the powers) -> "
                    "integer weight; the learner's seat cycles over the roles in these proportions; a game "
                    "not listed: every role weight 1")
    league: LeagueConfig = LeagueConfig()

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
        for game, weights in value.items():
            if game not in GAME_KEYS:
                raise ValueError(f"rollout.selfplay.schedule key {game!r}: expected a game key, one of "
                                 f"{list(GAME_KEYS)}")
            bad = {role: w for role, w in weights.items() if w < 0}
            if bad or not weights or sum(weights.values()) <= 0:
                raise ValueError(f"rollout.selfplay.schedule.{game} = {weights}: expected weights >= 0, "
                                 f"at least one > 0")
        return value
