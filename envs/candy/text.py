"""Candy Crush observation text: the whole board, the moves left and the swaps that make a line, plus
its exact parse-back (`parse_board(render(...)) == board`). Never imports `coplay` or gymnasium.

With `clears` (the env's `show_clears`) the swaps are listed by how many candies each clears at once
(before cascades and refills), most first: `5: swap (1,2) (1,3); 3: swap (0,0) (0,1), swap ...`. A player
who looks at the board sees that much; a 135M model reading an 8x8 letter grid does not (docs/results.md).
With `order="board"` (the env's `clears_order`) they keep the reading order of the legal swaps, each followed
by its count: `swap (0,0) (0,1): 3, swap (1,2) (1,3): 5, ...`, so the best swap is not simply the first
one listed and a player has to read the counts to find it.
"""

from __future__ import annotations

from coplay_envs.candy.rules import CELLS, COLOUR_LETTERS, COLS, ROWS

BOARD_HEADER = "Board (row 0 at the top; columns 0-7 left to right):"
COLUMN_LINE = "   " + " ".join(str(c) for c in range(COLS))
_SPACED = str.maketrans({ch: " " + ch for ch in COLOUR_LETTERS})


CLEARS_ORDERS = ("count", "board")


def swaps_text(legal: list[str], clears: list[int] | None, order: str = "count") -> str:
    """The legal swaps line: in the given order, or with `clears` (one count per swap) grouped by count,
    most first (`order="count"`), or each followed by its count in the given order (`order="board"`)."""
    if not legal:
        return "Swaps that make a line (0): none"
    if clears is None:
        return f"Swaps that make a line ({len(legal)}): {', '.join(legal)}"
    if len(clears) != len(legal):
        raise ValueError(f"{len(clears)} clear counts for {len(legal)} swaps")
    if order not in CLEARS_ORDERS:
        raise ValueError(f"order {order!r}; expected one of {CLEARS_ORDERS}")
    if order == "board":
        listed = ", ".join(f"{action}: {count}" for action, count in zip(legal, clears, strict=True))
        return f"Swaps that make a line ({len(legal)}), each with the candies it clears at once: {listed}"
    groups: dict[int, list[str]] = {}
    for action, count in sorted(zip(legal, clears, strict=True), key=lambda ac: -ac[1]):
        groups.setdefault(count, []).append(action)
    listed = "; ".join(f"{count}: {', '.join(actions)}" for count, actions in groups.items())
    return f"Swaps that make a line ({len(legal)}), by candies cleared at once: {listed}"


def render(board: str, colours: str, score: int, moves: int, max_moves: int, legal: list[str],
           over: bool, clears: list[int] | None = None, clears_order: str = "count") -> str:
    """The observation text of a Candy Crush position (`clears`: see the module docstring)."""
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
            f"{swaps_text(legal, clears, clears_order)}\n{status}")


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
