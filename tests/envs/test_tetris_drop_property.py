"""The fast bitmask drop against a naive cell-by-cell simulation, on random boards (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from coplay_envs.tetris.pieces import DISTINCT_ROTATIONS, PIECE_NAMES, ROTATIONS
from coplay_envs.tetris.rules import HEIGHT, WIDTH, column_heights, drop_piece, legal_placements


def naive_drop(cells: set[tuple[int, int]], piece: str, index: int, col: int) -> tuple[set, int] | None:
    """Lower the piece one row at a time from above the board; None when it cannot rest inside the board.
    Returns the board cells after clearing full rows, and the number of rows cleared."""
    shape = ROTATIONS[piece][index].cells
    base = HEIGHT
    while base > 0 and not any((base - 1 + dr, col + dc) in cells for dr, dc in shape):
        base -= 1
    placed = {(base + dr, col + dc) for dr, dc in shape}
    if any(r >= HEIGHT for r, _ in placed):
        return None
    board = cells | placed
    full = sorted(r for r in range(HEIGHT) if all((r, c) in board for c in range(WIDTH)))
    kept = {(r - sum(1 for f in full if f < r), c) for r, c in board if r not in full}
    return kept, len(full)


def to_rows(cells: set[tuple[int, int]]) -> list[int]:
    rows = [0] * HEIGHT
    for r, c in cells:
        rows[r] |= 1 << c
    return rows


@st.composite
def boards(draw: st.DrawFn) -> set[tuple[int, int]]:
    """Random stacks up to 20 high, often nearly full rows (so clears happen), never a full row."""
    cells: set[tuple[int, int]] = set()
    top = draw(st.integers(0, HEIGHT))
    for r in range(top):
        gaps = draw(st.sets(st.integers(0, WIDTH - 1), min_size=1, max_size=4))
        density = draw(st.sampled_from([1.0, 1.0, 0.5]))
        for c in range(WIDTH):
            if c not in gaps and (density == 1.0 or draw(st.booleans())):
                cells.add((r, c))
    return cells


@settings(max_examples=150, deadline=None)
@given(boards(), st.sampled_from(PIECE_NAMES))
def test_legal_list_and_drops_match_a_naive_simulation(cells: set[tuple[int, int]], piece: str) -> None:
    rows = to_rows(cells)
    heights = column_heights(rows)
    legal = set(legal_placements(heights, piece))
    for index in DISTINCT_ROTATIONS[piece]:
        for col in range(WIDTH - ROTATIONS[piece][index].width + 1):
            expected = naive_drop(cells, piece, index, col)
            assert ((index, col) in legal) == (expected is not None)
            if expected is None:
                continue
            drop = drop_piece(rows, heights, ROTATIONS[piece][index], col)
            assert drop.rows == to_rows(expected[0]) and drop.lines == expected[1]
            assert drop.heights == column_heights(drop.rows)
