"""Play whole episodes with the games' expert or random bots and record them as `Trajectory` records.

This is teacher data (cold-start SFT, the deterministic bank built from expert trajectories) and the
`coplay play --policy expert|random` path. Bots see only their seat's observation and info (never
`info["state"]`). Works for the three APIs a game may have: gymnasium, PettingZoo AEC and Parallel.
No torch, no ray.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coplay.types import Step, Trajectory

ObservationHook = Callable[[str, str, dict[str, Any]], None]  # (seat, observation, info)


def seat_role(info: dict[str, Any], seat: str) -> str:
    """A seat's role id from its view (`role_id`: never the display label, which a game may rename), else
    the seat name (Diplomacy's powers, single-player games)."""
    view = info.get("view") or {}
    role = (view.get("role_id") or view.get("role")) if isinstance(view, dict) else None
    return str(role) if role else seat


def _new_trajectory(game: str, policy: str, seed: int, seat: str, role: str) -> Trajectory:
    return Trajectory(
        episode_id=f"{game}-{policy}-s{seed}-{seat}", game=game, seat=seat, role=role, seed=seed,
        policy=policy
    )


def _record(traj: Trajectory, t: int, obs: str, info: dict[str, Any], decision: Any) -> Step:
    step = Step(
        t=t, observation=str(obs), action=decision.action, reward=0.0, score=float(info.get("score", 0.0)),
        intention=f"{decision.intention} {decision.reason}".strip(),
        features_before=dict(info.get("features", {})),
    )
    traj.steps.append(step)
    return step


def credit_outcome(step: Step | None, reward: float, info: dict[str, Any]) -> None:
    """Credit what followed a step: its reward, the features after it, its invalid flag and the score
    (shared by the bot and the model runners)."""
    if step is None:
        return
    step.reward += float(reward)
    step.features_after = dict(info.get("features", step.features_after))
    step.score = float(info.get("score", step.score))
    step.invalid = int(info.get("invalid_action", 0) or 0)


def play_single(game: str, policy: str, seed: int, max_steps: int | None, hook: ObservationHook | None,
                env_kwargs: dict[str, Any]) -> list[Trajectory]:
    from coplay_envs import make_bot, make_env

    env = make_env(game, **env_kwargs)
    bot = make_bot(game, policy, seed=seed)
    obs, info = env.reset(seed=seed)
    traj = _new_trajectory(game, policy, seed, "player_0", "player")
    done = False
    while not done and (max_steps is None or len(traj.steps) < max_steps):
        if hook:
            hook("player_0", obs, info)
        step = _record(traj, len(traj.steps), obs, info, bot.act(obs, info))
        obs, reward, terminated, truncated, info = env.step(step.action)
        credit_outcome(step, reward, info)
        done = terminated or truncated
        traj.terminated, traj.truncated = bool(terminated), bool(truncated)
    traj.truncated = traj.truncated or not done
    traj.score = float(info.get("score", 0.0))
    env.close()
    return [traj]


def play_aec(game: str, policy: str, seed: int, max_steps: int | None, hook: ObservationHook | None,
             env_kwargs: dict[str, Any]) -> list[Trajectory]:
    from coplay_envs import make_bot, make_env

    env = make_env(game, **env_kwargs)
    env.reset(seed=seed)
    bots = {a: make_bot(game, policy, seed=seed * 100 + i, agent=a)
            for i, a in enumerate(env.possible_agents)}
    trajs: dict[str, Trajectory] = {}
    last_step: dict[str, Step | None] = {a: None for a in env.possible_agents}
    decisions = 0
    for agent in env.agent_iter():
        obs, reward, terminated, truncated, info = env.last()
        if agent not in trajs:
            trajs[agent] = _new_trajectory(game, policy, seed, agent, seat_role(info, agent))
        credit_outcome(last_step[agent], reward, info)
        last_step[agent] = None if (terminated or truncated) else last_step[agent]
        traj = trajs[agent]
        traj.score = float(info.get("score", traj.score))
        if terminated or truncated:
            traj.terminated, traj.truncated = bool(terminated), bool(truncated)
            env.step(None)
            continue
        if max_steps is not None and decisions >= max_steps:
            break
        if hook:
            hook(agent, obs, info)
        last_step[agent] = _record(traj, len(traj.steps), obs, info, bots[agent].act(obs, info))
        env.step(last_step[agent].action)
        decisions += 1
    for agent, traj in trajs.items():
        if not traj.terminated and not traj.truncated:
            traj.truncated = True
            credit_outcome(last_step[agent], env.rewards.get(agent, 0.0), env.infos.get(agent, {}))
    env.close()
    return list(trajs.values())


def play_parallel(game: str, policy: str, seed: int, max_steps: int | None, hook: ObservationHook | None,
                  env_kwargs: dict[str, Any]) -> list[Trajectory]:
    from coplay_envs import make_bot, make_env

    env = make_env(game, **env_kwargs)
    observations, infos = env.reset(seed=seed)
    bots = {a: make_bot(game, policy, seed=seed * 100 + i, agent=a)
            for i, a in enumerate(env.possible_agents)}
    trajs = {a: _new_trajectory(game, policy, seed, a, seat_role(infos.get(a, {}), a))
             for a in env.possible_agents}
    rounds = 0
    while env.agents and (max_steps is None or rounds < max_steps):
        steps: dict[str, Step] = {}
        for agent in env.agents:
            if hook:
                hook(agent, observations[agent], infos[agent])
            traj = trajs[agent]
            steps[agent] = _record(traj, len(traj.steps), observations[agent], infos[agent],
                                   bots[agent].act(observations[agent], infos[agent]))
        observations, rewards, terms, truncs, infos = env.step({a: s.action for a, s in steps.items()})
        for agent, step in steps.items():
            credit_outcome(step, rewards.get(agent, 0.0), infos.get(agent, {}))
            trajs[agent].score = step.score
            trajs[agent].terminated = bool(terms.get(agent, False))
            trajs[agent].truncated = bool(truncs.get(agent, False))
        rounds += 1
    for traj in trajs.values():
        traj.truncated = traj.truncated or not traj.terminated
    env.close()
    return list(trajs.values())


def play_bot_episodes(game: str, policy: str, seeds: list[int], max_steps: int | None = None,
                      hook: ObservationHook | None = None,
                      env_kwargs: dict[str, Any] | None = None) -> list[Trajectory]:
    """One episode per seed with every seat played by `policy` (`expert` or `random`).

    Returns one `Trajectory` per seat per episode; `max_steps` caps the number of decisions (the episode
    is then marked truncated). `hook` sees every observation before its seat acts (for `--render`).
    """
    from coplay_envs import spec

    runner = {"gymnasium": play_single, "aec": play_aec, "parallel": play_parallel}[spec(game).api]
    out: list[Trajectory] = []
    for seed in seeds:
        out.extend(runner(game, policy, seed, max_steps, hook, env_kwargs or {}))
    return out
