"""2048 board logic: pure functions on a board of 16 tile exponents, no gymnasium, no text.

A board is a tuple of 16 ints in row-major order (row 0 at the top); 0 is an empty cell and e > 0 is the
tile 2**e, so every value stays a Python int (2048 = 2**11, 65536 = 2**16, no overflow anywhere). Rows and
columns are looked up in a table of `RowInfo` built lazily per distinct 4-tuple, so a move costs four table
look-ups instead of a slide-and-merge loop.

Randomness comes from a counter-based stream (`draw`): draw n of an episode is a pure function of the
episode key and n, so the whole RNG state is two ints and restoring a position is exact.

Never imports `coplay`, gymnasium or numpy.
"""

from __future__ import annotations

from typing import NamedTuple

SIZE = 4
CELLS = SIZE * SIZE
DIRECTIONS: tuple[str, ...] = ("up", "down", "left", "right")
MASK64 = (1 << 64) - 1
GOLDEN_GAMMA = 0x9E3779B97F4A7C15

# Weights of the row heuristic the expert bot uses (the well-known nneonneo/2048-ai row evaluation).
_LOST_PENALTY = 200000.0
_MONO_POWER = 4.0
_MONO_WEIGHT = 47.0
_SUM_POWER = 3.5
_SUM_WEIGHT = 11.0
_MERGE_WEIGHT = 700.0
_EMPTY_WEIGHT = 270.0

Row = tuple[int, int, int, int]
Board = tuple[int, ...]


class RowInfo(NamedTuple):
    """Everything the env, features and expert need about one row (or column read as a row).

    `left` slides toward index 0, `right` toward index 3; scores are the sums of merged tile values.
    """

    left: Row
    left_score: int
    right: Row
    right_score: int
    can_left: bool
    can_right: bool
    merges: int  # merges a slide along this line makes (2 . 2 -> 1, 2 2 2 2 -> 2, 2 2 2 -> 1)
    monotone: bool  # non-decreasing or non-increasing over its non-empty tiles
    heuristic: float  # expert bot's evaluation of this line
    tile_sum: int  # sum of the tile values


def draw(key: int, counter: int) -> int:
    """Draw number `counter` of the stream `key`: SplitMix64 of key + counter * golden gamma (64 bits)."""
    z = (key + (counter + 1) * GOLDEN_GAMMA) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def slide_left(row: Row) -> tuple[Row, int]:
    """Slide toward index 0; equal neighbours merge once per move, the pair nearest index 0 first."""
    tiles = [e for e in row if e]
    out: list[int] = []
    score = 0
    i = 0
    while i < len(tiles):
        if i + 1 < len(tiles) and tiles[i] == tiles[i + 1]:
            merged = tiles[i] + 1
            out.append(merged)
            score += 1 << merged
            i += 2
        else:
            out.append(tiles[i])
            i += 1
    out.extend([0] * (SIZE - len(out)))
    return (out[0], out[1], out[2], out[3]), score


def _row_heuristic(row: Row) -> float:
    empty = sum(1 for e in row if e == 0)
    total = sum(float(e) ** _SUM_POWER for e in row)
    merges = 0
    prev = 0
    counter = 0
    for e in row:
        if e == 0:
            continue
        if prev == e:
            counter += 1
        elif counter > 0:
            merges += 1 + counter
            counter = 0
        prev = e
    if counter > 0:
        merges += 1 + counter
    mono_left = mono_right = 0.0
    for i in range(1, SIZE):
        a, b = float(row[i - 1]), float(row[i])
        if a > b:
            mono_left += a**_MONO_POWER - b**_MONO_POWER
        else:
            mono_right += b**_MONO_POWER - a**_MONO_POWER
    return (_LOST_PENALTY + _EMPTY_WEIGHT * empty + _MERGE_WEIGHT * merges
            - _MONO_WEIGHT * min(mono_left, mono_right) - _SUM_WEIGHT * total)


def _build_row_info(row: Row) -> RowInfo:
    left, left_score = slide_left(row)
    rev_left, right_score = slide_left((row[3], row[2], row[1], row[0]))
    right = (rev_left[3], rev_left[2], rev_left[1], rev_left[0])
    tiles = [e for e in row if e]
    merges = len(tiles) - sum(1 for e in left if e)
    rising = all(a <= b for a, b in zip(tiles, tiles[1:], strict=False))
    falling = all(a >= b for a, b in zip(tiles, tiles[1:], strict=False))
    return RowInfo(left, left_score, right, right_score, left != row, right != row, merges,
                   rising or falling, _row_heuristic(row), sum(1 << e for e in tiles))


_ROW_TABLE: dict[Row, RowInfo] = {}


def row_info(row: Row) -> RowInfo:
    """The (cached) `RowInfo` of a 4-tuple of exponents."""
    info = _ROW_TABLE.get(row)
    if info is None:
        info = _ROW_TABLE[row] = _build_row_info(row)
    return info


def rows_of(board: Board) -> tuple[Row, Row, Row, Row]:
    return (board[0:4], board[4:8], board[8:12], board[12:16])  # type: ignore[return-value]


def cols_of(board: Board) -> tuple[Row, Row, Row, Row]:
    return (board[0::4], board[1::4], board[2::4], board[3::4])  # type: ignore[return-value]


def line_infos(board: Board) -> tuple[list[RowInfo], list[RowInfo]]:
    """`RowInfo` of the four rows and of the four columns (a column reads top to bottom)."""
    table = _ROW_TABLE
    rows: list[RowInfo] = []
    for line in (board[0:4], board[4:8], board[8:12], board[12:16]):
        info = table.get(line)  # type: ignore[call-overload]
        rows.append(info if info is not None else row_info(line))  # type: ignore[arg-type]
    cols: list[RowInfo] = []
    for line in (board[0::4], board[1::4], board[2::4], board[3::4]):
        info = table.get(line)  # type: ignore[call-overload]
        cols.append(info if info is not None else row_info(line))  # type: ignore[arg-type]
    return rows, cols


def legal_directions(rows: list[RowInfo], cols: list[RowInfo]) -> list[str]:
    """The moves that change the board, in the fixed order up, down, left, right."""
    legal: list[str] = []
    if cols[0].can_left or cols[1].can_left or cols[2].can_left or cols[3].can_left:
        legal.append("up")
    if cols[0].can_right or cols[1].can_right or cols[2].can_right or cols[3].can_right:
        legal.append("down")
    if rows[0].can_left or rows[1].can_left or rows[2].can_left or rows[3].can_left:
        legal.append("left")
    if rows[0].can_right or rows[1].can_right or rows[2].can_right or rows[3].can_right:
        legal.append("right")
    return legal


def apply_move(board: Board, direction: str, rows: list[RowInfo] | None = None,
               cols: list[RowInfo] | None = None) -> tuple[Board, int]:
    """The board after sliding `direction` (no spawn) and the merge score; the board is returned
    unchanged (same tuple) with score 0 when the move changes nothing."""
    if rows is None or cols is None:
        rows, cols = line_infos(board)
    if direction == "left":
        a, b, c, d = rows
        if not (a.can_left or b.can_left or c.can_left or d.can_left):
            return board, 0
        return (a.left + b.left + c.left + d.left,
                a.left_score + b.left_score + c.left_score + d.left_score)
    if direction == "right":
        a, b, c, d = rows
        if not (a.can_right or b.can_right or c.can_right or d.can_right):
            return board, 0
        return (a.right + b.right + c.right + d.right,
                a.right_score + b.right_score + c.right_score + d.right_score)
    a, b, c, d = cols
    if direction == "up":
        if not (a.can_left or b.can_left or c.can_left or d.can_left):
            return board, 0
        ca, cb, cc, cd = a.left, b.left, c.left, d.left
        score = a.left_score + b.left_score + c.left_score + d.left_score
    elif direction == "down":
        if not (a.can_right or b.can_right or c.can_right or d.can_right):
            return board, 0
        ca, cb, cc, cd = a.right, b.right, c.right, d.right
        score = a.right_score + b.right_score + c.right_score + d.right_score
    else:
        raise ValueError(f"direction {direction!r}; expected one of {DIRECTIONS}")
    return (ca[0], cb[0], cc[0], cd[0], ca[1], cb[1], cc[1], cd[1],
            ca[2], cb[2], cc[2], cd[2], ca[3], cb[3], cc[3], cd[3]), score


def spawn(board: Board, key: int, counter: int) -> Board:
    """Place one tile on an empty cell using draw `counter`: the cell is the draw's low 32 bits modulo
    the number of empty cells (row-major order), the tile is 4 when the high 32 bits modulo 10 are 0
    (p = 0.1), else 2. The board must have an empty cell."""
    z = draw(key, counter)
    empties = [i for i in range(CELLS) if board[i] == 0]
    cell = empties[(z & 0xFFFFFFFF) % len(empties)]
    exponent = 2 if (z >> 32) % 10 == 0 else 1
    return board[:cell] + (exponent,) + board[cell + 1:]


def new_board(key: int) -> tuple[Board, int]:
    """The starting board of the episode `key` (two spawned tiles) and the number of draws used."""
    board: Board = (0,) * CELLS
    board = spawn(board, key, 0)
    board = spawn(board, key, 1)
    return board, 2


def exponent_of(value: int) -> int:
    """Exponent of a tile value (0 for empty); ValueError unless the value is 0 or 2**e with 1 <= e <= 63."""
    if value == 0:
        return 0
    if value < 2 or value & (value - 1) or value > 1 << 63:
        raise ValueError(f"tile value {value!r} is not 0 or a power of two from 2 to 2**63")
    return value.bit_length() - 1


def board_from_values(values: list[int] | list[list[int]]) -> Board:
    """A board from 16 tile values (flat, row-major) or a 4x4 nested list."""
    flat = [v for row in values for v in row] if values and isinstance(values[0], list) else values
    if len(flat) != CELLS:
        raise ValueError(f"a 2048 board has {CELLS} cells, got {len(flat)}")
    return tuple(exponent_of(int(v)) for v in flat)  # type: ignore[arg-type]


_VALUE: tuple[int, ...] = (0,) + tuple(1 << e for e in range(1, 64))


def board_values(board: Board) -> list[list[int]]:
    """Tile values as a 4x4 nested list (0 = empty)."""
    vals = list(map(_VALUE.__getitem__, board))
    return [vals[0:4], vals[4:8], vals[8:12], vals[12:16]]
