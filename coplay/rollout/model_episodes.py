"""Episode runners for the model (docs/architecture.md, issue 5): many episodes at once, their engine calls
batched.

Every episode is a coroutine; all of them run on one asyncio loop, so while one waits for the engine the
others step their games, and the engine sees many concurrent requests to batch. Seats are played by the
model (a `DecisionAgent` with given adapter versions), or by an opponent from the pool: a frozen earlier
adapter version (the same agent code with other engine names), an OpenAI-compatible endpoint (an
`OpenAISeat`: same prompts and parsing, no Samples) or an expert / random bot. Each seat's trajectory is its
own record. State grouping (`rollout.grouping=state`, `coplay.driver.anchors`) adds two kinds of episode:
a trunk records `info["state"]` at every step, and a branch starts from a recorded state with the trunk's
recent moves as history, lets the model decide once and hands the seat to a `Continuation`. No ray, no torch.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from coplay.agent.decision import DecisionAgent, ModelSeat, SkillSource
from coplay.agent.openai_player import ChatClient, OpenAIEndpoint, OpenAISeat, client_for, close_clients
from coplay.agent.prompts import HistoryEntry
from coplay.engines.base import Engine
from coplay.rollout.bot_episodes import credit_outcome, seat_role
from coplay.rollout.env_hosts import EnvHosts
from coplay.types import Step, Trajectory


@dataclass(frozen=True)
class SeatPlayer:
    """Who plays a seat: `model` (the seat config's adapters; its samples train), `current` (the same policy
    as an opponent: its samples do not train), `frozen` (`seat` with older engine names), `openai`
    (`endpoint`, with `seat`'s act sampling and history length) or a bot (`expert` / `random`)."""

    kind: str = "model"
    seat: ModelSeat | None = None
    endpoint: OpenAIEndpoint | None = None

    @property
    def label(self) -> str:
        if self.kind == "frozen" and self.seat is not None:
            return f"frozen@{self.seat.act}"
        return self.kind


@dataclass(frozen=True)
class Continuation:
    """Who plays a state-grouping branch after the model's first decision: the game's `random` or `expert`
    bot, seeded with `seed` (the same for every member of a group, so members that choose the same action
    see the same future: common random numbers), or `current` (the model plays on; those samples do not
    train)."""

    kind: str
    seed: int = 0


@dataclass
class EpisodePlan:
    """One episode to play: the game, its start seed, who plays each seat (missing seats: `default`)."""

    game: str
    seed: int
    episode_id: str
    default: SeatPlayer
    players: dict[str, SeatPlayer] = field(default_factory=dict)
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    max_steps: int | None = None
    iteration: int = 0
    bank_version: int = 0
    group: str = ""  # the GRPO group (episodes sharing start state and line-up); "" = by start seed
    # what the model seats' sampling seeds derive from; "" = (iteration, episode_id): every training episode
    # draws its own. Evaluation sets one without its label, so each evaluation of a run draws the same random
    # numbers on a seed and two policies' scores are compared on common random numbers.
    sample_key: str = ""
    # a recorded position to start from (`info["state"]`, single-player games): `reset(seed=seed,
    # options={"state": start_state})` reproduces it exactly; None starts from `seed` alone
    start_state: dict[str, Any] | None = None
    # `Trajectory.kind`: episode | trunk (records info["state"] at every step) | branch (records its first
    # step's state, and `continuation` plays after the model's first decision)
    kind: str = "episode"
    continuation: Continuation | None = None
    # the model seats' history at the start (a branch: the trunk's moves before its anchor, so the decision
    # is asked with the prompt the policy saw there)
    history: list[HistoryEntry] = field(default_factory=list)


@dataclass
class RunnerContext:
    """What every episode shares: the engine (None when no seat is a model seat), rules texts, skill sources
    per bank key, the run seed, and the endpoint clients of `openai` seats (closed by `play_episodes`)."""

    engine: Engine | None
    rules: Callable[[str], str]
    skills_for: Callable[[str, str], SkillSource | None]  # (game, role) -> skills or None
    run_seed: int = 0
    counters: dict[str, int] = field(default_factory=dict)
    openai_clients: dict[OpenAIEndpoint, ChatClient] = field(default_factory=dict)
    env_threads: int = 0  # > 0: env calls run on a pool of this many threads, off the event loop
    env_pool: ThreadPoolExecutor | None = None
    env_hosts: EnvHosts | None = None  # single-player envs live in these processes (`rollout.env_processes`)
    # watchers (`coplay play --render` shows each move as it is played): a seat's step once its outcome is
    # credited, and an episode's trajectories once it has ended
    on_step: Callable[[Trajectory, Step], None] | None = None
    on_episode: Callable[[list[Trajectory]], None] | None = None


class _Seat:
    """A seat's policy for one episode plus its trajectory."""

    def __init__(self, ctx: RunnerContext, plan: EpisodePlan, seat: str, role: str) -> None:
        self.player = plan.players.get(seat, plan.default)
        cont = plan.continuation
        self.traj = Trajectory(episode_id=plan.episode_id, game=plan.game, seat=seat, role=role,
                               seed=plan.seed, iteration=plan.iteration, bank_version=plan.bank_version,
                               policy=self.player.label + (f"+{cont.kind}" if cont else ""), group=plan.group,
                               kind=plan.kind)
        self.agent: DecisionAgent | OpenAISeat | None = None
        self.bot: Any = None
        # a branch's bot continuation takes over from the model after the first decision
        self.continuation_bot: Any = None
        if cont is not None and cont.kind != "current":
            from coplay_envs import make_bot

            self.continuation_bot = make_bot(plan.game, cont.kind, seed=cont.seed)
        self.record_states = {"trunk": None, "branch": 1}.get(plan.kind, 0)  # None: every step
        seed_parts = ((ctx.run_seed, plan.sample_key, seat) if plan.sample_key
                      else (ctx.run_seed, plan.iteration, plan.episode_id, seat))
        if self.player.kind in ("model", "current", "frozen"):
            assert self.player.seat is not None, "a model seat needs a ModelSeat"
            assert ctx.engine is not None, (f"{plan.episode_id}: seat {seat} is a {self.player.kind} seat; "
                                            f"it needs an engine")
            ms = self.player.seat
            self.traj.adapter_versions = {k: int(v.rsplit("@v", 1)[1]) for k, v in
                                          (("act", ms.act), ("retrieve", ms.retrieve)) if v}
            skills = ctx.skills_for(plan.game, role) if self.player.kind in ("model", "current") else None
            act_group = (f"{plan.group}/{seat}" if plan.group else f"{plan.game}/{role}/seed{plan.seed}")
            self.agent = DecisionAgent(
                game=plan.game, rules=ctx.rules(plan.game), engine=ctx.engine, seat=ms, skills=skills,
                act_group=act_group, retrieve_group=f"{plan.game}/{role}",
                seed_parts=seed_parts, sample_prefix=f"{plan.episode_id}/{seat}", history=list(plan.history))
        elif self.player.kind == "openai":
            assert self.player.seat is not None and self.player.endpoint is not None, \
                "an openai seat needs a ModelSeat (sampling, history length) and an OpenAIEndpoint"
            self.agent = OpenAISeat(
                game=plan.game, rules=ctx.rules(plan.game),
                client=client_for(ctx.openai_clients, self.player.endpoint),
                sampling=self.player.seat.act_sampling, history_len=self.player.seat.history_len,
                seed_parts=seed_parts, counters=ctx.counters, prompt_format=self.player.seat.prompt_format)
        else:
            from coplay_envs import make_bot, spec

            kwargs = {} if spec(plan.game).api == "gymnasium" else {"agent": seat}
            self.bot = make_bot(plan.game, self.player.kind, seed=plan.seed * 1000 + len(seat), **kwargs)
        self.open: Step | None = None
        self.open_by_agent = False
        self.on_step = ctx.on_step

    async def act(self, observation: str, info: dict[str, Any]) -> str:
        t = len(self.traj.steps)
        bot = self.continuation_bot if self.continuation_bot is not None and t >= 1 else self.bot
        self.open_by_agent = bot is None  # a seat has an agent or a bot; a branch hands over after t = 0
        if bot is None:
            assert self.agent is not None
            step, samples = await self.agent.decide(t, str(observation), info)
            self.traj.samples.extend(samples)
        else:
            choice = bot.act(observation, info)
            step = Step(t=t, observation=str(observation), action=choice.action, reward=0.0,
                        score=float(info.get("score", 0.0)), intention=f"{choice.intention} {choice.reason}",
                        features_before=dict(info.get("features", {})))
        if self.record_states is None or t < self.record_states:
            step.state = info["state"]
        self.traj.steps.append(step)
        self.open = step
        return step.action

    def close(self, reward: float, info: dict[str, Any]) -> None:
        """Credit the outcome of this seat's open step."""
        step = self.open
        if step is None:
            return
        credit_outcome(step, reward, info)
        self.traj.score = step.score
        if self.open_by_agent and self.agent is not None:
            self.agent.observe_outcome(step)
        self.open = None
        if self.on_step is not None:
            self.on_step(self.traj, step)


async def _timed(ctx: RunnerContext, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call an env method and add its wall time to `ctx.counters["env_ns"]` (the e2e time split's env
    part). With `ctx.env_pool` the call runs on a pool thread, so a CPU-heavy env (Mario's emulator) steps
    while the event loop keeps other episodes' model calls going; one env is still stepped by one call at a
    time (its episode awaits each step), so trajectories are the same either way."""
    start = time.perf_counter_ns()
    try:
        if ctx.env_pool is None:
            return fn(*args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(ctx.env_pool, partial(fn, *args, **kwargs))
    finally:
        ctx.counters["env_ns"] = ctx.counters.get("env_ns", 0) + time.perf_counter_ns() - start


async def _play_gymnasium(ctx: RunnerContext, plan: EpisodePlan) -> list[Trajectory]:
    from coplay_envs import make_env

    if ctx.env_hosts is not None:
        env = await asyncio.get_running_loop().run_in_executor(
            ctx.env_pool, partial(ctx.env_hosts.make, plan.game, **plan.env_kwargs))
    else:
        env = make_env(plan.game, **plan.env_kwargs)
    options = {"state": plan.start_state} if plan.start_state is not None else None
    obs, info = await _timed(ctx, env.reset, seed=plan.seed, options=options)
    seat = _Seat(ctx, plan, "player_0", "player")
    done = False
    while not done and (plan.max_steps is None or len(seat.traj.steps) < plan.max_steps):
        action = await seat.act(obs, info)
        obs, reward, terminated, truncated, info = await _timed(ctx, env.step, action)
        seat.close(reward, info)
        done = terminated or truncated
        seat.traj.terminated, seat.traj.truncated = bool(terminated), bool(truncated)
    seat.traj.truncated = seat.traj.truncated or not done
    await _timed(ctx, env.close)
    return [seat.traj]


async def _play_aec(ctx: RunnerContext, plan: EpisodePlan) -> list[Trajectory]:
    from coplay_envs import make_env

    env = make_env(plan.game, **plan.env_kwargs)
    await _timed(ctx, env.reset, seed=plan.seed)
    seats: dict[str, _Seat] = {}
    decisions = 0
    for agent in env.agent_iter():
        obs, reward, terminated, truncated, info = env.last()
        if agent not in seats:
            seats[agent] = _Seat(ctx, plan, agent, seat_role(info, agent))
        seat = seats[agent]
        seat.close(reward, info)
        if terminated or truncated:
            seat.traj.terminated, seat.traj.truncated = bool(terminated), bool(truncated)
            seat.traj.score = float(info.get("score", seat.traj.score))
            await _timed(ctx, env.step, None)
            continue
        if plan.max_steps is not None and decisions >= plan.max_steps:
            break
        action = await seat.act(obs, info)
        await _timed(ctx, env.step, action)
        decisions += 1
    for agent, seat in seats.items():
        if not (seat.traj.terminated or seat.traj.truncated):
            seat.traj.truncated = True
            seat.close(env.rewards.get(agent, 0.0), env.infos.get(agent, {}))
    env.close()
    return [s.traj for s in seats.values()]


async def _play_parallel(ctx: RunnerContext, plan: EpisodePlan) -> list[Trajectory]:
    from coplay_envs import make_env

    env = make_env(plan.game, **plan.env_kwargs)
    observations, infos = await _timed(ctx, env.reset, seed=plan.seed)
    seats = {a: _Seat(ctx, plan, a, seat_role(infos.get(a, {}), a)) for a in env.possible_agents}
    rounds = 0
    while env.agents and (plan.max_steps is None or rounds < plan.max_steps):
        live = list(env.agents)
        actions = await asyncio.gather(*(seats[a].act(observations[a], infos[a]) for a in live))
        observations, rewards, terms, truncs, infos = await _timed(ctx, env.step,
                                                             dict(zip(live, actions, strict=True)))
        for a in live:
            seats[a].close(rewards.get(a, 0.0), infos.get(a, {}))
            seats[a].traj.terminated = bool(terms.get(a, False))
            seats[a].traj.truncated = bool(truncs.get(a, False))
        rounds += 1
    for seat in seats.values():
        seat.traj.truncated = seat.traj.truncated or not seat.traj.terminated
    env.close()
    return [s.traj for s in seats.values()]


async def play_episode(ctx: RunnerContext, plan: EpisodePlan) -> list[Trajectory]:
    """Play one episode; one trajectory per seat."""
    from coplay_envs import spec

    api = spec(plan.game).api
    runner = {"gymnasium": _play_gymnasium, "aec": _play_aec, "parallel": _play_parallel}[api]
    trajectories = await runner(ctx, plan)
    for traj in trajectories:
        for key, value in _agent_counters(traj).items():
            ctx.counters[key] = ctx.counters.get(key, 0) + value
    return trajectories


def _agent_counters(traj: Trajectory) -> dict[str, int]:
    return {"steps": len(traj.steps), "invalid_actions": sum(1 for s in traj.steps if s.invalid),
            "parse_errors": sum(1 for s in traj.steps if s.parse_error),
            "model_calls": len(traj.samples)}


async def play_episodes(ctx: RunnerContext, plans: list[EpisodePlan], concurrency: int,
                        done: Callable[[int], None] | None = None) -> list[Trajectory]:
    """Play all plans with at most `concurrency` episodes in flight; results in plan order. `done(1)` is
    called as each episode ends (a progress bar)."""
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(plan: EpisodePlan) -> list[Trajectory]:
        async with gate:
            trajectories = await play_episode(ctx, plan)
        if ctx.on_episode is not None:
            ctx.on_episode(trajectories)
        if done is not None:
            done(1)
        return trajectories

    # hosted envs are stepped by blocking pipe calls: they need threads even when env_threads is 0
    threads = ctx.env_threads or (concurrency if ctx.env_hosts is not None else 0)
    if threads > 0 and ctx.env_pool is None:
        ctx.env_pool = ThreadPoolExecutor(threads, thread_name_prefix="coplay-env")
    try:
        results = await asyncio.gather(*(one(p) for p in plans))
    finally:
        await close_clients(ctx.openai_clients)
        if ctx.env_pool is not None:
            ctx.env_pool.shutdown(wait=True)
            ctx.env_pool = None
    return [t for trajs in results for t in trajs]


def group_plans(game: str, seeds: list[int], group_size: int, default: SeatPlayer, prefix: str,
                **kwargs: Any) -> list[EpisodePlan]:
    """G episodes per start seed (GRPO groups), ids `<prefix>-s<seed>-g<i>`."""
    return [EpisodePlan(game=game, seed=seed, episode_id=f"{prefix}-s{seed}-g{i}", default=default, **kwargs)
            for seed in seeds for i in range(group_size)]


def with_versions(seat: ModelSeat, act: str | None, retrieve: str | None) -> ModelSeat:
    """The same seat settings with other adapter engine names (e.g. a frozen opponent)."""
    return replace(seat, act=act, retrieve=retrieve)
