"""`sft.act_balance`: how the cold start spreads its `act` teacher examples over the teacher's actions
(`coplay.learn.act_balance`). Imports only pydantic.

Why: SFT on examples that follow the teacher's own action frequencies teaches a weak model the marginal
prior, and greedy or low-temperature decoding turns any prior into one action (after a 64-example cold start
on 2048 SmolLM2 played `left` on 44 of 64 moves, while the expert bot's most frequent move was 31%).
"""

from __future__ import annotations

from pydantic import Field

from coplay.config.base import Section


class ActBalanceConfig(Section):
    """Balance the `act` SFT examples over the teacher's chosen actions, per game."""

    enabled: bool = Field(
        True, description="pick the act examples round-robin over the teacher's actions (each action as many "
                          "as the rarer ones allow, spread over step depth) instead of in proportion to how "
                          "often the teacher chose them")
    max_action_share: float = Field(
        0.5, gt=0.0, le=1.0,
        description="no action takes more than this share of a game's act examples (its surplus is dropped), "
                    "unless the teacher chose fewer than 1/share distinct actions; 1 = no cap")
