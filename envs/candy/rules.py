"""Candy Crush board logic on bitboards: pure functions, no gymnasium, no text.

A board is a string of ROWS*COLS colour letters in row-major order (row 0 at the top), e.g. "RGBY...".
For line and move detection each colour becomes a 64-bit mask (bit r*8+c) and everything is a handful of
shifts and ands on Python ints, which is what makes the env fast in pure Python.

Randomness: candy number n of an episode is `draw(key, n) % n_colours`, and shuffle draw n is
`draw(key ^ SHUFFLE_SALT, n)` (SplitMix64, counter-based), so the RNG state is two counters.

Never imports `coplay`, gymnasium or numpy.
"""

from __future__ import annotations

from collections.abc import Callable

ROWS = COLS = 8
CELLS = ROWS * COLS
COLOUR_LETTERS = "RGBYPO"  # red, green, blue, yellow, purple, orange
FULL = (1 << CELLS) - 1
COL0 = sum(1 << (r * COLS) for r in range(ROWS))
NOT_COL0 = FULL & ~COL0
NOT_COL7 = FULL & ~(COL0 << (COLS - 1))
MASK64 = (1 << 64) - 1
GOLDEN_GAMMA = 0x9E3779B97F4A7C15
SHUFFLE_SALT = 0x5DEECE66D1CE4E5B
MAX_SHUFFLES = 100

#: Canonical action of each horizontal swap (cell i with i+1) and vertical swap (cell i with i+8).
H_ACTION: dict[int, str] = {r * COLS + c: f"swap ({r},{c}) ({r},{c + 1})"
                            for r in range(ROWS) for c in range(COLS - 1)}
V_ACTION: dict[int, str] = {r * COLS + c: f"swap ({r},{c}) ({r + 1},{c})"
                            for r in range(ROWS - 1) for c in range(COLS)}


def draw(key: int, counter: int) -> int:
    """Draw number `counter` of the stream `key`: SplitMix64 of key + counter * golden gamma (64 bits)."""
    z = (key + (counter + 1) * GOLDEN_GAMMA) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


_TABLES: dict[str, list[dict[int, int]]] = {}


def colour_masks(board: str, colours: str) -> list[int]:
    """One bitmask per colour (bit r*8+c set where that colour sits); other characters are in none."""
    tables = _TABLES.get(colours)
    if tables is None:
        tables = _TABLES[colours] = [
            {ord(ch): ("1" if ch == mine else "0") for ch in COLOUR_LETTERS + "?"} for mine in colours]
    rev = board[::-1]
    return [int(rev.translate(t), 2) for t in tables]


def line_cells(masks: list[int]) -> int:
    """Mask of every cell in a horizontal or vertical line of 3+ same-coloured candies."""
    out = 0
    for m in masks:
        e = (m >> 1) & NOT_COL7
        h = m & e & ((e >> 1) & NOT_COL7)  # starts of horizontal triples
        if h:
            w = (h << 1) & NOT_COL0
            out |= h | w | ((w << 1) & NOT_COL0)
        v = m & (m >> 8) & (m >> 16)  # tops of vertical triples
        if v:
            out |= v | ((v << 8) & FULL) | ((v << 16) & FULL)
    return out


def matching_swaps(masks: list[int]) -> tuple[int, int]:
    """Swaps that make a line on a board without lines: (H, V) where bit i of H is the swap of cell i with
    its right neighbour and bit i of V the swap of cell i with the cell below."""
    hmask = vmask = 0
    for m in masks:
        em = (m >> 1) & NOT_COL7  # east neighbour has the colour
        wm = (m << 1) & NOT_COL0
        sm = m >> 8
        nm = (m << 8) & FULL
        vert = (nm & ((nm << 8) & FULL)) | (sm & (sm >> 8)) | (nm & sm)
        horiz = (em & ((em >> 1) & NOT_COL7)) | (wm & ((wm << 1) & NOT_COL0)) | (em & wm)
        # a candy of this colour moving east into q (from q-1), west (from q+1), south, north:
        hmask |= ((wm & ((em & ((em >> 1) & NOT_COL7)) | vert)) >> 1)
        hmask |= em & ((wm & ((wm << 1) & NOT_COL0)) | vert)
        vmask |= (nm & ((sm & (sm >> 8)) | horiz)) >> 8
        vmask |= sm & ((nm & ((nm << 8) & FULL)) | horiz)
    return hmask, vmask


def _row_tables(actions: dict[int, str], rows: int, cols: int) -> list[list[tuple[str, ...]]]:
    """Per row r and byte b: the actions of the cells r*8+i whose bit i is set in b, left to right."""
    tables = []
    for r in range(rows):
        per_byte = []
        for byte in range(1 << COLS):
            per_byte.append(tuple(actions[r * COLS + i] for i in range(cols) if byte >> i & 1))
        tables.append(per_byte)
    return tables


_H_BY_ROW = _row_tables(H_ACTION, ROWS, COLS - 1)
_V_BY_ROW = _row_tables(V_ACTION, ROWS - 1, COLS)


def swap_actions(hmask: int, vmask: int) -> list[str]:
    """Canonical action strings of the swaps in (H, V) in reading order: row by row, each row's
    horizontal swaps left to right, then its swaps with the row below left to right."""
    out: list[str] = []
    for r in range(ROWS):
        shift = r * COLS
        hbyte = (hmask >> shift) & 0xFF
        if hbyte:
            out.extend(_H_BY_ROW[r][hbyte])
        if r < ROWS - 1:
            vbyte = (vmask >> shift) & 0xFF
            if vbyte:
                out.extend(_V_BY_ROW[r][vbyte])
    return out


def swapped(board: str, a: int, b: int) -> str:
    """The board with cells a < b exchanged."""
    return f"{board[:a]}{board[b]}{board[a + 1:b]}{board[a]}{board[b + 1:]}"


def clears_at_once(board: str, colours: str, a: int, b: int) -> int:
    """Candies the swap of cells a < b clears at once: the lines it makes, before cascades and refills."""
    return line_cells(colour_masks(swapped(board, a, b), colours)).bit_count()


def collapse(board: str, clear: int, next_candy: Callable[[], str]) -> str:
    """Remove the cleared cells, let candies fall, and fill the gaps from `next_candy()`: columns from
    left to right, each column from its lowest new cell upward."""
    cells = list(board)
    for c in range(COLS):
        col_bits = (clear >> c) & COL0
        if not col_bits:
            continue
        kept = [cells[r * COLS + c] for r in range(ROWS) if not (col_bits >> (r * COLS)) & 1]
        new = ROWS - len(kept)
        fresh = [next_candy() for _ in range(new)]
        fresh.reverse()
        column = fresh + kept
        for r in range(ROWS):
            cells[r * COLS + c] = column[r]
    return "".join(cells)


def resolve(board: str, colours: str, next_candy: Callable[[], str]) -> tuple[str, int, int]:
    """Clear lines, drop, refill, until no line is left: (board, candies cleared, cascade waves)."""
    cleared = 0
    waves = 0
    while True:
        clear = line_cells(colour_masks(board, colours))
        if not clear:
            return board, cleared, waves
        cleared += clear.bit_count()
        waves += 1
        board = collapse(board, clear, next_candy)


def is_settled(board: str, colours: str) -> bool:
    """No line on the board and at least one swap makes one."""
    masks = colour_masks(board, colours)
    if line_cells(masks):
        return False
    hmask, vmask = matching_swaps(masks)
    return bool(hmask | vmask)


class CandyStream:
    """The seeded candy and shuffle draws of an episode (two counters over one key)."""

    def __init__(self, key: int, colours: str, candy_counter: int = 0, shuffle_counter: int = 0) -> None:
        self.key = key
        self.colours = colours
        self.candy_counter = candy_counter
        self.shuffle_counter = shuffle_counter

    def next_candy(self) -> str:
        z = draw(self.key, self.candy_counter)
        self.candy_counter += 1
        return self.colours[z % len(self.colours)]

    def next_index(self, bound: int) -> int:
        z = draw(self.key ^ SHUFFLE_SALT, self.shuffle_counter)
        self.shuffle_counter += 1
        return z % bound


def generate(stream: CandyStream) -> str:
    """A fresh board: cells in row-major order from the candy stream, redrawing a candy that would
    complete a line with the two to its left or the two above; then reshuffled until a move exists."""
    cells: list[str] = []
    for i in range(CELLS):
        r, c = divmod(i, COLS)
        while True:
            candy = stream.next_candy()
            if c >= 2 and cells[i - 1] == candy == cells[i - 2]:
                continue
            if r >= 2 and cells[i - COLS] == candy == cells[i - 2 * COLS]:
                continue
            break
        cells.append(candy)
    return settle("".join(cells), stream)


def reshuffle(board: str, stream: CandyStream) -> str:
    """The same candies in a Fisher-Yates order from the shuffle draws."""
    cells = list(board)
    for i in range(CELLS - 1, 0, -1):
        j = stream.next_index(i + 1)
        cells[i], cells[j] = cells[j], cells[i]
    return "".join(cells)


def settle(board: str, stream: CandyStream) -> str:
    """Reshuffle (no points) until the board has no line and at least one move; a board that resists
    `MAX_SHUFFLES` shuffles is regenerated from the candy stream. A settled board is returned as is."""
    shuffles = 0
    while not is_settled(board, stream.colours):
        if shuffles == MAX_SHUFFLES:
            return generate(stream)
        board = reshuffle(board, stream)
        shuffles += 1
    return board
