"""Candy Crush observation text: the whole board, the moves left and the swaps that make a line, plus
its exact parse-back (`parse_board(render(...)) == board`). Never imports `coplay` or gymnasium.
"""

from __future__ import annotations

from coplay_envs.candy.rules import CELLS, COLOUR_LETTERS, COLS, ROWS

BOARD_HEADER = "Board (row 0 at the top; columns 0-7 left to right):"
COLUMN_LINE = "   " + " ".join(str(c) for c in range(COLS))
_SPACED = str.maketrans({ch: " " + ch for ch in COLOUR_LETTERS})


def render(board: str, colours: str, score: int, moves: int, max_moves: int, legal: list[str],
           over: bool) -> str:
    """The observation text of a Candy Crush position."""
    s = board.translate(_SPACED)  # " R G B ..." : 16 characters per row of the 8x8 board
    grid = (f"0 {s[0:16]}\n1 {s[16:32]}\n2 {s[32:48]}\n3 {s[48:64]}\n"
            f"4 {s[64:80]}\n5 {s[80:96]}\n6 {s[96:112]}\n7 {s[112:128]}")
    if over:
        status = f"Game over: all {max_moves} moves are used."
    else:
        status = ("Your move: swap (r1,c1) (r2,c2) of two orthogonally adjacent cells; a swap that makes "
                  "no line of 3+ still costs a move.")
    return (f"Candy Crush {ROWS}x{COLS}, colours {' '.join(colours)}. Move {moves} of {max_moves} "
            f"({max_moves - moves} left), score {score}.\n{BOARD_HEADER}\n{COLUMN_LINE}\n{grid}\n"
            f"Swaps that make a line ({len(legal)}): {', '.join(legal) if legal else 'none'}\n{status}")


def parse_board(text: str) -> str:
    """The board string shown in an observation text; ValueError if there is none."""
    lines = text.splitlines()
    try:
        start = lines.index(BOARD_HEADER) + 2
    except ValueError:
        raise ValueError(f"no line {BOARD_HEADER!r} in the observation") from None
    cells: list[str] = []
    for r, line in enumerate(lines[start:start + ROWS]):
        tokens = line.split()
        if not tokens or tokens[0] != str(r):
            raise ValueError(f"board row {r} is missing its label in {line!r}")
        cells.extend(tokens[1:])
    if len(cells) != CELLS or any(len(c) != 1 or c not in COLOUR_LETTERS for c in cells):
        raise ValueError(f"expected {CELLS} single-letter candies under {BOARD_HEADER!r}")
    return "".join(cells)
