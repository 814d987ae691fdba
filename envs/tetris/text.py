"""The Tetris observation text (what the model sees) and its parser (the test that the text is faithful).

The text shows the whole board (row 20 at the top, row 1 at the bottom, columns 0-9), the current piece with
a drawing of each of its distinct rotations and the columns where each may be placed, the next 4 pieces,
placements made and allowed, score, lines (total and by the last placement), holes and column heights,
and the action format. ``parse_observation`` reads the same fields back.

Never imports `coplay`, gymnasium or numpy.
"""

from __future__ import annotations

import re
from typing import Any

from coplay_envs.tetris.pieces import DISTINCT_ROTATIONS, PIECE_NAMES, ROTATIONS
from coplay_envs.tetris.rules import HEIGHT, WIDTH

_BORDER = "    +" + "-" * WIDTH + "+"
_COLUMN_LABELS = "     " + "".join(str(c % 10) for c in range(WIDTH))
_ROW_LABELS = tuple(f"{HEIGHT - i:>3} |" for i in range(HEIGHT))
_SHAPE_COLUMN = 8


def _rotation_block(piece: str) -> list[str]:
    """Drawings of the piece's distinct rotations side by side, bottoms aligned, under `rot k` labels."""
    rotations = [ROTATIONS[piece][i] for i in DISTINCT_ROTATIONS[piece]]
    tallest = max(rot.height for rot in rotations)
    lines = ["".join(f"rot {rot.index}".ljust(_SHAPE_COLUMN) for rot in rotations).rstrip()]
    for level in range(tallest):
        cells = []
        for rot in rotations:
            offset = tallest - rot.height
            text = rot.drawing[level - offset] if level >= offset else ""
            cells.append(("  " + text).ljust(_SHAPE_COLUMN))
        lines.append("".join(cells).rstrip())
    return lines


_ROTATION_BLOCKS: dict[str, list[str]] = {piece: _rotation_block(piece) for piece in PIECE_NAMES}


def format_columns(columns: list[int]) -> str:
    """Ascending columns as ranges: [0, 1, 2, 5] -> '0-2,5'."""
    parts: list[str] = []
    start = prev = columns[0]
    for col in columns[1:]:
        if col != prev + 1:
            parts.append(f"{start}-{prev}" if prev > start else str(start))
            start = col
        prev = col
    parts.append(f"{start}-{prev}" if prev > start else str(start))
    return ",".join(parts)


def render_observation(view: dict[str, Any], legal: list[tuple[int, int]], truncated: bool = False) -> str:
    """The observation text of ``view``; ``legal`` is the list of legal ``(rotation, col)`` placements."""
    current = view["current"]
    lines = [
        f"TETRIS {WIDTH} wide x {HEIGHT} tall. Placement {view['placements']} of {view['max_placements']} "
        f"done. Score {view['score']}. Lines {view['lines']} (last placement cleared {view['last_lines']}).",
        f"Current piece: {current}   Next: {' '.join(view['preview'])}",
        _BORDER,
    ]
    board = view["board"]
    lines.extend(_ROW_LABELS[i] + board[i] + "|" for i in range(HEIGHT))
    lines.append(_BORDER)
    lines.append(_COLUMN_LABELS)
    lines.append("Column heights: " + " ".join(str(h) for h in view["column_heights"]))
    lines.append(f"Holes: {view['holes']}")
    if view["game_over"]:
        lines.append(f"GAME OVER: the {current} piece cannot enter the board.")
        return "\n".join(lines)
    if truncated:
        lines.append("The placement limit is reached: the game has ended.")
        return "\n".join(lines)
    lines.append(f"Rotations of {current} (a placement's col is the column of the shape's left edge):")
    lines.extend(_ROTATION_BLOCKS[current])
    by_rotation: dict[int, list[int]] = {}
    for index, col in legal:
        by_rotation.setdefault(index, []).append(col)
    lines.append(
        "Legal: " + "; ".join(f"rot {index} col {format_columns(cols)}"
                              for index, cols in by_rotation.items())
    )
    lines.append(
        f"Your move: place {current} rot <r> col <c> (the piece falls straight down until it rests)."
    )
    return "\n".join(lines)


_HEADER = re.compile(
    r"TETRIS \d+ wide x \d+ tall\. Placement (\d+) of (\d+) done\. Score (\d+)\. "
    r"Lines (\d+) \(last placement cleared (\d+)\)\."
)
_PIECES = re.compile(r"Current piece: ([IOTSZJL])   Next: ((?:[IOTSZJL] ?)*)")
_LEGAL_ENTRY = re.compile(r"rot (\d) col ([\d,-]+)")
_BOARD_ROW = re.compile(r"\s*(\d+) \|([.#]{" + str(WIDTH) + r"})\|")


def parse_observation(text: str) -> dict[str, Any]:
    """Read an observation back: board rows (top first), pieces, counters, heights, holes, legal actions.

    Raises ValueError when the text is not a Tetris observation.
    """
    lines = text.split("\n")
    header = _HEADER.fullmatch(lines[0])
    pieces = _PIECES.fullmatch(lines[1])
    if header is None or pieces is None:
        raise ValueError(f"not a Tetris observation header: {lines[:2]!r}")
    board_rows: dict[int, str] = {}
    legal: list[str] = []
    heights: list[int] | None = None
    holes: int | None = None
    for line in lines[2:]:
        row = _BOARD_ROW.fullmatch(line)
        if row:
            board_rows[int(row.group(1))] = row.group(2)
        elif line.startswith("Column heights: "):
            heights = [int(h) for h in line.removeprefix("Column heights: ").split()]
        elif line.startswith("Holes: "):
            holes = int(line.removeprefix("Holes: "))
        elif line.startswith("Legal: "):
            legal = _parse_legal(line.removeprefix("Legal: "), pieces.group(1))
    if sorted(board_rows) != list(range(1, HEIGHT + 1)) or heights is None or holes is None:
        raise ValueError("Tetris observation lacks board rows, column heights or holes")
    return {
        "board": [board_rows[HEIGHT - i] for i in range(HEIGHT)],
        "current": pieces.group(1),
        "preview": pieces.group(2).split(),
        "placements": int(header.group(1)),
        "max_placements": int(header.group(2)),
        "score": int(header.group(3)),
        "lines": int(header.group(4)),
        "last_lines": int(header.group(5)),
        "column_heights": heights,
        "holes": holes,
        "game_over": "GAME OVER" in text,
        "legal_actions": legal,
    }


def _parse_legal(text: str, piece: str) -> list[str]:
    """``rot 0 col 0-2,5; rot 1 col 3`` -> the canonical action strings, in the order shown."""
    actions: list[str] = []
    for entry in text.split("; "):
        match = _LEGAL_ENTRY.fullmatch(entry)
        if match is None:
            raise ValueError(f"unreadable legal placements entry {entry!r}")
        for part in match.group(2).split(","):
            first, _, last = part.partition("-")
            for col in range(int(first), int(last or first) + 1):
                actions.append(f"place {piece} rot {match.group(1)} col {col}")
    return actions
