"""The seven tetrominoes, their rotations, and the per-rotation tables the board logic uses.

Coordinates: a cell is ``(dr, dc)`` with ``dr`` counted upward from the piece's lowest row and ``dc``
rightward from its left-most column, so ``col`` in an action is where ``dc = 0`` lands. Rotation 0 is the
spawn orientation (guideline/SRS shapes, T pointing up); rotation k is k quarter turns clockwise, re-anchored
to the bottom-left. Rotations that give the same cells are the same placement: O has 1 distinct rotation,
I, S and Z have 2, T, J and L have 4; ``canonical_rotation`` maps any of 0-3 to the lowest equal one.

Pure Python, no imports beyond the standard library; must never import gymnasium, numpy or `coplay`.
"""

from __future__ import annotations

from dataclasses import dataclass

PIECE_NAMES: tuple[str, ...] = ("I", "O", "T", "S", "Z", "J", "L")

#: Spawn orientation of each piece as drawn (top row first), `#` = cell.
SPAWN_SHAPES: dict[str, tuple[str, ...]] = {
    "I": ("####",),
    "O": ("##", "##"),
    "T": (".#.", "###"),
    "S": (".##", "##."),
    "Z": ("##.", ".##"),
    "J": ("#..", "###"),
    "L": ("..#", "###"),
}

#: Left-most column of each piece at spawn (guideline: I, J, L, S, T, Z over columns 3-5/3-6, O over 4-5).
SPAWN_COLUMN: dict[str, int] = {"I": 3, "O": 4, "T": 3, "S": 3, "Z": 3, "J": 3, "L": 3}


@dataclass(frozen=True)
class Rotation:
    """One orientation of one piece, with the tables that make dropping it cheap.

    cells: ``(dr, dc)`` pairs. width / height: bounding box. bottom[dc]: lowest ``dr`` in column ``dc``
    (where the piece rests on the stack). top[dc]: highest ``dr`` in column ``dc``. row_masks[dr]: bitmask
    of the cells in row ``dr`` with bit ``dc`` set (shift left by ``col`` to place). drawing: the shape as
    text rows, top first.
    """

    piece: str
    index: int
    cells: tuple[tuple[int, int], ...]
    width: int
    height: int
    bottom: tuple[int, ...]
    top: tuple[int, ...]
    row_masks: tuple[int, ...]
    drawing: tuple[str, ...]


def _cells_of(drawing: tuple[str, ...]) -> frozenset[tuple[int, int]]:
    """Cells of a drawn shape, ``dr`` counted upward from the bottom row."""
    height = len(drawing)
    return frozenset(
        (height - 1 - r, c) for r, line in enumerate(drawing) for c, ch in enumerate(line) if ch == "#"
    )


def _rotate_clockwise(drawing: tuple[str, ...]) -> tuple[str, ...]:
    """The drawing turned a quarter clockwise."""
    height, width = len(drawing), len(drawing[0])
    return tuple("".join(drawing[height - 1 - c][r] for c in range(height)) for r in range(width))


def _build_rotation(piece: str, index: int, drawing: tuple[str, ...]) -> Rotation:
    cells = _cells_of(drawing)
    width, height = len(drawing[0]), len(drawing)
    bottom = tuple(min(dr for dr, dc in cells if dc == col) for col in range(width))
    top = tuple(max(dr for dr, dc in cells if dc == col) for col in range(width))
    row_masks = tuple(sum(1 << dc for dr, dc in cells if dr == row) for row in range(height))
    return Rotation(piece, index, tuple(sorted(cells)), width, height, bottom, top, row_masks, drawing)


def _build_tables() -> tuple[dict[str, tuple[Rotation, ...]], dict[str, tuple[int, ...]]]:
    all_rotations: dict[str, tuple[Rotation, ...]] = {}
    canonical: dict[str, tuple[int, ...]] = {}
    for piece in PIECE_NAMES:
        drawing = SPAWN_SHAPES[piece]
        rotations: list[Rotation] = []
        for index in range(4):
            rotations.append(_build_rotation(piece, index, drawing))
            drawing = _rotate_clockwise(drawing)
        all_rotations[piece] = tuple(rotations)
        canonical[piece] = tuple(
            next(j for j in range(4) if rotations[j].cells == rotations[i].cells) for i in range(4)
        )
    return all_rotations, canonical


ROTATIONS, _CANONICAL = _build_tables()

#: The distinct rotations of each piece, in index order (O: (0,); I, S, Z: (0, 1); T, J, L: (0, 1, 2, 3)).
DISTINCT_ROTATIONS: dict[str, tuple[int, ...]] = {
    piece: tuple(sorted(set(_CANONICAL[piece]))) for piece in PIECE_NAMES
}


def canonical_rotation(piece: str, rotation: int) -> int:
    """The lowest rotation index giving the same cells as ``rotation`` (0-3) of ``piece``."""
    return _CANONICAL[piece][rotation]


def rotation(piece: str, index: int) -> Rotation:
    """The tables of rotation ``index`` (0-3) of ``piece``."""
    return ROTATIONS[piece][index]
