"""2048 observation text: the whole board plus what the player must do now, and its exact parse-back.

The board block is four lines of four right-aligned cells (`.` = empty, otherwise the tile value, e.g.
`65536`), so `parse_board(render(...))` returns the exact position. Never imports `coplay` or gymnasium.

With `points` (the env's `show_merges`) the legal moves line gives each move, in the fixed order up, down,
left, right, followed by the points its merges score at once (`up: 0, down: 8, left: 4`): what a player who
looks at the board can work out, put where a small model can read it. The best-scoring move is not simply
the first one listed, so a player has to read the numbers to find it.
"""

from __future__ import annotations

from coplay_envs.game2048.rules import CELLS, Board, board_from_values

BOARD_HEADER = "Board (top row first, . = empty):"
_CELL: list[str] = ["      ."] + [f" {1 << e:>6}" for e in range(1, 64)]  # a space before every cell


MERGES_HEAD = "Legal moves, each with the points its merges score at once:"


def moves_text(legal: list[str], points: list[int] | None = None) -> str:
    """The legal moves line: the moves, or with `points` (one per move) each followed by its points."""
    if not legal:
        return "Legal moves: none"
    if points is None:
        return f"Legal moves: {', '.join(legal)}"
    if len(points) != len(legal):
        raise ValueError(f"{len(points)} merge scores for {len(legal)} moves")
    return f"{MERGES_HEAD} " + ", ".join(f"{move}: {p}" for move, p in zip(legal, points, strict=True))


def render(board: Board, score: int, moves: int, max_moves: int, legal: list[str],
           terminated: bool, truncated: bool, points: list[int] | None = None) -> str:
    """The observation text of a 2048 position (`points`: each legal move's merge score, shown after it)."""
    cell = _CELL
    b = board
    grid = (f"{cell[b[0]]}{cell[b[1]]}{cell[b[2]]}{cell[b[3]]}\n"
            f"{cell[b[4]]}{cell[b[5]]}{cell[b[6]]}{cell[b[7]]}\n"
            f"{cell[b[8]]}{cell[b[9]]}{cell[b[10]]}{cell[b[11]]}\n"
            f"{cell[b[12]]}{cell[b[13]]}{cell[b[14]]}{cell[b[15]]}")
    if terminated:
        status = "Game over: no move changes the board."
    elif truncated:
        status = f"Game over: the {max_moves}-move limit is reached."
    else:
        status = f"Your move: one of {', '.join(legal)}."
    return (f"2048. Move {moves} of {max_moves}, score {score}.\n{BOARD_HEADER}\n{grid}\n"
            f"{moves_text(legal, points)}\n{status}")


def parse_board(text: str) -> Board:
    """The board (tuple of 16 exponents) shown in an observation text; ValueError if there is none."""
    lines = text.splitlines()
    try:
        start = lines.index(BOARD_HEADER) + 1
    except ValueError:
        raise ValueError(f"no line {BOARD_HEADER!r} in the observation") from None
    values: list[int] = []
    for line in lines[start:start + 4]:
        values.extend(0 if token == "." else int(token) for token in line.split())
    if len(values) != CELLS:
        raise ValueError(f"expected {CELLS} cells under {BOARD_HEADER!r}, found {len(values)}")
    return board_from_values(values)
