"""Tetris features: the named numbers and booleans skills are written in, computed from ``info["view"]`` only.

Board metrics (functions below take row bitmasks, index 0 the bottom row, as in `rules`):

- ``holes``: empty cells with a filled cell somewhere above them in the same column.
- ``max_height`` / ``min_height``: tallest / lowest column (a column's height is 1 + the row of its top
  filled cell, counted from the floor; 0 when empty). ``aggregate_height``: sum of the 10 column heights.
- ``bumpiness``: sum of |height difference| between neighbouring columns.
- ``deepest_well``: largest ``min(left height, right height) - height`` over columns (a wall counts as an
  infinitely high neighbour, so an edge column's depth is its one neighbour's height minus its own).
- ``wells``: Dellacherie's cumulative wells: for each run of vertically consecutive well cells (empty, both
  horizontal neighbours filled or wall), 1 + 2 + ... + run length, summed.
- ``row_transitions``: filled/empty changes along each of the 20 rows, walls counting as filled.
- ``column_transitions``: filled/empty changes down each column, the floor counting as filled.
- ``filled_cells``: number of filled cells. ``board_empty``: no filled cell (a perfect clear).
- ``rows_with_holes``: rows that contain at least one hole.

Game counters and the current piece:

- ``lines_cleared``: lines cleared so far; ``last_lines``: lines cleared by the last placement (0-4).
- ``placements`` / ``placements_left``: pieces placed / left before truncation. ``score``: total reward.
- ``max_clear_now``: most lines any legal placement of the current piece clears now; ``can_clear``: > 0.
- ``tetris_ready``: a column is a well at least 4 deep and an I piece is current or in the preview.
- ``current_is_i``: the current piece is I; ``i_in_preview``: an I is among the next 4.
- ``danger``: ``max_height >= 14`` (6 rows or fewer from the top). ``game_over``: the last piece could not
  enter.

Never imports `coplay`, gymnasium or numpy.
"""

from __future__ import annotations

from typing import Any

from coplay_envs.tetris.pieces import DISTINCT_ROTATIONS, ROTATIONS
from coplay_envs.tetris.rules import (
    DEFAULT_MAX_PLACEMENTS,
    FULL_ROW,
    HEIGHT,
    POINTS_PER_LINE,
    POINTS_PER_PIECE,
    WIDTH,
    board_from_text_rows,
    column_heights,
    landing_rows,
)

DANGER_HEIGHT: int = 14
_CELLS: int = WIDTH * HEIGHT
_MAX_LINES: int = DEFAULT_MAX_PLACEMENTS * 4 // WIDTH  # 4 cells a piece, WIDTH cells a cleared line

#: Per integer feature the values a contract's threshold may take (`coplay_envs.feature_scales`): what a
#: 10 x 20 board and a 200-placement game can show, so `max_height >= 25` or `last_lines == 1.5` is off
#: scale. Booleans have none.
FEATURE_SCALES: dict[str, tuple[int, ...]] = {
    "holes": tuple(range(_CELLS + 1)),
    "max_height": tuple(range(HEIGHT + 1)),
    "min_height": tuple(range(HEIGHT + 1)),
    "aggregate_height": tuple(range(_CELLS + 1)),
    "bumpiness": tuple(range((WIDTH - 1) * HEIGHT + 1)),
    "deepest_well": tuple(range(HEIGHT + 1)),
    "wells": tuple(range(WIDTH * HEIGHT * (HEIGHT + 1) // 2 + 1)),
    "row_transitions": tuple(range(HEIGHT * (WIDTH + 1) + 1)),
    "column_transitions": tuple(range(WIDTH * (HEIGHT + 1) + 1)),
    "filled_cells": tuple(range(_CELLS + 1)),
    "rows_with_holes": tuple(range(HEIGHT + 1)),
    "lines_cleared": tuple(range(_MAX_LINES + 1)),
    "last_lines": tuple(range(5)),
    "max_clear_now": tuple(range(5)),
    "placements": tuple(range(DEFAULT_MAX_PLACEMENTS + 1)),
    "placements_left": tuple(range(DEFAULT_MAX_PLACEMENTS + 1)),
    "score": tuple(range(POINTS_PER_PIECE * DEFAULT_MAX_PLACEMENTS + POINTS_PER_LINE * _MAX_LINES + 1)),
}
_RIGHT_WALL_BIT: int = 1 << (WIDTH - 1)
_TRANSITION_MASK: int = (1 << (WIDTH + 1)) - 1
_WALLED_ROW: int = 1 | (1 << (WIDTH + 1))


def holes(rows: list[int], heights: list[int]) -> int:
    """Empty cells under the top of their column (every filled cell lies at or below its column's top)."""
    return sum(heights) - sum(row.bit_count() for row in rows)


def rows_with_holes(rows: list[int]) -> int:
    """Rows holding at least one empty cell that has a filled cell above it."""
    covered = 0
    count = 0
    for r in range(HEIGHT - 1, -1, -1):
        row = rows[r]
        if covered & ~row:
            count += 1
        covered |= row
    return count


def bumpiness(heights: list[int]) -> int:
    """Sum of |height difference| of neighbouring columns."""
    return sum(abs(heights[c] - heights[c + 1]) for c in range(WIDTH - 1))


def deepest_well(heights: list[int]) -> int:
    """Largest depth of a column below its lower neighbour (walls are infinitely high)."""
    walled = [HEIGHT * 2, *heights, HEIGHT * 2]  # a wall is higher than any column
    return max(0, max(min(walled[c], walled[c + 2]) - walled[c + 1] for c in range(WIDTH)))


def row_transitions(rows: list[int]) -> int:
    """Filled/empty changes along every row, the side walls counting as filled."""
    total = 0
    for row in rows:
        walled = (row << 1) | _WALLED_ROW
        total += ((walled ^ (walled >> 1)) & _TRANSITION_MASK).bit_count()
    return total


def column_transitions(rows: list[int]) -> int:
    """Filled/empty changes down every column, the floor counting as filled."""
    total = 0
    below = FULL_ROW
    for row in rows:
        total += (row ^ below).bit_count()
        below = row
    return total


def cumulative_wells(rows: list[int]) -> int:
    """Dellacherie's wells: each vertical run of well cells of length n adds 1 + 2 + ... + n."""
    total = 0
    runs = [0] * WIDTH
    previous = 0
    for r in range(HEIGHT - 1, -1, -1):
        row = rows[r]
        well = ~row & FULL_ROW & ((row << 1) | 1) & ((row >> 1) | _RIGHT_WALL_BIT)
        if well:
            for c in range(WIDTH):
                if well >> c & 1:
                    runs[c] = runs[c] + 1 if previous >> c & 1 else 1
                    total += runs[c]
        previous = well
    return total


def max_lines_now(rows: list[int], heights: list[int], piece: str) -> int:
    """Most lines any legal placement of ``piece`` clears on this board."""
    if all(row.bit_count() < WIDTH - 4 for row in rows):  # a piece fills at most 4 cells of a row
        return 0
    best = 0
    for index in DISTINCT_ROTATIONS[piece]:
        rot = ROTATIONS[piece][index]
        limit = HEIGHT - rot.height
        for col, base in enumerate(landing_rows(heights, rot)):
            if base > limit:
                continue
            full = sum(
                1 for dr, mask in enumerate(rot.row_masks) if rows[base + dr] | (mask << col) == FULL_ROW
            )
            best = max(best, full)
    return best


def compute_features(
    view: dict[str, Any], rows: list[int] | None = None, heights: list[int] | None = None
) -> dict[str, int | float | bool]:
    """The feature dict of a view. ``rows`` / ``heights`` may be passed when the caller already holds them;
    they must equal what ``view["board"]`` gives (the env passes its own copies of the same position)."""
    if rows is None:
        rows = board_from_text_rows(list(view["board"]))
    if heights is None:
        heights = column_heights(rows)
    current: str = view["current"]
    preview: list[str] = list(view["preview"])
    game_over = bool(view["game_over"])
    max_height = max(heights)
    well_depth = deepest_well(heights)
    filled = sum(row.bit_count() for row in rows)
    clear_now = 0 if game_over else max_lines_now(rows, heights, current)
    i_soon = current == "I" or "I" in preview
    return {
        "holes": sum(heights) - filled,
        "max_height": max_height,
        "min_height": min(heights),
        "aggregate_height": sum(heights),
        "bumpiness": bumpiness(heights),
        "deepest_well": well_depth,
        "wells": cumulative_wells(rows),
        "row_transitions": row_transitions(rows),
        "column_transitions": column_transitions(rows),
        "filled_cells": filled,
        "rows_with_holes": rows_with_holes(rows),
        "board_empty": filled == 0,
        "lines_cleared": int(view["lines"]),
        "last_lines": int(view["last_lines"]),
        "placements": int(view["placements"]),
        "placements_left": int(view["placements_left"]),
        "score": int(view["score"]),
        "max_clear_now": clear_now,
        "can_clear": clear_now > 0,
        "tetris_ready": well_depth >= 4 and i_soon,
        "current_is_i": current == "I",
        "i_in_preview": "I" in preview,
        "danger": max_height >= DANGER_HEIGHT,
        "game_over": game_over,
    }
