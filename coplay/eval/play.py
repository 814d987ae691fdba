"""`coplay play`: play a game with any policy of `coplay.eval.policies` (a bot, the base model, a run's
adapters, an endpoint) and show a table of scores; `render` prints every observation, the action taken, its
reward, and the final state; the trajectories can be written as a shard. Models play through the same
in-process runner as `coplay eval` (`coplay.eval.runner`). No ray.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from coplay.config import CoplayConfig
from coplay.driver.progress import phase
from coplay.eval.policies import BOTS, Policy
from coplay.eval.stats import summarize
from coplay.rollout.bot_episodes import play_bot_episodes
from coplay.types import Shard, Trajectory, write_shard


def render_trajectories(game: str, trajectories: list[Trajectory], env_kwargs: dict[str, Any]) -> str:
    """`--render`: every step's observation, then the action taken, its reward and the score after it; at
    the end of each episode its final state (single-player games: the board after the last action, replayed
    from the seed; every game: how it ended and the seat's score)."""
    import coplay_envs

    lines: list[str] = []
    for traj in trajectories:
        lines.append(f"=== {game} seed {traj.seed}, seat {traj.seat} ({traj.role}) ===")
        for step in traj.steps:
            lines.append(f"--- step {step.t} ---\n{step.observation}")
            note = f"  [parse error: {step.parse_error}]" if step.parse_error else ""
            invalid = "  [invalid]" if step.invalid else ""
            lines.append(f"action: {step.action!r}  reward: {step.reward:g}  score: {step.score:g}"
                         f"{invalid}{note}")
        if coplay_envs.spec(game).api == "gymnasium":
            lines.append(f"--- final state ---\n{_final_observation(game, traj, env_kwargs)}")
        ended = "terminated" if traj.terminated else "truncated (step cap)" if traj.truncated else "stopped"
        lines.append(f"final: {ended} after {len(traj.steps)} step(s), score {traj.score:g}\n")
    return "\n".join(lines)


def _final_observation(game: str, traj: Trajectory, env_kwargs: dict[str, Any]) -> str:
    """The single-player board after the trajectory's last action: the seeded env replayed."""
    from coplay_envs import make_env

    env = make_env(game, **env_kwargs)
    try:
        obs, _ = env.reset(seed=traj.seed)
        for step in traj.steps:
            obs, *_ = env.step(step.action)
    finally:
        env.close()
    return str(obs)


def score_table(trajectories: list[Trajectory], title: str) -> str:
    """A rich table: one row per (episode, seat), then mean ± 95% CI per seat/role."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for col in ("seed", "seat", "role", "steps", "score", "invalid"):
        table.add_column(col, justify="right" if col in ("seed", "steps", "score", "invalid") else "left")
    for t in trajectories:
        table.add_row(str(t.seed), t.seat, t.role, str(len(t.steps)), f"{t.score:g}",
                      str(sum(s.invalid for s in t.steps)))
    by_role: dict[str, list[float]] = {}
    for t in trajectories:
        by_role.setdefault(t.role, []).append(t.score)
    summary = Table(title="summary (mean, 95% t-interval)")
    for col in ("role", "n", "mean", "95% CI", "median", "min", "max"):
        summary.add_column(col)
    for role, scores in sorted(by_role.items()):
        s = summarize(scores)
        summary.add_row(role, str(s.n), f"{s.mean:.2f}", f"[{s.ci_low:.2f}, {s.ci_high:.2f}]",
                        f"{s.median:g}", f"{s.min:g}", f"{s.max:g}")
    console = Console(width=120, record=True, file=io.StringIO())
    console.print(table)
    console.print(summary)
    return console.export_text()


def play_policy(cfg: CoplayConfig, game: str, policy: Policy, seeds: list[int],
                max_steps: int | None) -> list[Trajectory]:
    """Every seat played by `base`, a run's adapters (`run:RUN_DIR[@STEP]`, with the run's newest banks) or
    `openai`, through the in-process runner of `coplay eval`, at the evaluation temperature."""
    from coplay.eval.players import make_player
    from coplay.eval.policies import check_step
    from coplay.eval.runner import open_engine, play_plans
    from coplay.rollout.model_episodes import EpisodePlan
    from coplay.runs import RunDir

    run = RunDir.open(policy.run_dir) if policy.run_dir is not None else None
    if run is not None:
        check_step(run.root, policy.step)
    player = make_player("model" if run is not None else policy.kind, cfg, run, policy.step)
    plans = [EpisodePlan(game, seed, f"play-{game}-s{seed}", player.seat,
                         env_kwargs=dict(cfg.game[game].env_kwargs), max_steps=max_steps) for seed in seeds]
    engine = open_engine(cfg, player.adapters) if player.needs_engine else None
    try:
        return play_plans(cfg, plans, engine, player.banks, f"play {game}: {policy.spec}")
    finally:
        if engine is not None:
            engine.close()


def play(cfg: CoplayConfig, game: str, policy: Policy, seeds: list[int], max_steps: int | None,
         render: bool) -> list[Trajectory]:
    """Play `len(seeds)` episodes of `game` with `policy` (`coplay.eval.policies`); `render` prints every
    step and each episode's final state."""
    if policy.kind in BOTS:
        trajectories = []
        with phase(f"play {game}: {policy.spec}", len(seeds), "episodes") as bar:
            for seed in seeds:
                trajectories += play_bot_episodes(game, policy.kind, [seed], max_steps=max_steps,
                                                  env_kwargs=dict(cfg.game[game].env_kwargs))
                bar.advance()
    else:
        trajectories = play_policy(cfg, game, policy, seeds, max_steps)
    if render:
        print(render_trajectories(game, trajectories, dict(cfg.game[game].env_kwargs)))
    return trajectories


def write_trajectories(out: Path, game: str, policy: Policy, seed: int,
                       trajectories: list[Trajectory]) -> Path:
    """The trajectories as one shard file under `out`."""
    step = policy.step if policy.step is not None else "newest"
    label = policy.kind if policy.kind != "run" else f"run-step{step}"
    return write_shard(out / f"play-{game}-{label}-s{seed}.msgpack",
                       Shard(shard_id=f"play-{game}", iteration=0, worker=0, trajectories=trajectories))
