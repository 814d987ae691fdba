"""The `rewards` section: every weight of the decision agent's rewards in one place (docs/rewards.md) — how
much of the game's own reward reaches `act` and `retrieve` (`game_scale`, per game), and the skill shaping
terms added on top of it. Imports only pydantic.

Why one place, and why these defaults: the shaping terms used to be constants in `coplay.learn.rewards` and
the game scale a key of `game.<key>`, so nothing showed that with the paper's weights (+0.1 a literal, +0.3
success, -0.1 abort or switch) the shaping outweighed the game. `python -m benchmarks.reward_shares`
measured it on 12-move 2048 episodes with the cold start's seed bank: the game's return (0.01 x the merge
score) was 0.39-0.42 per episode against 1.0-1.2 of shaping, 25-29% of the act reward's magnitude. The
defaults below are a tenth of those weights: the game then gives 77-80% of it (act and retrieve) at 12
moves and 83-93% at 50 (benchmarks/results/reward-shares-2048.json). Every iteration's metrics line says
the shares of the run at hand (`reward_shares`); `rewards.act.skill_success=0.3` etc. restores the paper's.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from coplay.config.base import GAME_KEYS, Section, str_keys

#: The game reward's scale per game: game reward x scale is what `act` and `retrieve` earn from the game.
#: Chosen so one good move is worth roughly 0.05-0.5 (2048: a merge of two 8s scores 16 -> 0.16).
DEFAULT_GAME_SCALE: dict[str, float] = {"2048": 0.01, "candy_crush": 0.05, "tetris": 0.1, "mario": 0.01,
                                        "avalon": 1.0, "diplomacy": 1.0}


class ActShaping(Section):
    """The skill terms of the `act` step reward r_t, added to game_scale x the game reward (all >= 0; the
    penalties are subtracted)."""

    contract_literal: float = Field(
        0.01, ge=0.0, description="per literal of the active skill's contract newly satisfied (paper: 0.1)")
    skill_success: float = Field(0.03, ge=0.0, description="when the active skill succeeds (paper: 0.3)")
    skill_abort: float = Field(0.01, ge=0.0, description="subtracted when the skill aborts (paper: 0.1)")
    skill_switch: float = Field(
        0.01, ge=0.0, description="subtracted for `SKILL: SWITCH` while the skill's preconditions still hold "
                                  "(paper: 0.1)")


class RetrieveShaping(Section):
    """The skill terms of the `retrieve` reward R, added to game_scale x the game reward earned while the
    chosen skill was active."""

    contract_share: float = Field(
        0.05, ge=0.0, description="x the share of the skill's contract satisfied when it ends (paper: 0.5)")
    precondition_miss: float = Field(
        0.05, ge=0.0, description="subtracted when the skill's preconditions did not hold when it was chosen "
                                  "(paper: 0.5)")


class RewardsConfig(Section):
    """The decision agent's reward weights (docs/rewards.md). The skill-bank adapters' rewards have no game
    term and no weights to tune; the curriculum's solver reward is `curriculum.game_reward_scale`."""

    game_scale: dict[str, float] = Field(
        default_factory=lambda: dict(DEFAULT_GAME_SCALE),
        description="per game key: the factor on the game's reward in act and retrieve rewards")
    act: ActShaping = ActShaping()
    retrieve: RetrieveShaping = RetrieveShaping()

    @field_validator("game_scale", mode="before")
    @classmethod
    def _keys_as_str(cls, value: object) -> object:
        return str_keys(value)

    @field_validator("game_scale")
    @classmethod
    def _known_games(cls, value: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(value) - set(GAME_KEYS))
        bad = sorted(k for k, v in value.items() if not v > 0)
        if unknown or bad:
            raise ValueError(f"game_scale {value}: keys must be game keys {list(GAME_KEYS)} "
                             f"(got {unknown or ''}) with scales > 0 (not {bad or ''})")
        return {**DEFAULT_GAME_SCALE, **value}
