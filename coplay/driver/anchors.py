"""State grouping's episodes (`rollout.grouping=state`, docs/rewards.md "Groups"): per game and iteration,
trunks and same-state groups of branches.

- A **trunk** is a whole episode of the policy from a start seed that records `info["state"]` at every step
  (`Step.state`). It is the state source; its scores are the iteration's scores and its retrieval samples
  train, its `act` samples do not (`coplay.learn.advantages.act_steps`).
- An **anchor** is one recorded decision point: a trunk step's state plus the trunk's last
  `rollout.history_len` moves before it (so a branch is asked with the prompt the policy saw there).
- A **branch** starts from an anchor (`reset(options={"state": ...})`): the model decides once, then the
  continuation (`rollout.state_groups.continuation`) plays up to `horizon` more steps. The G branches of an
  anchor share `group` = the anchor id, so GRPO compares G answers at one and the same state, each scored by
  its reward plus the continuation's return.

Where anchors come from: the steps of the previous iteration's trunks (the policy's own visits, one iteration
behind), drawn uniformly without replacement by a generator seeded with (run seed, iteration, game), so a
run, and a run resumed from a checkpoint (its last iteration's shards hold the trunks and their states), draw
the same anchors. When the previous iteration has no trunk of the game (iteration 1, or a run that switched
modes), the anchors are the reset states of the iteration's start seeds.

Pure Python (no ray, no torch); the games are made only to read reset states.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from coplay.agent.decision import ModelSeat, derive_seed
from coplay.agent.prompts import HistoryEntry
from coplay.config import CoplayConfig
from coplay.driver.records import IterationData
from coplay.rollout.model_episodes import Continuation, EpisodePlan, SeatPlayer
from coplay.types import Trajectory


@dataclass(frozen=True)
class Anchor:
    """A state GRPO groups at: `state` (`info["state"]`) reached at step `step` of an episode from `seed`,
    the moves before it that a prompt shows, and where it came from (`<episode id>@t<step>` or `reset`)."""

    anchor_id: str
    game: str
    seed: int
    step: int
    state: dict[str, Any]
    history: tuple[HistoryEntry, ...]
    source: str


def trunk_steps(previous: IterationData | None, game: str) -> list[tuple[Trajectory, int]]:
    """Every recorded decision point (trunk, step index) of `game` in `previous`, in a fixed order."""
    if previous is None:
        return []
    trunks = sorted((t for t in previous.trajectories if t.kind == "trunk" and t.game == game),
                    key=lambda t: t.episode_id)
    return [(t, i) for t in trunks for i, step in enumerate(t.steps) if step.state is not None]


def reset_state(game: str, env_kwargs: dict[str, Any], seed: int) -> dict[str, Any]:
    """`info["state"]` right after `reset(seed=seed)`."""
    from coplay_envs import make_env

    env = make_env(game, **env_kwargs)
    try:
        return env.reset(seed=seed)[1]["state"]
    finally:
        env.close()


def draw_anchors(cfg: CoplayConfig, iteration: int, game: str, previous: IterationData | None,
                 reset_seeds: list[int]) -> list[Anchor]:
    """`rollout.start_states` anchors of `game` for `iteration` (module docstring): uniform over the previous
    iteration's trunk steps, without replacement until every step was drawn once; else the reset states of
    `reset_seeds`."""
    n, history_len = cfg.rollout.start_states, cfg.rollout.history_len
    candidates = trunk_steps(previous, game)
    if not candidates:
        env_kwargs = dict(cfg.game[game].env_kwargs)
        return [Anchor(f"it{iteration}-{game}-a{i}", game, seed, 0, reset_state(game, env_kwargs, seed), (),
                       "reset") for i, seed in enumerate(reset_seeds[:n])]
    rng = random.Random(derive_seed(cfg.seeds.run, iteration, game, "anchors"))
    picks: list[int] = []
    while len(picks) < n:
        picks += rng.sample(range(len(candidates)), min(n - len(picks), len(candidates)))
    anchors = []
    for i, pick in enumerate(picks):
        traj, j = candidates[pick]
        shown = traj.steps[max(0, j - history_len):j] if history_len else []
        history = tuple(HistoryEntry(s.t, s.intention, s.action, s.reward) for s in shown)
        state = traj.steps[j].state
        assert state is not None  # trunk_steps keeps recorded steps only
        anchors.append(Anchor(f"it{iteration}-{game}-a{i}", game, traj.seed, j, state, history,
                              f"{traj.episode_id}@t{j}"))
    return anchors


def trunk_plans(cfg: CoplayConfig, game: str, iteration: int, seat: ModelSeat, bank_version: int,
                seeds: list[int]) -> list[EpisodePlan]:
    """One whole episode of the policy per seed, recording its states (`kind="trunk"`)."""
    return [EpisodePlan(game=game, seed=seed, episode_id=f"it{iteration}-{game}-trunk{i}-s{seed}",
                        default=SeatPlayer("model", seat), env_kwargs=dict(cfg.game[game].env_kwargs),
                        max_steps=cfg.rollout.max_steps, iteration=iteration, bank_version=bank_version,
                        group=f"it{iteration}-{game}-trunk{i}", kind="trunk")
            for i, seed in enumerate(seeds)]


def branch_plans(cfg: CoplayConfig, anchor: Anchor, iteration: int, seat: ModelSeat,
                 bank_version: int) -> list[EpisodePlan]:
    """The `rollout.group_size` branches of one anchor: one group, one state, one continuation seed. A branch
    lasts 1 + horizon steps, and never past the episode's end (`rollout.max_steps`, or the game's own)."""
    sg = cfg.rollout.state_groups
    steps = 1 + sg.horizon
    if cfg.rollout.max_steps is not None:
        steps = max(1, min(steps, cfg.rollout.max_steps - anchor.step))
    continuation = Continuation(sg.continuation, derive_seed(cfg.seeds.run, iteration, anchor.anchor_id,
                                                              "continuation"))
    return [EpisodePlan(game=anchor.game, seed=anchor.seed, episode_id=f"{anchor.anchor_id}-g{g}",
                        default=SeatPlayer("model", seat), env_kwargs=dict(cfg.game[anchor.game].env_kwargs),
                        max_steps=steps, iteration=iteration, bank_version=bank_version,
                        group=anchor.anchor_id, start_state=anchor.state, kind="branch",
                        continuation=continuation, history=list(anchor.history))
            for g in range(cfg.rollout.group_size)]


def state_group_plans(cfg: CoplayConfig, game: str, iteration: int, seat: ModelSeat, bank_version: int,
                      previous: IterationData | None, trunk_seeds: list[int],
                      reset_seeds: list[int]) -> list[EpisodePlan]:
    """One game's episodes of one iteration under state grouping: its trunks, then its branches, anchor by
    anchor. Episodes: trunks + start_states x group_size (docs/rewards.md counts the decisions)."""
    plans = trunk_plans(cfg, game, iteration, seat, bank_version, trunk_seeds)
    for anchor in draw_anchors(cfg, iteration, game, previous, reset_seeds):
        plans += branch_plans(cfg, anchor, iteration, seat, bank_version)
    return plans
