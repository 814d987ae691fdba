"""Candy Crush features: named numbers computed from the view only (the board, moves, score).

Features:
- `moves_left` (int): moves left before the game ends.
- `score` (int): candies cleared so far.
- `matches_available` (int): number of swaps that make a line now (the legal actions while moves remain).
- `largest_colour_count` (int): how many candies the most common colour has on the board.
- `pairs` (int): orthogonally adjacent same-colour pairs (more pairs, more lines one swap away later).
- `lowest_match_row` (int): the lowest row (0 = top, 7 = bottom) touched by a swap that makes a line,
  -1 if none; clearing low makes more candies fall, and falling candies are what cascade.

Never imports `coplay` or gymnasium.
"""

from __future__ import annotations

from typing import Any

from coplay_envs.candy.rules import COLS, NOT_COL7, colour_masks, matching_swaps

FEATURE_NAMES: tuple[str, ...] = ("moves_left", "score", "matches_available", "largest_colour_count",
                                  "pairs", "lowest_match_row")

# The values a task's contract may compare each feature with (`coplay_envs.feature_scales`): counts bounded by
# the 8 x 8 board, and scores a few moves can reach (a swap clears 3 to about 15 candies with its cascades;
# over 6 moves the expert bot scores about 180 and the random bot about 70).
FEATURE_SCALES: dict[str, tuple[int, ...]] = {
    "moves_left": tuple(range(51)),
    "score": (0, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60, 80, 100, 120, 150, 200, 250, 300),
    "matches_available": tuple(range(41)),
    "largest_colour_count": tuple(range(65)),
    "pairs": tuple(range(0, 113, 4)),
    "lowest_match_row": tuple(range(-1, 8)),
}


def board_features(masks: list[int], hmask: int, vmask: int, score: int,
                   moves_left: int) -> dict[str, int]:
    """Features from the colour masks and matching swaps the env has already computed."""
    pairs = 0
    largest = 0
    for m in masks:
        pairs += (m & (m >> 1) & NOT_COL7).bit_count() + (m & (m >> 8)).bit_count()
        n = m.bit_count()
        if n > largest:
            largest = n
    lowest = -1
    if hmask:
        lowest = (hmask.bit_length() - 1) // COLS
    if vmask:
        lowest = max(lowest, (vmask.bit_length() - 1) // COLS + 1)
    return {
        "moves_left": moves_left,
        "score": score,
        "matches_available": hmask.bit_count() + vmask.bit_count(),
        "largest_colour_count": largest,
        "pairs": pairs,
        "lowest_match_row": lowest,
    }


def features_from_view(view: dict[str, Any]) -> dict[str, int]:
    """Features from `info["view"]` alone (what `info["features"]` holds)."""
    masks = colour_masks("".join(view["board"]), view["colours"])
    hmask, vmask = matching_swaps(masks)
    return board_features(masks, hmask, vmask, int(view["score"]),
                          int(view["max_moves"]) - int(view["moves"]))
