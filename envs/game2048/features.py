"""2048 features: the named numbers skills are written in, computed from the view only.

Features (all from `info["view"]`: the board, score, move count and limit):
- `max_tile` (int): the largest tile value on the board (2, 4, ..., 65536); 0 never occurs after reset.
- `empty_cells` (int): number of empty cells, 0-16.
- `merges` (int): merges the best-merging move would make now (max over the horizontal and the vertical
  axis of the merges its slides perform; `2 2 2 2` counts 2, `2 . 2` counts 1).
- `monotonic_lines` (int): rows plus columns (0-8) whose tiles, gaps ignored, never rise or never fall.
- `corner_max` (bool): a largest tile sits in one of the four corners.
- `legal_moves` (int): number of moves that change the board (0 once the game is over, by either end).
- `tile_sum` (int): sum of all tile values.
- `score` (int): the running score (sum of merged tile values so far).
- `moves_left` (int): moves left before the move limit.

Never imports `coplay` or gymnasium.
"""

from __future__ import annotations

from typing import Any

from coplay_envs.game2048.rules import Board, RowInfo, board_from_values, legal_directions, line_infos

FEATURE_NAMES: tuple[str, ...] = ("max_tile", "empty_cells", "merges", "monotonic_lines", "corner_max",
                                  "legal_moves", "tile_sum", "score", "moves_left")

# The values a task's contract may compare each numeric feature with (`coplay_envs.feature_scales`): values
# the feature takes on this board (tiles and tile sums are powers of two; cell and line counts are bounded by
# the 4 x 4 board; a score is a sum of merged tiles). A threshold off these scales (`max_tile == 6.25`,
# `max_tile == 200`) names a state the game cannot have.
FEATURE_SCALES: dict[str, tuple[int, ...]] = {
    "max_tile": tuple(2 ** k for k in range(1, 12)),  # 2 .. 2048
    "empty_cells": tuple(range(17)),
    "merges": tuple(range(9)),
    "monotonic_lines": tuple(range(9)),
    "legal_moves": tuple(range(5)),
    "tile_sum": tuple(2 ** k for k in range(2, 13)),  # 4 .. 4096
    "score": (0, *(2 ** k for k in range(2, 14))),  # 0, 4 .. 8192
    "moves_left": tuple(range(51)),  # a task's bound is at most 50 moves
}


def board_features(board: Board, rows: list[RowInfo], cols: list[RowInfo], n_legal: int, score: int,
                   moves_left: int) -> dict[str, int | bool]:
    """Features of a board whose line infos are already known (the env's fast path)."""
    top = max(board)
    return {
        "max_tile": (1 << top) if top else 0,
        "empty_cells": board.count(0),
        "merges": max(rows[0].merges + rows[1].merges + rows[2].merges + rows[3].merges,
                      cols[0].merges + cols[1].merges + cols[2].merges + cols[3].merges),
        "monotonic_lines": (rows[0].monotone + rows[1].monotone + rows[2].monotone + rows[3].monotone
                            + cols[0].monotone + cols[1].monotone + cols[2].monotone + cols[3].monotone),
        "corner_max": top in (board[0], board[3], board[12], board[15]),
        "legal_moves": n_legal,
        "tile_sum": rows[0].tile_sum + rows[1].tile_sum + rows[2].tile_sum + rows[3].tile_sum,
        "score": score,
        "moves_left": moves_left,
    }


def features_from_view(view: dict[str, Any]) -> dict[str, int | bool]:
    """Features from `info["view"]` alone (what `info["features"]` holds)."""
    board = board_from_values(view["board"])
    rows, cols = line_infos(board)
    moves_left = int(view["max_moves"]) - int(view["moves"])
    n_legal = len(legal_directions(rows, cols)) if moves_left > 0 else 0
    return board_features(board, rows, cols, n_legal, int(view["score"]), moves_left)
