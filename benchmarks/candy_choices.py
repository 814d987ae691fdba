"""How Candy Crush policies choose among the listed swaps (issue 36): fixed text-reading policies on the
evaluation protocol, beside the bots, and a run's `act` choices iteration by iteration.

Why: with `show_clears` the observation lists the legal swaps with the candies each clears at once, by
default sorted by that count, most first. Which swap of that list a policy takes then decides most of its
score, and a learning run can move the policy toward a choice the base model's greedy answer already made.
This benchmark says what each simple reading of the list is worth on the evaluation seeds (the first
listed swap, the most clearing one taken last in reading order, the first in reading order) and how a run's
sampled choices moved: per iteration, the share of `act` decisions that took a most clearing swap, that took
the first swap the count-sorted list shows, and that took the first swap in reading order (the first one a
`clears_order: board` text lists). Everything is recomputed from the board in each observation, so it reads
either text order and any run's shards.

    python -m benchmarks.candy_choices --policies [--config CONFIG] [--name STEM]
    python -m benchmarks.candy_choices --run NAME=RUN_DIR [--run ...] [--name STEM]

Deterministic (no model, no timing): pure Python on the game package and msgpack shards.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from benchmarks.listed_choices import Reading, choice_shares, choices_cli, readings_markdown, readings_table
from coplay_envs.candy.env import parse_swap
from coplay_envs.candy.rules import clears_at_once, colour_masks, matching_swaps, swap_actions
from coplay_envs.candy.text import parse_board


def _most(legal: list[str], clears: list[int], last: bool) -> str:
    best = max(clears)
    tied = [a for a, c in zip(legal, clears, strict=True) if c == best]
    return tied[-1] if last else tied[0]


# name -> (how it reads the list, the choice): legal swaps come in reading order, `clears` beside them
POLICIES: dict[str, tuple[str, Reading]] = {
    "first listed (count order)": ("the first swap the count-sorted list shows: the most clearing swap "
                                   "first in reading order",
                                   lambda legal, clears: _most(legal, clears, False)),
    "most clearing, last in reading order": ("of the most clearing swaps the lowest on the board (the last "
                                             "of the count-sorted list's first group)",
                                             lambda legal, clears: _most(legal, clears, True)),
    "first in reading order": ("the first swap a `clears_order: board` list shows, whatever it clears",
                               lambda legal, clears: legal[0]),
}


def policies_table(config: str) -> dict[str, Any]:
    """The fixed readings (`POLICIES`) and the ruler's bots on the config's evaluation protocol."""
    return readings_table(config, "candy_crush", POLICIES, {"show_clears": True}, "clears")


def decision(observation: str, action: str) -> dict[str, Any] | None:
    """How one chosen swap ranks among the legal swaps of the board shown (None: no board or no swap), and
    where it stands in reading order (`position`: 0 the first legal swap, 1 the last; None if not legal)."""
    try:
        board = parse_board(observation)
    except ValueError:
        return None
    colours = re.search(r"colours ([A-Z](?: [A-Z])*)\.", observation)
    colours_text = colours.group(1).replace(" ", "") if colours else "RGBY"
    legal = swap_actions(*matching_swaps(colour_masks(board, colours_text)))
    if not legal:
        return None
    clears = [clears_at_once(board, colours_text, *parse_swap(a)) for a in legal]
    return {"most_clearing": action in legal and clears[legal.index(action)] == max(clears),
            "first_listed_count_order": action == _most(legal, clears, False),
            "first_in_reading_order": action == legal[0],
            "position": legal.index(action) / max(len(legal) - 1, 1) if action in legal else None}


def run_choices(run_dir: Path) -> list[dict[str, Any]]:
    """Per iteration of a run, the shares of its `act` decisions (steps that sampled `act`) by rank."""
    return choice_shares(run_dir, decision,
                         ("most_clearing", "first_listed_count_order", "first_in_reading_order"))


def markdown(result: dict[str, Any]) -> str:
    lines = readings_markdown("# Candy Crush choices among the listed swaps", result)
    for name, rows in result.get("runs", {}).items():
        lines += [f"Run {name}: shares of the act decisions sampled in each iteration", "",
                  "| iteration | decisions | most clearing | first listed (count order) "
                  "| first in reading order | mean place in reading order (0 first, 1 last) |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {r['iteration']} | {r['decisions']} | {r['most_clearing_share']:.2f} | "
                  f"{r['first_listed_count_order_share']:.2f} | {r['first_in_reading_order_share']:.2f} | "
                  f"{r['reading_position_mean']:.2f} |"
                  for r in rows]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return choices_cli(argv, "benchmarks.candy_choices", __doc__ or "",
                       "launch/configs/learning-candy_crush-from-base.yaml",
                       policies_table, run_choices, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
