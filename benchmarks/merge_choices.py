"""How 2048 policies choose among the listed moves (issue 36): fixed text-reading policies on the
evaluation protocol, beside the bots, and a run's `act` choices iteration by iteration.

Why: with `show_merges` the observation lists the legal moves in the fixed order up, down, left, right, each
followed by the points its merges score at once. This benchmark says what each simple reading of that list is
worth on the evaluation seeds (the first listed move, the highest-scoring move taken first or last in the
list) and how a run's sampled choices moved: per iteration, the share of `act` decisions that took a
highest-scoring move beside the share a uniformly random legal choice would have had on the same positions,
the share that took the first listed move, and the mean place in the list. Everything is recomputed from the
board in each observation, so it reads any run's shards, with or without the points shown.

    python -m benchmarks.merge_choices --policies [--config CONFIG] [--name STEM]
    python -m benchmarks.merge_choices --run NAME=RUN_DIR [--run ...] [--name STEM]

Deterministic (no model, no timing): pure Python on the game package and msgpack shards.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.listed_choices import Reading, choice_shares, choices_cli, readings_markdown, readings_table
from coplay_envs.game2048.rules import apply_move, legal_directions, line_infos
from coplay_envs.game2048.text import parse_board

RANKS = ("best_merge", "first_listed")


def _best(legal: list[str], points: list[int], last: bool) -> str:
    tied = [m for m, p in zip(legal, points, strict=True) if p == max(points)]
    return tied[-1] if last else tied[0]


# name -> (how it reads the list, the choice): legal moves in the fixed order, their points beside them
POLICIES: dict[str, tuple[str, Reading]] = {
    "first listed": ("the first legal move of up, down, left, right, whatever it scores",
                     lambda legal, points: legal[0]),
    "highest-scoring, first listed": ("the move whose merges score most, the first of them if tied",
                                      lambda legal, points: _best(legal, points, False)),
    "highest-scoring, last listed": ("the move whose merges score most, the last of them if tied",
                                     lambda legal, points: _best(legal, points, True)),
}


def policies_table(config: str) -> dict[str, Any]:
    """The fixed readings (`POLICIES`) and the ruler's bots on the config's evaluation protocol."""
    return readings_table(config, "2048", POLICIES, {"show_merges": True}, "merges")


def decision(observation: str, action: str) -> dict[str, Any] | None:
    """How one chosen move ranks among the legal moves of the board shown (None: no board or no legal
    move): whether it scores the most, whether it is the first listed, its place in the list (`position`, 0
    first, 1 last; None if not legal) and `chance`, the share of the legal moves that score the most."""
    try:
        board = parse_board(observation)
    except ValueError:
        return None
    rows, cols = line_infos(board)
    legal = legal_directions(rows, cols)
    if not legal:
        return None
    points = [apply_move(board, move, rows, cols)[1] for move in legal]
    best = [m for m, p in zip(legal, points, strict=True) if p == max(points)]
    return {"best_merge": action in best, "first_listed": action == legal[0],
            "position": legal.index(action) / max(len(legal) - 1, 1) if action in legal else None,
            "chance": len(best) / len(legal)}


def run_choices(run_dir: Path) -> list[dict[str, Any]]:
    """Per iteration of a run, the shares of its `act` decisions (steps that sampled `act`) by rank, and
    the same among the decisions where the listed points differ (`..._where_points_differ`): on a board
    where no move merges, every move scores the most, so only those decisions show a reading of the points."""
    return choice_shares(run_dir, decision, RANKS,
                         {"points_differ": (lambda ranked: ranked["chance"] < 1.0, ("best_merge",))})


def _share(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def markdown(result: dict[str, Any]) -> str:
    lines = readings_markdown("# 2048 choices among the listed moves", result)
    for name, rows in result.get("runs", {}).items():
        lines += [f"Run {name}: shares of the act decisions sampled in each iteration", "",
                  "| iteration | decisions | highest-scoring | a random legal move would be "
                  "| where the points differ: decisions | highest-scoring | random would be | first listed "
                  "| mean place in the list (0 first, 1 last) |", "|---|---|---|---|---|---|---|---|---|"]
        lines += [f"| {r['iteration']} | {r['decisions']} | {r['best_merge_share']:.2f} | "
                  f"{r.get('chance_share', 0.0):.2f} | {r['decisions_where_points_differ'] or 0} | "
                  f"{_share(r['best_merge_share_where_points_differ'])} | "
                  f"{_share(r['chance_share_where_points_differ'])} | {r['first_listed_share']:.2f} | "
                  f"{r['reading_position_mean']:.2f} |" for r in rows]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return choices_cli(argv, "benchmarks.merge_choices", __doc__ or "",
                       "launch/configs/learning-2048-from-base-merges.yaml",
                       policies_table, run_choices, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
