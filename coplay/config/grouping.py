"""How the `act` adapter's GRPO groups are formed (`rollout.grouping`, docs/rewards.md "Groups"), and the
settings of state grouping (`rollout.state_groups`). Imports only pydantic.

Why a choice: episode groups (G whole episodes from one start seed, compared at each step index) compare,
after the first move, returns-to-go from different boards, so the games' own randomness (tile spawns, refills,
the piece bag) dominates the signal. State groups sample G answers at one and the same recorded state and
score each by its step reward plus a short continuation, so a group differs only in the answer. Which games
can be replayed from a state is a fact of `coplay_envs`; training checks it (`require_trainable`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from coplay.config.base import Section

GROUPING_MODES = ("episode", "state")
CONTINUATIONS = ("random", "expert", "current")


class StateGroupsConfig(Section):
    """State grouping: per game and iteration `trunks` whole episodes of the policy (the state source), and
    `rollout.start_states` anchors drawn from the previous iteration's trunk steps, each the start of
    `rollout.group_size` branches: the model decides once, then `continuation` plays up to `horizon` steps."""

    trunks: int = Field(
        2, ge=1, description="whole episodes of the policy per game and iteration, recording info['state'] "
                             "at every step: the next iteration's anchors are drawn from their steps; their "
                             "act samples do not train (their retrieve samples do), their scores are the "
                             "iteration's scores")
    continuation: Literal["random", "expert", "current"] = Field(
        "random", description="who plays a branch after the model's decision: the game's random or expert "
                              "bot (seeded per anchor, so a group's members share its random numbers), or "
                              "the current policy (its later samples do not train)")
    horizon: int = Field(
        10, ge=0, description="steps the continuation plays after the decision (capped at the episode's "
                              "end); a branch's return is the decision's reward plus theirs (0: the "
                              "decision's reward alone)")
