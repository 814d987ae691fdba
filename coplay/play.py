"""`coplay play`: play a game with a bot (or, once the decision agent exists, the model) and print a table
of scores; `--render` prints every observation; `--out` writes the trajectories as shards.
"""

from __future__ import annotations

import argparse
import sys
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


def play_command(args: argparse.Namespace) -> int:
    if args.policy not in ("expert", "random"):
        print(f"coplay play: --policy {args.policy!r} needs the decision agent (issue 5); "
              "use expert or random", file=sys.stderr)
        return 2
    seeds = list(range(args.seed, args.seed + args.episodes))
    trajectories = play_bot_episodes(args.game, args.policy, seeds, max_steps=args.max_steps,
                                     hook=_render_hook if args.render else None)
    print(score_table(trajectories, f"{args.game}: {args.policy} bots, {args.episodes} episode(s)"))
    if args.out:
        path = write_shard(Path(args.out) / f"play-{args.game}-{args.policy}-s{args.seed}.msgpack",
                           Shard(shard_id=f"play-{args.game}", iteration=0, worker=0, trajectories=trajectories))
        print(f"trajectories written to {path}")
    return 0
