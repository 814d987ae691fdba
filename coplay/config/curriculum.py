"""`curriculum`: skill-guided self-play (docs/curriculum.md). A proposer (the `propose` adapter) writes tasks
on single-player games, a gate keeps the valid ones, and the solver (`act`) trains on them. Off by default:
a run without it builds, trains and serves no `propose` adapter. Imports only pydantic.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field

from coplay.config.base import Section


class CurriculumConfig(Section):
    """The proposer, the gate, the rewards and the routing of skill-guided self-play."""

    enabled: bool = Field(False, description="train a proposer (`propose`) and mix its valid tasks into the "
                                             "rollouts; off: no sixth adapter anywhere")
    proposals: int = Field(4, ge=1, description="G: proposer samples per routed skill prompt (its group)")
    prompts: int = Field(2, ge=1, description="routed skill prompts per game per iteration")
    attempts: int = Field(4, ge=1, description="K: solver attempts per valid task (their group); p = "
                                               "successes / K")
    max_bound: int = Field(50, ge=1, description="largest step bound a task may set")
    reference: Literal["expert", "solver"] = Field(
        "expert", description="who must reach a task's contract once within the bound for it to be valid: "
                              "the game's expert bot, or one of the K solver attempts")
    reference_attempts: int = Field(1, ge=1, description="expert-bot runs (different bot seeds) per task")
    reject_trivial: bool = Field(
        True, description="reject a task whose contract already holds at its start position")
    mix_share: float = Field(0.25, ge=0.0, le=1.0,
                             description="share of each iteration's solver episodes that start from valid "
                                         "tasks (the rest are ordinary rollouts); 1.0: every valid task "
                                         "is played")
    exploration_share: float = Field(
        0.2, ge=0.0, le=1.0, description="share of proposer prompts with no skill (the exploration stream)")
    routing: Literal["statistics", "uniform"] = Field(
        "statistics", description="statistics: prefer skills whose solver success is near 0.5; uniform: any "
                                  "skill alike (an ablation)")
    unguided: bool = Field(False, description="ablation: prompts name no skill at all; the gate filters only")
    gate_credit: float = Field(
        0.2, ge=0.0, lt=1.0, description="share of the proposer's reward that passing the gate's checks "
                                         "earns: an invalid task gets this x the share of checks it passed "
                                         "(in the gate's order), a valid one this + the rest x the mid-"
                                         "difficulty score; 0: the paper's 1{valid} x (1 - 2|p - 0.5|)")
    game_reward_scale: float = Field(
        0.0, ge=0.0, description="solver reward = contract satisfied (0/1) + this x the game reward of the "
                                 "attempt")
    retire_success: float = Field(0.95, gt=0.0, le=1.0,
                                  description="a skill whose solver success reaches this ...")
    retire_after: int = Field(8, ge=1, description="... over at least this many solver attempts is no longer "
                                                   "routed (saturated)")
    constrained_tasks: bool = Field(
        False, description="sample `propose` answers under the task grammar "
                           "(coplay/curriculum/task_grammar.py: the schema, the game's position shape, a "
                           "contract over its features, a bound in range) on games that have a position "
                           "grammar (2048, Candy Crush); the solver's ACTION lines follow "
                           "`rollout.constrained_actions`")
    position: Literal["written", "dealt"] = Field(
        "written", description="who sets a task's start position: written, the proposer (the fields of the "
                               "game's state it overrides on the round's deal; under the task grammar in "
                               "the game's own shape); dealt, the game (the round's `reset(seed)` deal, "
                               "shown in the prompt; the answer's position is `{}`), for games whose "
                               "written positions the env mostly refuses (a Candy Crush board with a line or "
                               "no move)")
    induce: bool = Field(
        True, description="the controller's skill induction: exploration-stream tasks the solver reached at "
                          "least once go to the next bank update as `induce` proposals for the curator "
                          "(skill_bank.maintenance.max_proposals.induce per update; off with a frozen bank)")
    freeze: list[Literal["bank", "propose", "act"]] = Field(
        [], description="ablations: keep the bank, the proposer or the solver fixed")
    seed: int = Field(0, description="seed of routing and task start positions")

    def max_tasks(self, ordinary_episodes: int) -> int | None:
        """How many valid tasks the solver plays beside `ordinary_episodes` rollout episodes, so that task
        episodes (K each) are about `mix_share` of all its episodes: t * K / (t * K + ordinary) <= share,
        rounded up (one task at any share above 0); None (no cap) at share 1."""
        if self.mix_share >= 1.0:
            return None
        tasks = self.mix_share / (1.0 - self.mix_share) * ordinary_episodes / self.attempts
        return math.ceil(round(tasks, 6))  # 0.8 / 0.2 is 4.000000000000001 in floats

    @property
    def induces(self) -> bool:
        """Whether bank updates get induction candidates: the curriculum on, `induce` on, and neither the
        unguided ablation (no skill conditioning at all) nor a frozen bank."""
        return self.enabled and self.induce and not self.unguided and "bank" not in self.freeze

