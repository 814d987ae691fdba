"""State grouping through the real runner (issue 36): the model's trunks record their positions, its
branches start from one anchor's exact state bytes with the trunk's moves as history, the model decides once
and the seeded continuation plays on; a branch's t = 0 return is its reward plus the continuation's return;
act advantages are per anchor at t = 0 and sum to zero.

The model's choices come from `ScriptedEngine` (given texts, real tokenizer): here the request's sampling
seed picks the move, so a group's members differ as sampled answers would. Games, prompts, bots, rewards and
advantages are the real ones."""

from __future__ import annotations

import asyncio
import json

import pytest

import coplay_envs
from coplay.config import load_config
from coplay.driver.plans import iteration_plans
from coplay.driver.records import IterationData
from coplay.engines.base import GenerationRequest
from coplay.learn.advantages import act_advantages, all_advantages
from coplay.learn.rewards import assign_rewards
from coplay.rollout.model_episodes import RunnerContext, play_episodes
from tests.helpers import ScriptedEngine

VERSIONS = {"act": 1, "retrieve": 1}
MOVES = ["up", "down", "left", "right"]


def seeded_move(request: GenerationRequest, prompt: str) -> str:
    return f"INTENTION: MERGE seeded\nACTION: {MOVES[request.seed % len(MOVES)]}"


@pytest.fixture(scope="module")
def tokenizer(tiny_model_config):
    from coplay.models.loading import load_tokenizer

    return load_tokenizer(tiny_model_config)


def _config(continuation: str = "random"):
    return load_config(None, ["rollout.grouping=state", "rollout.start_states=3", "rollout.group_size=4",
                              "rollout.state_groups.trunks=2", "rollout.state_groups.horizon=4",
                              f"rollout.state_groups.continuation={continuation}", "rollout.max_steps=12",
                              "rollout.history_len=2", "engine.max_model_len=4096"])


def _play(tokenizer, plans):
    engine = ScriptedEngine(tokenizer, seeded_move)
    ctx = RunnerContext(engine=engine, rules=coplay_envs.rules, skills_for=lambda game, role: None,
                        run_seed=5)
    return asyncio.run(play_episodes(ctx, plans, 16)), engine


def _bytes(state) -> bytes:
    return json.dumps(state, sort_keys=True, separators=(",", ":")).encode()


def _two_iterations(tokenizer, continuation: str = "random"):
    cfg = _config(continuation)
    first, _ = _play(tokenizer, iteration_plans(cfg, 1, VERSIONS, [], 0))
    plans = iteration_plans(cfg, 2, VERSIONS, [], 0, previous=IterationData(1, first, [], {}))
    second, engine = _play(tokenizer, plans)
    for traj in second:
        assign_rewards(traj, 1.0, lambda skill: [], lambda skill, features: True)
    return cfg, first, plans, second, engine


def test_branches_share_their_anchor_and_return_reward_plus_continuation(tokenizer):
    cfg, first, plans, second, engine = _two_iterations(tokenizer)
    trunks = [t for t in first if t.kind == "trunk"]
    assert len(trunks) == 2 and all(t.policy == "model" and len(t.steps) == 12 for t in trunks)
    assert all(s.state is not None for t in trunks for s in t.steps)
    plan_of = {p.episode_id: p for p in plans}
    branches = [t for t in second if t.kind == "branch"]
    assert len(branches) == 12 and {t.policy for t in branches} == {"model+random"}
    by_group: dict[str, list] = {}
    for traj in branches:
        by_group.setdefault(traj.group, []).append(traj)
        plan = plan_of[traj.episode_id]
        # the position the env was reset to is the anchor's, byte for byte
        assert _bytes(traj.steps[0].state) == _bytes(plan.start_state)
        assert [s.state is None for s in traj.steps] == [False] + [True] * (len(traj.steps) - 1)
        # the model decided once (its act sample at t = 0, asked with the trunk's moves as history) ...
        assert [x.meta["t"] for x in traj.samples] == [0]
        # ... then the continuation bot, seeded per anchor, played: replay it from the anchor
        env = coplay_envs.make_env("2048")
        env.reset(options={"state": plan.start_state})
        obs, reward, terminated, truncated, info = env.step(traj.steps[0].action)
        rewards = [reward]
        bot = coplay_envs.make_bot("2048", "random", seed=plan.continuation.seed)
        for step in traj.steps[1:]:
            assert step.action == bot.act(obs, info).action and not step.sample_ids
            obs, reward, terminated, truncated, info = env.step(step.action)
            rewards.append(reward)
        assert [s.reward for s in traj.steps] == rewards
        assert len(traj.steps) == plan.max_steps or terminated
        # the t = 0 return is the decision's reward plus the continuation's return
        assert traj.samples[0].reward == pytest.approx(rewards[0] + sum(rewards[1:]))
    for members in by_group.values():
        assert len(members) == 4 and len({_bytes(m.steps[0].state) for m in members}) == 1
        assert len({m.steps[0].observation for m in members}) == 1
        # common random numbers: members that chose the same move lived the same continuation
        for a in members:
            for b in members:
                if a.steps[0].action == b.steps[0].action:
                    assert [s.action for s in a.steps] == [s.action for s in b.steps]
    adv = act_advantages(second)
    assert set(adv) == {t.samples[0].sample_id for t in branches}  # trunks' act samples do not train
    for members in by_group.values():
        assert sum(adv[m.samples[0].sample_id] for m in members) == pytest.approx(0.0, abs=1e-9)
    assert any(v != 0.0 for v in adv.values())  # the seeded moves gave the groups reward variance
    assert set(all_advantages(second)) == set(adv)  # no bank: no retrieval samples


def test_the_branch_prompt_shows_the_trunks_moves_before_the_anchor(tokenizer):
    _, first, plans, second, _ = _two_iterations(tokenizer)
    trunks = {t.episode_id: t for t in first}
    plan_of = {p.episode_id: p for p in plans}
    shown = 0
    for traj in (t for t in second if t.kind == "branch"):
        prompt = tokenizer.decode(traj.samples[0].prompt_ids)
        history = plan_of[traj.episode_id].history
        if not history:
            assert "Recent steps: none yet." in prompt
            continue
        source = next(t for t in trunks.values() if t.seed == traj.seed)
        for entry in history:
            assert source.steps[entry.t].action == entry.action
            line = f"t={entry.t}: {entry.intention} | action: {entry.action} | reward {entry.reward:g}"
            assert line in prompt
        shown += 1
    assert shown  # anchors past a trunk's first step carry its moves


def test_a_current_continuation_plays_on_with_the_model_and_only_t0_trains(tokenizer):
    _, _, plans, second, _ = _two_iterations(tokenizer, "current")
    branches = [t for t in second if t.kind == "branch"]
    assert {t.policy for t in branches} == {"model+current"}
    assert all(len(t.samples) == len(t.steps) > 1 for t in branches)  # the model played every step
    adv = act_advantages(second)
    assert set(adv) == {t.samples[0].sample_id for t in branches}
    for traj in branches:
        assert traj.samples[0].reward == pytest.approx(sum(s.reward for s in traj.steps))
