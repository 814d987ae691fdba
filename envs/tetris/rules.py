"""Tetris rules as pure board logic: dropping pieces, clearing lines, the 7-bag, game over, the state dict.

The board is a list of ``HEIGHT`` row bitmasks, index 0 the bottom row, bit ``c`` set when column ``c`` is
filled. A placement ``(rotation, col)`` drops the piece straight down from above the board with its
left-most cell column at ``col``; it rests on the highest filled cell beneath any of its cells. It is legal
when the piece then lies wholly inside the board. Full rows clear and the rows above fall by the number
cleared. Reward per placement = 1 + 10 x lines cleared. After each placement the next piece comes from the
queue (7-bag: each bag of 7 is a seeded permutation of I O T S Z J L, bag k from ``(bag_seed, k)``); the game
is over when the new piece cannot enter: its spawn cells (rotation 0, spawn column, touching the top row)
are occupied, or it has no legal placement.

No gymnasium, no text, never imports `coplay`. Numpy is used only to permute bags.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from coplay_envs.tetris.pieces import DISTINCT_ROTATIONS, PIECE_NAMES, ROTATIONS, SPAWN_COLUMN, Rotation

WIDTH: int = 10
HEIGHT: int = 20
PREVIEW: int = 4
FULL_ROW: int = (1 << WIDTH) - 1
POINTS_PER_PIECE: int = 1
POINTS_PER_LINE: int = 10
DEFAULT_MAX_PLACEMENTS: int = 200  # an episode's placements unless the env is told otherwise

EMPTY_CELL: str = "."
FILLED_CELL: str = "#"

#: Row bitmask -> row text (column 0 first), and back.
ROW_TEXT: tuple[str, ...] = tuple(
    "".join(FILLED_CELL if mask >> c & 1 else EMPTY_CELL for c in range(WIDTH)) for mask in range(1 << WIDTH)
)
TEXT_ROW: dict[str, int] = {text: mask for mask, text in enumerate(ROW_TEXT)}


def column_heights(rows: list[int]) -> list[int]:
    """Height of each column: 1 + the row index of its top filled cell, 0 when empty."""
    heights = [0] * WIDTH
    remaining = FULL_ROW
    for r in range(HEIGHT - 1, -1, -1):
        found = rows[r] & remaining
        if found:
            remaining &= ~found
            for c in range(WIDTH):
                if found >> c & 1:
                    heights[c] = r + 1
            if not remaining:
                break
    return heights


def landing_row(heights: list[int], rot: Rotation, col: int) -> int:
    """Row index of the piece's bottom row when dropped at ``col`` from above the board."""
    return max(heights[col + dc] - rot.bottom[dc] for dc in range(rot.width))


def landing_rows(heights: list[int], rot: Rotation) -> list[int]:
    """``landing_row`` for every column the rotation fits in, left to right (one pass per piece column)."""
    count = WIDTH - rot.width + 1
    per_column = [[h - bottom for h in heights[dc:dc + count]] for dc, bottom in enumerate(rot.bottom)]
    return per_column[0] if rot.width == 1 else list(map(max, *per_column))


def legal_placements(heights: list[int], piece: str) -> list[tuple[int, int]]:
    """Every distinct legal ``(rotation, col)`` of ``piece``: rotations in index order, columns ascending."""
    placements: list[tuple[int, int]] = []
    for index in DISTINCT_ROTATIONS[piece]:
        rot = ROTATIONS[piece][index]
        limit = HEIGHT - rot.height
        placements.extend((index, col) for col, base in enumerate(landing_rows(heights, rot))
                          if base <= limit)
    return placements


@dataclass(frozen=True)
class Drop:
    """What one placement did: where the piece rested, which rows cleared, the eroded piece cells."""

    base_row: int
    lines: int
    eroded_cells: int
    rows: list[int]
    heights: list[int]


def drop_piece(rows: list[int], heights: list[int], rot: Rotation, col: int) -> Drop:
    """Drop ``rot`` at ``col`` onto ``rows`` (unchanged; a new board is returned) and clear full rows.

    The caller checks legality first (``landing_row(...) + rot.height <= HEIGHT``).
    """
    base = landing_row(heights, rot, col)
    new_rows = rows.copy()
    full_piece_rows: list[int] = []
    for dr, mask in enumerate(rot.row_masks):
        merged = new_rows[base + dr] | (mask << col)
        new_rows[base + dr] = merged
        if merged == FULL_ROW:
            full_piece_rows.append(dr)
    if not full_piece_rows:
        new_heights = heights.copy()
        for dc in range(rot.width):
            new_heights[col + dc] = base + rot.top[dc] + 1
        return Drop(base, 0, 0, new_rows, new_heights)
    eroded = sum(rot.row_masks[dr].bit_count() for dr in full_piece_rows)
    kept = [row for row in new_rows if row != FULL_ROW]
    lines = HEIGHT - len(kept)
    kept.extend([0] * lines)
    return Drop(base, lines, eroded, kept, column_heights(kept))


def spawn_blocked(rows: list[int], piece: str) -> bool:
    """True when ``piece`` at rotation 0 and its spawn column, touching the top row, overlaps the stack."""
    rot = ROTATIONS[piece][0]
    col = SPAWN_COLUMN[piece]
    base = HEIGHT - rot.height
    return any(rows[base + dr] & (mask << col) for dr, mask in enumerate(rot.row_masks))


def bag(bag_seed: int, bag_index: int) -> list[str]:
    """Bag number ``bag_index`` of the game seeded ``bag_seed``: a permutation of the seven pieces."""
    order = np.random.default_rng([bag_seed, bag_index]).permutation(len(PIECE_NAMES))
    return [PIECE_NAMES[int(i)] for i in order]


def board_to_text_rows(rows: list[int]) -> list[str]:
    """The board as ``HEIGHT`` strings of ``.``/``#``, top row first, column 0 leftmost."""
    return [ROW_TEXT[rows[r]] for r in range(HEIGHT - 1, -1, -1)]


def board_from_text_rows(lines: list[str]) -> list[int]:
    """Inverse of ``board_to_text_rows``; raises ValueError naming the bad row."""
    if len(lines) != HEIGHT:
        raise ValueError(f"board has {len(lines)} rows; expected {HEIGHT}")
    rows = [0] * HEIGHT
    for i, line in enumerate(lines):
        if line not in TEXT_ROW:
            raise ValueError(f"board row {i} (from the top) is {line!r}; expected {WIDTH} of '.' or '#'")
        rows[HEIGHT - 1 - i] = TEXT_ROW[line]
    return rows


@dataclass
class TetrisGame:
    """A full Tetris position plus the bag stream; ``play`` applies one legal placement.

    queue holds the upcoming pieces already drawn from bags (at least ``PREVIEW``); bags_drawn counts bags
    consumed from the stream, so piece ``n`` of the game (0-based, the first current piece being 0) comes
    from bag ``n // 7``.
    """

    bag_seed: int
    rows: list[int] = field(default_factory=lambda: [0] * HEIGHT)
    current: str = ""
    queue: list[str] = field(default_factory=list)
    bags_drawn: int = 0
    placements: int = 0
    lines: int = 0
    last_lines: int = 0
    score: int = 0
    game_over: bool = False
    heights: list[int] = field(default_factory=lambda: [0] * WIDTH)

    @classmethod
    def new(cls, bag_seed: int) -> TetrisGame:
        """An empty board and the first piece of bag 0."""
        game = cls(bag_seed=bag_seed)
        game._fill_queue()
        game.current = game.queue.pop(0)
        game._fill_queue()
        return game

    def _fill_queue(self) -> None:
        while len(self.queue) < PREVIEW + 1:
            self.queue.extend(bag(self.bag_seed, self.bags_drawn))
            self.bags_drawn += 1

    @property
    def preview(self) -> list[str]:
        """The next ``PREVIEW`` pieces, soonest first."""
        return self.queue[:PREVIEW]

    def legal(self) -> list[tuple[int, int]]:
        """Legal placements of the current piece (empty once the game is over)."""
        return [] if self.game_over else legal_placements(self.heights, self.current)

    def play(self, rotation_index: int, col: int) -> Drop:
        """Place the current piece (the placement must be legal), bring the next one in, update counters."""
        rot = ROTATIONS[self.current][rotation_index]
        result = drop_piece(self.rows, self.heights, rot, col)
        self.rows, self.heights = result.rows, result.heights
        self.placements += 1
        self.lines += result.lines
        self.last_lines = result.lines
        self.score += POINTS_PER_PIECE + POINTS_PER_LINE * result.lines
        self.current = self.queue.pop(0)
        self._fill_queue()
        self.game_over = spawn_blocked(self.rows, self.current) or not legal_placements(
            self.heights, self.current
        )
        return result

    def to_state(self) -> dict[str, Any]:
        """The whole position and the bag stream position, JSON-serialisable."""
        return {
            "board": board_to_text_rows(self.rows),
            "current": self.current,
            "queue": list(self.queue),
            "bag_seed": self.bag_seed,
            "bags_drawn": self.bags_drawn,
            "placements": self.placements,
            "lines": self.lines,
            "last_lines": self.last_lines,
            "score": self.score,
            "game_over": self.game_over,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> TetrisGame:
        """Rebuild a game from ``to_state`` output; raises ValueError naming the bad key."""
        try:
            rows = board_from_text_rows(list(state["board"]))
            pieces = [state["current"], *state["queue"]]
            game = cls(
                bag_seed=int(state["bag_seed"]),
                rows=rows,
                current=str(state["current"]),
                queue=[str(p) for p in state["queue"]],
                bags_drawn=int(state["bags_drawn"]),
                placements=int(state["placements"]),
                lines=int(state["lines"]),
                last_lines=int(state["last_lines"]),
                score=int(state["score"]),
                game_over=bool(state["game_over"]),
                heights=column_heights(rows),
            )
        except KeyError as missing:
            raise ValueError(f"tetris state lacks key {missing}") from None
        bad = [p for p in pieces if p not in PIECE_NAMES]
        if bad:
            raise ValueError(f"tetris state has unknown pieces {bad}; expected some of {PIECE_NAMES}")
        if len(game.queue) < PREVIEW:
            raise ValueError(f"tetris state queue has {len(game.queue)} pieces; expected >= {PREVIEW}")
        # A hand-made position may leave the current piece no way in: that is a finished game.
        game.game_over = game.game_over or spawn_blocked(rows, game.current) or not game.legal()
        return game
