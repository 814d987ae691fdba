"""`coplay play`: play a game with a bot (or, once the decision agent exists, the model) and print a table
of scores; `--render` prints every observation; `--out` writes the trajectories as shards.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from coplay.rollout.bot_episodes import play_bot_episodes
from coplay.stats import summarize
from coplay.types import Shard, Trajectory, write_shard


def _render_hook(seat: str, observation: str, info: dict) -> None:
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
        summary.add_row(role, str(s.n), f"{s.mean:.2f}", f"[{s.ci_low:.2f}, {s.ci_high:.2f}]", f"{s.median:g}",
                        f"{s.min:g}", f"{s.max:g}")
    console = Console(width=120, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(table)
    console.print(summary)
    return console.export_text()


def play_model(game: str, seeds: list[int], overrides: list[str], config: str | None, max_steps: int | None,
               render: bool) -> list[Trajectory]:
    """Every seat played by the configured model (the tiny model by default) through the configured engine
    (vLLM by default), without adapters and without skills, at the evaluation temperature."""
    import asyncio

    import coplay_envs
    from coplay.config import load_config
    from coplay.engines.factory import make_engine
    from coplay.iteration import model_seat
    from coplay.rollout.model_episodes import EpisodePlan, RunnerContext, SeatPlayer, play_episodes

    cfg = load_config(config, [f"games=[{game}]", *overrides])
    seat = replace(model_seat(cfg, {"act": 0, "retrieve": 0}, evaluation=True), act=None, retrieve=None)
    engine = make_engine(cfg.model, cfg.engine, seed=cfg.seeds.run)
    try:
        ctx = RunnerContext(engine=engine, rules=coplay_envs.rules, skills_for=lambda g, r: None,
                            run_seed=cfg.seeds.run)
        plans = [EpisodePlan(game, seed, f"play-{game}-s{seed}", SeatPlayer("model", seat),
                             env_kwargs=dict(cfg.game[game].env_kwargs), max_steps=max_steps) for seed in seeds]
        trajectories = asyncio.run(play_episodes(ctx, plans, cfg.rollout.concurrent_episodes))
    finally:
        close = getattr(engine, "close", None)
        if close is not None:
            close()
    if render:
        for traj in trajectories:
            for step in traj.steps:
                _render_hook(traj.seat, step.observation, {})
                print(f"{traj.seat} -> {step.action!r} ({step.parse_error or 'parsed'})\n")
    return trajectories


def play_command(args: argparse.Namespace) -> int:
    seeds = list(range(args.seed, args.seed + args.episodes))
    if args.policy == "model":
        trajectories = play_model(args.game, seeds, args.overrides, args.config, args.max_steps, args.render)
    elif args.policy in ("expert", "random"):
        trajectories = play_bot_episodes(args.game, args.policy, seeds, max_steps=args.max_steps,
                                         hook=_render_hook if args.render else None)
    else:
        print(f"coplay play: --policy {args.policy!r}; expected expert, random or model", file=sys.stderr)
        return 2
    print(score_table(trajectories, f"{args.game}: {args.policy}, {args.episodes} episode(s)"))
    out = Path(args.out) if args.out else None
    if out is None and args.policy == "model":
        from coplay.config import load_config
        from coplay.runs import RunDir

        cfg = load_config(args.config, args.overrides)
        out = RunDir.create(cfg.run.out_dir, f"play-{args.game}", cfg.to_yaml()).shards
    if out is not None:
        path = write_shard(out / f"play-{args.game}-{args.policy}-s{args.seed}.msgpack",
                           Shard(shard_id=f"play-{args.game}", iteration=0, worker=0, trajectories=trajectories))
        print(f"trajectories written to {path}")
    return 0
