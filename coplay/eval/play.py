"""`coplay play`: play a game with a bot or the configured model and show a table of scores; `render` prints
every observation and what was done; the trajectories can be written as a shard. The model plays through
the same in-process runner as `coplay eval` (`coplay.eval.runner`). No ray.
"""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path
from typing import Any

from coplay.config import CoplayConfig
from coplay.eval.stats import summarize
from coplay.rollout.bot_episodes import play_bot_episodes
from coplay.types import Shard, Trajectory, write_shard

POLICIES = ("expert", "random", "model")


def _render_hook(seat: str, observation: str, info: dict[str, Any]) -> None:
    print(f"--- {seat} ---\n{observation}\n", flush=True)


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


def play_model(cfg: CoplayConfig, game: str, seeds: list[int], max_steps: int | None,
               render: bool) -> list[Trajectory]:
    """Every seat played by the configured model through the configured engine, without adapters and
    without skills, at the evaluation temperature."""
    from coplay.driver.plans import model_seat
    from coplay.eval.runner import open_engine, play_plans
    from coplay.rollout.model_episodes import EpisodePlan, SeatPlayer

    seat = replace(model_seat(cfg, {"act": 0, "retrieve": 0}, evaluation=True), act=None, retrieve=None)
    plans = [EpisodePlan(game, seed, f"play-{game}-s{seed}", SeatPlayer("model", seat),
                         env_kwargs=dict(cfg.game[game].env_kwargs), max_steps=max_steps) for seed in seeds]
    engine = open_engine(cfg)
    try:
        trajectories = play_plans(cfg, plans, engine)
    finally:
        engine.close()
    if render:
        for traj in trajectories:
            for step in traj.steps:
                _render_hook(traj.seat, step.observation, {})
                print(f"{traj.seat} -> {step.action!r} ({step.parse_error or 'parsed'})\n")
    return trajectories


def play(cfg: CoplayConfig, game: str, policy: str, seeds: list[int], max_steps: int | None,
         render: bool) -> list[Trajectory]:
    """Play `len(seeds)` episodes of `game` with `policy` (expert | random | model)."""
    if policy == "model":
        return play_model(cfg, game, seeds, max_steps, render)
    if policy in ("expert", "random"):
        return play_bot_episodes(game, policy, seeds, max_steps=max_steps,
                                 hook=_render_hook if render else None)
    raise ValueError(f"--policy {policy!r}: expected one of {', '.join(POLICIES)}")


def write_trajectories(out: Path, game: str, policy: str, seed: int, trajectories: list[Trajectory]) -> Path:
    """The trajectories as one shard file under `out`."""
    return write_shard(out / f"play-{game}-{policy}-s{seed}.msgpack",
                       Shard(shard_id=f"play-{game}", iteration=0, worker=0, trajectories=trajectories))
