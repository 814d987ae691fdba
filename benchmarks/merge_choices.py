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

from collections.abc import Callable
from pathlib import Path
from typing import Any

import coplay_envs
from benchmarks.act_decisions import choice_shares, choices_cli
from coplay.eval.stats import summarize
from coplay_envs.game2048.rules import apply_move, legal_directions, line_infos
from coplay_envs.game2048.text import parse_board

Choice = Callable[[list[str], list[int]], str]
RANKS = ("best_merge", "first_listed")


def _best(legal: list[str], points: list[int], last: bool) -> str:
    tied = [m for m, p in zip(legal, points, strict=True) if p == max(points)]
    return tied[-1] if last else tied[0]


# name -> (how it reads the list, the choice): legal moves in the fixed order, their points beside them
POLICIES: dict[str, tuple[str, Choice]] = {
    "first listed": ("the first legal move of up, down, left, right, whatever it scores",
                     lambda legal, points: legal[0]),
    "highest-scoring, first listed": ("the move whose merges score most, the first of them if tied",
                                      lambda legal, points: _best(legal, points, False)),
    "highest-scoring, last listed": ("the move whose merges score most, the last of them if tied",
                                     lambda legal, points: _best(legal, points, True)),
}


def play_policy(choice: Choice, seeds: list[int], moves: int, env_kwargs: dict[str, Any]) -> list[float]:
    """Scores of one fixed choice on the seeds, `moves` moves each, in the evaluation's env (its
    `env_kwargs`; the points are always computed, the text options only change what is shown)."""
    scores = []
    for seed in seeds:
        env = coplay_envs.make_env("2048", **{**env_kwargs, "show_merges": True})
        _, info = env.reset(seed=seed)
        for _ in range(moves):
            if not info["legal_actions"]:
                break
            _, _, terminated, truncated, info = env.step(choice(info["legal_actions"], info["merges"]))
            if terminated or truncated:
                break
        scores.append(float(info["score"]))
    return scores


def policies_table(config: str) -> dict[str, Any]:
    """The fixed readings and the ruler's bots (`coplay.eval.ruler.play_bot`: the same seeds, horizon, env
    options and bot seeding as every evaluation file's) on the config's evaluation protocol."""
    from coplay.config import load_config
    from coplay.eval.ruler import play_bot as play_ruler_bot

    cfg = load_config(config, ["games=[2048]"])
    moves = cfg.eval.max_steps or cfg.rollout.max_steps or 200
    seeds = [cfg.seeds.eval.start + i for i in range(cfg.eval.episodes)]
    env_kwargs = dict(cfg.game["2048"].env_kwargs)
    rows = {name: {"reads": reads, **summarize(play_policy(choice, seeds, moves, env_kwargs)).as_dict()}
            for name, (reads, choice) in POLICIES.items()}
    for bot in ("random", "heuristic", "expert"):
        score = play_ruler_bot(cfg, bot, ["2048"])["2048"]["score"]
        rows[f"{bot} bot"] = {"reads": "the ruler's bot", **score}
    return {"config": config, "seeds": [seeds[0], seeds[-1]], "moves": moves, "policies": rows}


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


def _where_points_differ(observation: str, action: str) -> dict[str, Any] | None:
    """`decision`, only where the legal moves do not all score the same (None elsewhere)."""
    ranked = decision(observation, action)
    return ranked if ranked is not None and ranked["chance"] < 1.0 else None


def run_choices(run_dir: Path) -> list[dict[str, Any]]:
    """Per iteration of a run, the shares of its `act` decisions (steps that sampled `act`) by rank, and
    the same among the decisions where the listed points differ (`..._where_points_differ`): on a board
    where no move merges, every move scores the most, so only those decisions show a reading of the points."""
    rows = choice_shares(run_dir, decision, RANKS)
    differ = {r["iteration"]: r for r in choice_shares(run_dir, _where_points_differ, ("best_merge",))}
    for row in rows:
        d = differ.get(row["iteration"], {})
        row.update({f"{k}_where_points_differ": d.get(k) for k in ("decisions", "best_merge_share",
                                                                   "chance_share")})
    return rows


def _share(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def markdown(result: dict[str, Any]) -> str:
    lines = ["# 2048 choices among the listed moves", "", f"Command: `{result['command']}`", ""]
    if "policies" in result:
        p = result["policies"]
        lines += [f"Fixed readings of the list on seeds {p['seeds'][0]}-{p['seeds'][1]}, "
                  f"{p['moves']} moves:", "",
                  "| policy | mean score (95% t) | what it plays |", "|---|---|---|"]
        for name, row in p["policies"].items():
            lines.append(f"| {name} | {row['mean']:.1f} [{row['ci_low']:.1f}, {row['ci_high']:.1f}] | "
                         f"{row['reads']} |")
        lines.append("")
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
