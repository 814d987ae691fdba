"""Env steps off the worker's event loop (issue 18 part 4, `rollout.env_threads`): Mario's emulator steps on
pool threads while the loop keeps other episodes' model calls going, and the trajectories are exactly those
of stepping in the loop (one env is still stepped one call at a time). With `rollout.env_processes` the envs
live in host processes, with the same trajectories; a host's failure comes back as one clear error."""

from __future__ import annotations

import asyncio
import threading

import pytest

import coplay_envs
from coplay.rollout.model_episodes import RunnerContext, SeatPlayer, _timed, group_plans, play_episodes
from coplay.types import to_dict
from tests.helpers import ScriptedEngine
from tests.rollout.test_model_episodes import SEAT, first_legal


@pytest.fixture(scope="module")
def tokenizer(tiny_model_config):
    from coplay.models.loading import load_tokenizer

    return load_tokenizer(tiny_model_config)


def _play(tokenizer, env_threads: int, hosts=None):
    engine = ScriptedEngine(tokenizer, first_legal, delay_s=0.001)
    plans = group_plans("mario", [3], 3, SeatPlayer("model", SEAT), "it1", max_steps=5, iteration=1)
    ctx = RunnerContext(engine=engine, rules=coplay_envs.rules, skills_for=lambda game, role: None,
                        run_seed=9, env_threads=env_threads, env_hosts=hosts)
    return asyncio.run(play_episodes(ctx, plans, 8)), ctx, engine


def test_mario_trajectories_are_the_same_with_env_threads_and_calls_still_overlap(tokenizer):
    in_loop, ctx_loop, _ = _play(tokenizer, 0)
    threaded, ctx_threads, engine = _play(tokenizer, 2)
    assert [to_dict(t) for t in threaded] == [to_dict(t) for t in in_loop]
    assert engine.max_in_flight >= 2  # model calls of several episodes were in flight together
    assert ctx_threads.counters["env_ns"] > 0 and ctx_threads.env_pool is None  # pool closed at the end


def test_env_calls_run_on_a_pool_thread_not_the_event_loop():
    async def where(threads: int) -> tuple[int, int]:
        ctx = RunnerContext(engine=None, rules=coplay_envs.rules, skills_for=lambda game, role: None,
                            env_threads=threads)
        if threads:
            from concurrent.futures import ThreadPoolExecutor

            ctx.env_pool = ThreadPoolExecutor(threads)
        try:
            return threading.get_ident(), await _timed(ctx, threading.get_ident)
        finally:
            if ctx.env_pool is not None:
                ctx.env_pool.shutdown()

    loop_thread, env_thread = asyncio.run(where(1))
    assert env_thread != loop_thread
    loop_thread, env_thread = asyncio.run(where(0))
    assert env_thread == loop_thread


def test_mario_in_env_processes_plays_the_same_trajectories_as_in_the_loop(tokenizer):
    import os

    from coplay.rollout.env_hosts import EnvHosts

    in_loop, _, _ = _play(tokenizer, 0)
    hosts = EnvHosts(2)
    try:
        hosted, ctx, engine = _play(tokenizer, 0, hosts)  # no env_threads: hosted envs get threads anyway
        assert [to_dict(t) for t in hosted] == [to_dict(t) for t in in_loop]
        assert ctx.counters["env_ns"] > 0 and ctx.env_pool is None
        assert len(hosts.pids) == 2 and os.getpid() not in hosts.pids
        again, _, _ = _play(tokenizer, 0, hosts)  # the hosts serve the next rollout call too
        assert [to_dict(t) for t in again] == [to_dict(t) for t in in_loop]
    finally:
        hosts.close()


def test_a_failing_env_call_comes_back_with_the_hosts_traceback_and_a_dead_host_is_replaced():
    from coplay.rollout.env_hosts import EnvHosts, EnvProcessError

    hosts = EnvHosts(1)
    try:
        with pytest.raises(EnvProcessError, match="no-such-game"):
            hosts.make("no-such-game")
        env = hosts.make("2048")
        obs, _ = env.reset(seed=1)
        assert obs
        with pytest.raises(EnvProcessError, match="Seed must be a python integer"):
            env.reset(seed="not a seed")  # the env's own error, with the host's traceback
        first = hosts.pids[0]
        hosts._hosts[0].process.kill()
        hosts._hosts[0].process.join()
        with pytest.raises(EnvProcessError, match="died"):
            env.reset(seed=2)
        assert hosts.make("2048").reset(seed=1)[0] == obs and hosts.pids[0] != first
    finally:
        hosts.close()
