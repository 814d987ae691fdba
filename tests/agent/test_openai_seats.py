"""Endpoint seats in self-play: Avalon episodes with two seats played by a local OpenAI-compatible endpoint
and the rest by bots (no engine at all), failures as counted fallbacks, the opponent pool's `openai` draws,
and the config rejecting an `openai` weight without an endpoint."""

from __future__ import annotations

import asyncio
import random

import pytest
from test_openai_endpoint import MODEL, EndpointServer, closed_port_url

import coplay_envs
from coplay.agent.decision import ModelSeat
from coplay.agent.openai_player import OpenAIEndpoint
from coplay.agent.prompts import act_messages
from coplay.config import ConfigError, load_config
from coplay.driver.lineups import draw_opponent
from coplay.driver.plans import iteration_plans, model_seat
from coplay.engines.base import SamplingParams
from coplay.rollout.model_episodes import EpisodePlan, RunnerContext, SeatPlayer, play_episodes
from coplay.types import Trajectory

SEAT = ModelSeat(act="act@v1", retrieve="retrieve@v1",
                 act_sampling=SamplingParams(temperature=0.5, max_tokens=40),
                 retrieve_sampling=SamplingParams(), prompt_budget=4096, history_len=2)
ENDPOINT_SEATS = ("player_1", "player_3")


def play_avalon(endpoint: OpenAIEndpoint,
                seeds: tuple[int, ...] = (3,)) -> tuple[list[Trajectory], RunnerContext]:
    """Avalon with ENDPOINT_SEATS on the endpoint and the other seats expert bots; no engine."""
    ctx = RunnerContext(engine=None, rules=coplay_envs.rules, skills_for=lambda g, r: None, run_seed=11)
    player = SeatPlayer("openai", SEAT, endpoint)
    plans = [EpisodePlan("avalon", seed, f"ep-s{seed}", SeatPlayer("expert"),
                         dict.fromkeys(ENDPOINT_SEATS, player))
             for seed in seeds]
    trajectories = asyncio.run(play_episodes(ctx, plans, concurrency=len(plans)))
    return trajectories, ctx


def endpoint_steps(trajectories: list[Trajectory]) -> list:
    return [s for t in trajectories if t.seat in ENDPOINT_SEATS for s in t.steps]


def test_avalon_with_two_endpoint_seats_completes_with_the_endpoints_moves():
    with EndpointServer() as server:
        trajectories, ctx = play_avalon(server.endpoint(), seeds=(3, 4))
    assert len(trajectories) == 10 and all(t.terminated for t in trajectories)
    by_seat = {t.seat: t for t in trajectories if t.episode_id == "ep-s3"}
    assert {by_seat[s].policy for s in ENDPOINT_SEATS} == {"openai"}
    assert {by_seat[s].policy for s in ("player_0", "player_2", "player_4")} == {"expert"}
    steps = endpoint_steps(trajectories)
    assert steps and len(server.requests) == len(steps) == ctx.counters["openai_calls"]
    # the endpoint answered the first legal action in the act format: parsed cleanly, legal, played as is
    assert all(s.intention == "EXPLORE take the first option" and not s.parse_error and s.invalid == 0
               for s in steps)
    assert (any(s.action.startswith("say ") for s in steps)
            and any(s.action.startswith("propose ") for s in steps))
    assert ctx.counters.get("openai_endpoint_errors", 0) == ctx.counters.get("openai_parse_errors", 0) == 0
    assert all(not t.samples for t in trajectories)  # endpoint seats are opponents: nothing to train on
    assert ctx.openai_clients == {}  # clients closed when the episodes are done


def test_endpoint_sees_the_agents_exact_prompt_and_the_seat_sampling():
    with EndpointServer() as server:
        trajectories, _ = play_avalon(server.endpoint())
    first = next(s for t in trajectories if t.seat == "player_1" for s in t.steps)
    bodies = [r["body"] for r in server.requests]
    first_body = next(b for b in bodies
                      if b["messages"][1]["content"].startswith(f"Observation:\n{first.observation}"))
    legal = (first_body["messages"][1]["content"].split("Legal actions:\n", 1)[1].split("\n\n", 1)[0]
             .splitlines())
    assert first_body["messages"] == act_messages("avalon", coplay_envs.rules("avalon"), first.observation,
                                                  legal, None, [])
    assert {(b["model"], b["temperature"], b["max_tokens"]) for b in bodies} == {(MODEL, 0.5, 40)}
    assert len({b["seed"] for b in bodies}) == len(bodies)  # per (run, episode, seat, step) seeds
    later = [b["messages"][1]["content"] for b in bodies
             if "Recent steps (oldest first)" in b["messages"][1]["content"]]
    assert later and all(c.count("\nt=") <= SEAT.history_len for c in later)  # bounded history


@pytest.mark.parametrize("mode", ["error500", "refused"])
def test_endpoint_failures_are_counted_fallbacks(mode):
    if mode == "refused":
        trajectories, ctx = play_avalon(OpenAIEndpoint(closed_port_url(), MODEL, timeout_s=2.0,
                                                       max_retries=0))
    else:
        with EndpointServer(lambda n: mode) as server:
            trajectories, ctx = play_avalon(server.endpoint(max_retries=0))
    assert all(t.terminated for t in trajectories)
    steps = endpoint_steps(trajectories)
    assert steps and ctx.counters["openai_endpoint_errors"] == ctx.counters["openai_calls"] == len(steps)
    assert all(s.action == "" and s.parse_error.startswith("endpoint error") for s in steps)
    # the game applied its documented fallback at every endpoint step (the bots never play invalid moves)
    assert all(s.invalid for s in steps) and ctx.counters["invalid_actions"] == len(steps)
    assert ctx.counters["parse_errors"] == len(steps)


def test_unparseable_answers_are_counted_fallbacks():
    with EndpointServer(lambda n: "garbage") as server:
        trajectories, ctx = play_avalon(server.endpoint())
    assert all(t.terminated for t in trajectories)
    steps = endpoint_steps(trajectories)
    assert ctx.counters["openai_parse_errors"] == ctx.counters["openai_calls"] == len(steps) > 0
    assert ctx.counters.get("openai_endpoint_errors", 0) == 0
    assert all(s.action == "" and "no ACTION line" in s.parse_error for s in steps)


def pool_config(**opponents: object):
    overrides = [f"rollout.opponents.{'endpoint.' + k[7:] if k.startswith('openai_') else k}={v}"
                 for k, v in opponents.items()]
    return load_config(overrides=overrides)


def test_openai_weight_without_an_endpoint_is_rejected_at_load():
    with pytest.raises(ConfigError, match="endpoint.base_url and rollout.opponents.endpoint.model"):
        pool_config(openai=0.2)
    with pytest.raises(ConfigError, match="endpoint.model"):
        pool_config(openai=0.2, openai_base_url="http://127.0.0.1:8000/v1")
    with pytest.raises(ConfigError, match="http:// or https://"):
        pool_config(openai=0.2, openai_base_url="127.0.0.1:8000/v1", openai_model="m")
    cfg = pool_config(openai=0.2, openai_base_url="http://127.0.0.1:8000/v1", openai_model="m")
    assert cfg.rollout.opponents.openai == 0.2
    assert pool_config(openai_base_url="http://127.0.0.1:8000/v1").rollout.opponents.openai == 0.0


def test_opponent_pool_draws_the_endpoint_with_its_weight():
    cfg = pool_config(current=0.5, frozen=0, expert=0, random=0, openai=0.5,
                      openai_base_url="http://127.0.0.1:9/v1", openai_model="m", openai_api_key_env="MY_KEY",
                      openai_timeout_s=7, openai_max_retries=1)
    current = model_seat(cfg, {"act": 2, "retrieve": 2})
    rng = random.Random(0)
    draws = [draw_opponent(cfg, rng, [1], current) for _ in range(400)]
    endpoint_draws = [d for d in draws if d.kind == "openai"]
    assert 150 < len(endpoint_draws) < 250 and {d.kind for d in draws} == {"openai", "current"}
    assert endpoint_draws[0] == SeatPlayer("openai", current,
                                           OpenAIEndpoint("http://127.0.0.1:9/v1", "m", "MY_KEY", 7.0, 1))
    no_weight = pool_config(current=0.5, frozen=0, expert=0, random=0, openai_base_url="http://127.0.0.1:9/v1",
                            openai_model="m")
    assert all(draw_opponent(no_weight, rng, [1], current).kind == "current" for _ in range(100))


def test_iteration_plans_seat_the_endpoint_beside_the_policy():
    cfg = load_config(overrides=["games=[avalon]", "rollout.opponents.current=0",
                                 "rollout.opponents.frozen=0", "rollout.opponents.expert=0",
                                 "rollout.opponents.random=0", "rollout.opponents.openai=1",
                                 "rollout.opponents.endpoint.base_url=http://h:1/v1",
                                 "rollout.opponents.endpoint.model=m"])
    plans = iteration_plans(cfg, 1, {"act": 1, "retrieve": 1}, [], bank_version=0)
    assert plans and all(p.default.kind == "model" for p in plans)
    assert all(len(p.players) == len(coplay_envs.seats("avalon")) - 1
               and {s.kind for s in p.players.values()} == {"openai"}
               for p in plans)
