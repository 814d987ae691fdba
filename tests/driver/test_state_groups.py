"""State grouping's plans (issue 36): per game `trunks` whole episodes plus `start_states` x `group_size`
branches; every group's members start from the same state bytes; anchors come from the previous iteration's
trunk steps (their recorded states are the real positions, with the moves before them as history), drawn
reproducibly; a branch never runs past the episode's end; multi-seat games are refused.

Trunks here are played by the random bot through the real runner (no engine needed); the model's branches
are played in tests/rollout/test_state_branches.py."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import pytest

import coplay_envs
from coplay.config import ConfigError, load_config, require_trainable
from coplay.driver.anchors import draw_anchors, reset_state
from coplay.driver.plans import iteration_plans, start_seeds
from coplay.driver.records import IterationData
from coplay.rollout.model_episodes import RunnerContext, SeatPlayer, play_episodes

VERSIONS = {"act": 2, "retrieve": 2}
STATE = ["rollout.grouping=state", "rollout.start_states=3", "rollout.group_size=4",
         "rollout.state_groups.trunks=2", "rollout.state_groups.horizon=3", "rollout.max_steps=10",
         "rollout.history_len=2"]


def _bytes(state) -> bytes:
    return json.dumps(state, sort_keys=True, separators=(",", ":")).encode()


def _groups(plans):
    out: dict[str, list] = {}
    for plan in plans:
        if plan.kind == "branch":
            out.setdefault(plan.group, []).append(plan)
    return out


def _bot_trunks(cfg, iteration: int) -> IterationData:
    """The iteration's trunk plans, played by the random bot instead of the model."""
    plans = [replace(p, default=SeatPlayer("random"))
             for p in iteration_plans(cfg, iteration, VERSIONS, [], 0) if p.kind == "trunk"]
    ctx = RunnerContext(engine=None, rules=coplay_envs.rules, skills_for=lambda game, role: None)
    return IterationData(iteration, asyncio.run(play_episodes(ctx, plans, 8)), [], {})


def test_plan_counts_groups_and_shared_start_states():
    cfg = load_config(None, [*STATE, "games=[2048, tetris]"])
    plans = iteration_plans(cfg, 1, VERSIONS, [], 0)
    assert len(plans) == 2 * (2 + 3 * 4)  # games x (trunks + anchors x G)
    assert len({p.episode_id for p in plans}) == len(plans)
    for gi, game in enumerate(("2048", "tetris")):
        trunks = [p for p in plans if p.game == game and p.kind == "trunk"]
        assert [p.seed for p in trunks] == start_seeds(cfg, 1, gi, 2)
        assert all(p.max_steps == 10 and p.start_state is None and p.continuation is None for p in trunks)
        groups = {k: v for k, v in _groups(plans).items() if v[0].game == game}
        assert len(groups) == 3 and all(len(members) == 4 for members in groups.values())
        for i, (seed, members) in enumerate(zip(start_seeds(cfg, 1, gi), groups.values(), strict=True)):
            # iteration 1 has no trunks yet: each anchor is a start seed's reset state
            assert {_bytes(m.start_state) for m in members} == {_bytes(reset_state(game, {}, seed))}
            assert {m.continuation for m in members} == {members[0].continuation}  # one seed per group
            assert all(m.max_steps == 4 and m.history == [] and m.kind == "branch" for m in members)
            assert members[0].group == f"it1-{game}-a{i}"
    seeds = {members[0].continuation.seed for members in _groups(plans).values()}
    assert len(seeds) == 6  # each anchor draws its own continuation
    # the default stays episode grouping, unchanged
    episode = iteration_plans(load_config(None), 1, VERSIONS, [], 0)
    assert {p.kind for p in episode} == {"episode"} and len(episode) == 2 * 4


def test_anchors_are_recorded_trunk_positions_with_their_history_drawn_reproducibly():
    cfg = load_config(None, STATE)
    previous = _bot_trunks(cfg, 1)
    trunks = {t.episode_id: t for t in previous.trajectories}
    assert len(trunks) == 2 and all(t.kind == "trunk" and t.policy == "random" for t in trunks.values())
    for traj in trunks.values():  # every step recorded the position it was decided in: replay agrees
        env = coplay_envs.make_env("2048")
        _, info = env.reset(seed=traj.seed)
        for step in traj.steps:
            assert _bytes(step.state) == _bytes(info["state"])
            _, _, _, _, info = env.step(step.action)
    plans = iteration_plans(cfg, 2, VERSIONS, [], 0, previous=previous)
    anchors = draw_anchors(cfg, 2, "2048", previous, [])
    assert anchors == draw_anchors(cfg, 2, "2048", previous, [])  # reproducible (and so resumable)
    assert len({a.source for a in anchors}) == 3  # without replacement
    for anchor, members in zip(anchors, _groups(plans).values(), strict=True):
        episode, _, t = anchor.source.rpartition("@t")
        source = trunks[episode]
        assert anchor.step == int(t) and anchor.seed == source.seed
        assert _bytes(anchor.state) == _bytes(source.steps[anchor.step].state)
        assert {_bytes(m.start_state) for m in members} == {_bytes(anchor.state)}
        shown = source.steps[max(0, anchor.step - 2):anchor.step]
        assert [(h.t, h.action, h.reward) for h in members[0].history] == [(s.t, s.action, s.reward)
                                                                             for s in shown]
        assert all(m.max_steps == min(4, 10 - anchor.step) for m in members)  # never past the horizon
    later = draw_anchors(cfg, 3, "2048", previous, [])
    assert [a.source for a in later] != [a.source for a in anchors]  # another iteration, another draw


def test_more_anchors_than_trunk_steps_reuses_steps_only_after_using_each_once():
    cfg = load_config(None, [*STATE, "rollout.max_steps=2", "rollout.start_states=6"])
    previous = _bot_trunks(cfg, 1)  # 2 trunks x 2 steps = 4 positions
    sources = [a.source for a in draw_anchors(cfg, 2, "2048", previous, [])]
    assert len(sources) == 6 and len(set(sources[:4])) == 4 and set(sources[4:]) <= set(sources[:4])


def test_state_grouping_is_refused_for_multi_seat_games():
    cfg = load_config(None, ["rollout.grouping=state", "games=[2048, avalon]"])
    with pytest.raises(ConfigError, match=r"rollout\.grouping=state .*\['avalon'\] have several seats"):
        require_trainable(cfg)
    with pytest.raises(ConfigError, match="rollout.grouping=episode"):
        iteration_plans(cfg, 1, VERSIONS, [], 0)
    with pytest.raises(ValueError, match="continuation"):
        load_config(None, ["rollout.state_groups.continuation=greedy"])
    require_trainable(load_config(None, [*STATE, "games=[2048, candy_crush, tetris, mario]"]))


def test_idle_worker_check_counts_trunks():
    require_trainable(load_config(None, [*STATE, "rollout.workers=14"]))  # 2 trunks + 3 x 4 branches
    with pytest.raises(ConfigError, match=r"plays 14 episodes .*trunks=2.* 1 workers would idle"):
        require_trainable(load_config(None, [*STATE, "rollout.workers=15"]))
