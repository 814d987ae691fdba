"""Episode runners (issue 5): many episodes at once with their engine calls in flight together; every step
records exactly what the seat saw and did; multi-seat seats from the opponent pool, one record per seat.

The model's choices come from `ScriptedEngine` (given completion texts, real tokenizer) so the checks are
exact; prompts, parsing, games and records are the real ones. One test plays through the real `hf` engine.
"""

from __future__ import annotations

import asyncio
import re

import pytest

import coplay_envs
from coplay.agent.decision import ModelSeat
from coplay.engines.base import GenerationRequest, SamplingParams
from coplay.rollout.model_episodes import (
    EpisodePlan,
    RunnerContext,
    SeatPlayer,
    group_plans,
    play_episodes,
    with_versions,
)
from coplay.types import Shard, read_shard, to_dict, write_shard
from tests.helpers import ScriptedEngine

SAMPLING = SamplingParams(temperature=1.0, max_tokens=64)
SEAT = ModelSeat(act="act@v3", retrieve="retrieve@v2", act_sampling=SAMPLING, retrieve_sampling=SAMPLING,
                 prompt_budget=8000, history_len=2)


def first_legal(request: GenerationRequest, prompt: str) -> str:
    """Answer with the first legal action the prompt lists (free text filled in)."""
    match = re.search(r"Legal actions:\n(.*)", prompt)
    action = match[1].replace("<text>", "hello") if match else "up"
    return f"INTENTION: EXECUTE first option\nACTION: {action}"


@pytest.fixture(scope="module")
def tokenizer(tiny_model_config):
    from coplay.models.loading import load_tokenizer

    return load_tokenizer(tiny_model_config)


def play(engine, plans: list[EpisodePlan], concurrency: int = 16) -> tuple[list, RunnerContext]:
    ctx = RunnerContext(engine=engine, rules=coplay_envs.rules, skills_for=lambda game, role: None,
                        run_seed=9)
    return asyncio.run(play_episodes(ctx, plans, concurrency)), ctx


def test_single_player_groups_run_together_and_record_exactly_what_happened(tokenizer):
    engine = ScriptedEngine(tokenizer, first_legal, delay_s=0.001)
    plans = group_plans("2048", [5, 6], 3, SeatPlayer("model", SEAT), "it4", max_steps=6, iteration=4,
                        bank_version=2)
    trajectories, ctx = play(engine, plans)
    assert [t.episode_id for t in trajectories] == [p.episode_id for p in plans]
    assert engine.max_in_flight == 6  # every episode's call was in flight at once: the engine can batch them
    assert ctx.counters["steps"] == ctx.counters["model_calls"] == 36 and ctx.counters["env_ns"] > 0
    for traj in trajectories:
        assert (traj.iteration, traj.bank_version, traj.adapter_versions) == (4, 2, {"act": 3, "retrieve": 2})
        assert traj.truncated and not traj.terminated and len(traj.steps) == 6
        assert {s.group_id for s in traj.samples} == {f"2048/player/seed{traj.seed}"}
        assert [s.sample_id for s in traj.samples] == [i for step in traj.steps for i in step.sample_ids]
        # replaying the recorded actions reproduces every observation, feature, reward and score
        env = coplay_envs.make_env("2048")
        obs, info = env.reset(seed=traj.seed)
        for step, sample in zip(traj.steps, traj.samples, strict=True):
            assert (step.observation, step.features_before) == (obs, info["features"])
            assert f"Observation:\n{obs.rstrip()}" in tokenizer.decode(sample.prompt_ids)
            assert step.action == info["legal_actions"][0] and step.intention == "EXECUTE first option"
            obs, reward, _, _, info = env.step(step.action)
            assert (step.reward, step.features_after, step.score, step.invalid) == (
                reward, info["features"], info["score"], int(info["invalid_action"]))
        assert traj.score == info["score"] == sum(s.reward for s in traj.steps)
    same_seed = [t for t in trajectories if t.seed == 5]
    assert len({tuple(s.action for s in t.steps) for t in same_seed}) == 1  # scripted choices: same game


@pytest.mark.parametrize("game", ["2048", "candy_crush", "tetris"])
def test_an_episode_can_start_from_a_recorded_position(tokenizer, game):
    """`EpisodePlan.start_state` (the probe's positions, same-state groups): the seat sees exactly the
    recorded position, whatever the plan's seed."""
    env = coplay_envs.make_env(game)
    obs, info = env.reset(seed=3)
    for _ in range(5):
        obs, _, _, _, info = env.step(info["legal_actions"][-1])
    engine = ScriptedEngine(tokenizer, first_legal)
    plan = EpisodePlan(game, 99, f"{game}-probe", SeatPlayer("model", SEAT), max_steps=1,
                       start_state=info["state"])
    (traj,), _ = play(engine, [plan])
    assert traj.steps[0].observation == obs and traj.steps[0].features_before == info["features"]
    assert len(traj.steps) == 1 and traj.steps[0].action == info["legal_actions"][0]


def test_self_play_seats_from_the_pool_each_get_their_own_record(tokenizer):
    engine = ScriptedEngine(tokenizer, first_legal)
    frozen = with_versions(SEAT, "act@v1", None)
    players = {"player_1": SeatPlayer("frozen", frozen), "player_2": SeatPlayer("expert"),
               "player_3": SeatPlayer("random")}
    plans = [EpisodePlan("avalon", seed, f"av-{seed}", SeatPlayer("model", SEAT), players=players,
                         max_steps=40)
             for seed in (1, 2)]
    trajectories, _ = play(engine, plans)
    assert len(trajectories) == 10
    for traj in trajectories:
        assert traj.steps and all(f"You are {traj.seat}." in s.observation for s in traj.steps)
        label = {"player_1": "frozen@act@v1", "player_2": "expert",
                 "player_3": "random"}.get(traj.seat, "model")
        assert traj.policy == label
        if label in ("expert", "random"):
            assert traj.samples == [] and all(s.intention for s in traj.steps)  # the bot's tag and reason
            continue
        assert len(traj.samples) == len(traj.steps)
        assert {s.group_id for s in traj.samples} == {f"avalon/{traj.role}/seed{traj.seed}"}
        expected = 1 if label.startswith("frozen") else 3
        assert {s.adapter_version for s in traj.samples} == {expected}
        assert {r.adapter for r in engine.requests if f"You are {traj.seat}." in
                tokenizer.decode(r.prompt_ids)} == {"act@v1" if expected == 1 else "act@v3"}
    assert sum(len(t.steps) for t in trajectories if t.seed == 1) == 40  # max_steps counts decisions


def seeded_move(request: GenerationRequest, prompt: str) -> str:
    """A 2048 move picked by the request's sampling seed: the seed decides the game."""
    legal = ["up", "down", "left", "right"]
    return f"INTENTION: EXECUTE seeded\nACTION: {legal[request.seed % len(legal)]}"


def test_evaluations_of_the_same_weights_draw_the_same_samples_and_training_does_not(tokenizer, tmp_path):
    from coplay.config import load_config
    from coplay.eval.protocol import eval_plans
    from tests.helpers import DEMO_CONFIG

    cfg = load_config(DEMO_CONFIG, [f"run.out_dir={tmp_path}", "eval.episodes=3", "eval.max_steps=8"])
    player = SeatPlayer("model", SEAT)

    def moves(plans: list[EpisodePlan]) -> dict[int, list[str]]:
        trajectories, _ = play(ScriptedEngine(tokenizer, seeded_move), plans)
        return {t.seed: [s.action for s in t.steps] for t in trajectories}

    first, later = moves(eval_plans(cfg, player, "it0")), moves(eval_plans(cfg, player, "it3"))
    assert first == later  # common random numbers: a score difference between evaluations is the policy's
    assert len({tuple(m) for m in first.values()}) == 3  # each start seed still draws its own numbers
    one, two = (moves(group_plans("2048", [5], 1, player, f"it{i}", max_steps=8, iteration=i))
                for i in (1, 2))
    assert one != two  # each training iteration explores afresh


def test_diplomacy_powers_decide_together_each_round(tokenizer):
    engine = ScriptedEngine(tokenizer, lambda r, p: "INTENTION: DEFEND hold everything\nORDERS:\n",
                            delay_s=0.001)
    plans = [EpisodePlan("diplomacy", 3, "dip-3", SeatPlayer("model", SEAT),
                         env_kwargs={"max_phases": 2, "negotiation_rounds": 1, "start_years": 0})]
    trajectories, _ = play(engine, plans)
    assert sorted(t.seat for t in trajectories) == sorted(coplay_envs.make_env("diplomacy").possible_agents)
    assert engine.max_in_flight == 7  # all seven powers' calls of a round at once
    for traj in trajectories:
        assert traj.terminated or traj.truncated
        assert len(traj.steps) == 4 and all(s.parse_error == "no ACTION line" for s in traj.steps)
        movement = [s for s in traj.steps if "NOW: negotiation" not in s.observation]
        assert len(movement) == 2 and all(s.invalid > 0 for s in movement)  # no orders: every unit holds
        assert traj.score == 3 + (traj.seat == "RUSSIA")  # nobody moved: starting centres


def test_trajectories_round_trip_through_shards(tokenizer, tmp_path):
    engine = ScriptedEngine(tokenizer, first_legal)
    trajectories, _ = play(engine, group_plans("2048", [1], 2, SeatPlayer("model", SEAT), "rt", max_steps=3))
    path = write_shard(tmp_path / "rt.msgpack", Shard("rt", 0, 0, trajectories))
    assert [to_dict(t) for t in read_shard(path).trajectories] == [to_dict(t) for t in trajectories]


def test_real_tiny_model_episodes_through_the_hf_engine(tiny_model_config):
    from coplay.config import EngineConfig
    from coplay.engines.factory import make_engine

    engine = make_engine(tiny_model_config, EngineConfig(backend="hf", max_model_len=2048, max_num_seqs=8,
                                                         dtype="float32"))
    try:
        seat = ModelSeat(act=None, retrieve=None, act_sampling=SamplingParams(temperature=1.0, max_tokens=12),
                         retrieve_sampling=SAMPLING, prompt_budget=2000, history_len=2)
        plans = group_plans("2048", [0], 2, SeatPlayer("model", seat), "real", max_steps=3)
        first, _ = play(engine, plans)
        again, _ = play(engine, plans)
        for traj, replay in zip(first, again, strict=True):
            assert len(traj.samples) == len(traj.steps) == 3
            for sample in traj.samples:
                scored = engine.score(sample.prompt_ids, sample.completion_ids, None)
                assert max(abs(a - b) for a, b in zip(scored, sample.logprobs, strict=True)) < 1e-4
            # seeds derive from (run, iteration, episode, seat, step): a replay samples the same tokens (the
            # log-probs agree to float precision: batches were composed differently)
            assert [s.action for s in traj.steps] == [s.action for s in replay.steps]
            for sample, sample_again in zip(traj.samples, replay.samples, strict=True):
                assert (sample.prompt_ids, sample.completion_ids) == (sample_again.prompt_ids,
                                                                      sample_again.completion_ids)
                assert max(abs(a - b)
                           for a, b in zip(sample.logprobs, sample_again.logprobs, strict=True)) < 1e-4
        assert first[0].samples[0].completion_ids != first[1].samples[0].completion_ids  # episodes differ
    finally:
        engine.close()
