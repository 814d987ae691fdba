"""Decode Super Mario Bros. RAM into what a player sees: the tile grid of the visible screen, the enemies
on it, Mario, and the status bar (x, y, coins, time, lives).

Everything here reads the game's own memory (never pixels, never template matching). Addresses follow the
community RAM map (datacrystal "Super Mario Bros./RAM map") and the SMB disassembly:

- block buffer `0x0500-0x069F`: two 16x13 pages of metatile ids (`0x0500` even pages, `0x05D0` odd pages),
  index `page * 208 + row * 16 + column`; row r covers screen pixels `32 + 16 r ..`, the status bar is above;
- screen left edge: page `0x071A`, pixel `0x071C`; Mario: page `0x006D`, x `0x0086`, y `0x00CE`, vertical
  screen `0x00B5` (1 = on screen), float state `0x001D` (0 = standing), speeds `0x0057` / `0x009F`,
  size `0x0754` (0 = big), power-up state `0x0756`, engine state `0x000E`;
- object slots 0-5: active `0x000F+i`, type `0x0016+i`, page `0x006E+i`, x `0x0087+i`, y `0x00CF+i`,
  vertical screen `0x00B6+i`; slots 0-4 hold enemies, slot 5 the power-up (type `0x2E`, which one in
  `0x0039`) or the flagpole's flag (`0x30`);
- status bar: coins `0x07ED-0x07EE`, time `0x07F8-0x07FA` (decimal digits), lives `0x075A` (+1 = shown),
  world `0x075F`, stage `0x075C`.

Metatile ids come from the disassembly's metatile tables (four palettes of ids `0x00-`, `0x40-`, `0x80-`,
`0xC0-`). Hidden blocks (`0x5F`, `0x60`) are shown as empty: a player cannot see them.

Imports numpy-free Python only; never imports `coplay`.
"""

from __future__ import annotations

from dataclasses import dataclass

ROWS: int = 13  #: rows of the block buffer (screen pixels 32..239)
COLUMNS: int = 17  #: visible columns: 256 px = 16 tiles, plus the one partly visible when not aligned
TILE: int = 16  #: pixels per tile
TOP_PIXEL: int = 32  #: screen y of row 0 (the status bar is above)

EMPTY: str = "."
MARIO: str = "M"

#: symbol -> meaning, for the legend and for tests; every symbol a cell can hold is here.
TILE_LEGEND: dict[str, str] = {
    ".": "empty",
    "#": "ground",
    "B": "brick",
    "?": "question block",
    "=": "used block",
    "X": "hard block",
    "P": "pipe",
    "|": "flagpole",
    "o": "coin",
    "T": "tree/mushroom top",
    ":": "trunk/fence",
    "C": "castle",
    "~": "water/lava",
    "-": "bridge",
    "!": "rope",
    "K": "cannon",
    "A": "axe",
    "%": "other solid",
}


def _tile_symbols() -> list[str]:
    """Symbol for each of the 256 metatile ids (ids from the SMB disassembly's metatile tables)."""
    table = ["%"] * 256
    table[0x00] = "."
    for tile_id in range(0x01, 0x10):  # black, bushes, mountains, guardrail, chain, tree tops: scenery
        table[tile_id] = "."
    for tile_id in range(0x10, 0x16):  # warp / decoration pipe ends, pipe shafts
        table[tile_id] = "P"
    for tile_id in range(0x16, 0x1C):  # tree ledges, mushroom platforms
        table[tile_id] = "T"
    for tile_id in range(0x1C, 0x22):  # sideways pipes
        table[tile_id] = "P"
    table[0x22] = "."  # sea plant (scenery)
    table[0x23] = "="  # blank drawn under a bumped block: solid
    table[0x24] = "|"  # flagpole ball
    table[0x25] = "|"  # flagpole shaft
    table[0x26] = "."  # blank used with vines (non-solid)
    for tile_id in range(0x40, 0x45):  # ropes and pulleys
        table[tile_id] = "!"
    for tile_id in range(0x45, 0x4C):  # castle parts
        table[tile_id] = "C"
    for tile_id in (0x4C, 0x4D, 0x4E, 0x4F, 0x50):  # ledge stump, fence, trunks, mushroom stumps
        table[tile_id] = ":"
    for tile_id in (0x51, 0x52, 0x53):  # breakable bricks
        table[tile_id] = "B"
    table[0x54] = "#"  # ground (cracked rock terrain)
    for tile_id in range(0x55, 0x5F):  # bricks holding power-up / vine / star / coins / 1-up
        table[tile_id] = "B"
    table[0x5F] = "."  # hidden coin block: invisible
    table[0x60] = "."  # hidden 1-up block: invisible
    table[0x61] = "X"  # solid 3-d block (stairs)
    table[0x62] = "X"  # white wall block
    table[0x63] = "-"  # bridge
    for tile_id in (0x64, 0x65, 0x66):  # bullet bill cannon
        table[tile_id] = "K"
    table[0x67] = "."  # blank used for a jumpspring (the spring is an object)
    table[0x68] = "B"  # half brick under a jumpspring
    table[0x69] = "X"  # water-level green rock
    table[0x6A] = "B"  # half brick
    table[0x6B] = "P"  # water pipe top
    table[0x6C] = "P"  # water pipe bottom
    table[0x6D] = "|"  # flag ball (residual)
    for tile_id in range(0x80, 0x86):  # clouds
        table[tile_id] = "."
    table[0x86] = "~"  # water / lava top
    table[0x87] = "~"  # water / lava
    table[0x88] = "#"  # cloud-level terrain
    table[0x89] = "-"  # Bowser's bridge
    table[0xC0] = "?"  # question block (coin)
    table[0xC1] = "?"  # question block (power-up)
    table[0xC2] = "o"  # coin
    table[0xC3] = "o"  # underwater coin
    table[0xC4] = "="  # empty (used) block
    table[0xC5] = "A"  # axe
    return table


TILE_SYMBOL: list[str] = _tile_symbols()

#: enemy type id -> (name, grid symbol). Ids from the RAM map's enemy list.
ENEMY_KINDS: dict[int, tuple[str, str]] = {
    0x00: ("koopa", "k"), 0x01: ("red koopa", "k"), 0x02: ("buzzy beetle", "b"), 0x03: ("red koopa", "k"),
    0x04: ("koopa", "k"), 0x05: ("hammer bro", "h"), 0x06: ("goomba", "g"), 0x07: ("blooper", "q"),
    0x08: ("bullet bill", "w"), 0x09: ("paratroopa", "p"), 0x0A: ("cheep-cheep", "c"),
    0x0B: ("cheep-cheep", "c"), 0x0C: ("podoboo", "f"), 0x0D: ("piranha plant", "v"),
    0x0E: ("paratroopa", "p"), 0x0F: ("red paratroopa", "p"), 0x10: ("paratroopa", "p"),
    0x11: ("lakitu", "l"), 0x12: ("spiny", "s"), 0x14: ("cheep-cheep", "c"), 0x15: ("bowser fire", "f"),
    0x17: ("bullet bill", "w"), 0x1B: ("firebar", "x"), 0x1C: ("firebar", "x"), 0x1D: ("firebar", "x"),
    0x1E: ("firebar", "x"), 0x1F: ("firebar", "x"), 0x24: ("lift", "_"), 0x25: ("lift", "_"),
    0x26: ("lift", "_"), 0x27: ("lift", "_"), 0x28: ("lift", "_"), 0x29: ("lift", "_"), 0x2A: ("lift", "_"),
    0x2B: ("lift", "_"), 0x2C: ("lift", "_"), 0x2D: ("bowser", "W"), 0x2F: ("vine", "i"),
    0x30: ("flag", "F"), 0x31: ("flag", "F"), 0x32: ("jumpspring", "j"), 0x35: ("toad", "t"),
}
#: kinds that do not hurt Mario (platforms, the flag, springs, vines, toad).
HARMLESS_KINDS: frozenset[str] = frozenset({"lift", "flag", "jumpspring", "vine", "toad"})
POWERUP_NAMES: dict[int, str] = {0: "mushroom", 1: "fire flower", 2: "star", 3: "1-up"}
#: legend of the object symbols (the enemy kinds, power-ups and Mario).
OBJECT_LEGEND: dict[str, str] = {
    "M": "Mario", "g": "goomba", "k": "koopa", "p": "paratroopa", "b": "buzzy beetle", "s": "spiny",
    "v": "piranha plant", "h": "hammer bro", "l": "lakitu", "c": "cheep-cheep", "q": "blooper",
    "w": "bullet bill", "f": "fire", "x": "firebar", "W": "bowser", "_": "lift", "F": "flag",
    "j": "jumpspring", "i": "vine", "t": "toad", "*": "power-up", "e": "other enemy",
}

#: symbols Mario stands on / bumps into (the game treats every drawn block as solid).
SOLID_SYMBOLS: frozenset[str] = frozenset("#B?=XPTCK-%")

_POWERUP_OBJECT = 0x2E
_FLAGPOLE_FLAG = 0x30
_STATE_DYING = 0x0B
_STATE_DEAD = 0x06


def _signed(byte: int) -> int:
    return byte - 256 if byte >= 128 else byte


def _digits(ram: bytes, address: int, count: int) -> int:
    value = 0
    for offset in range(count):
        value = value * 10 + ram[address + offset]
    return value


@dataclass(frozen=True)
class Object:
    """An enemy (or power-up) on the visible screen. x, y: level pixels (left / top of the sprite box);
    col, row: its cell in the screen grid."""

    kind: str
    symbol: str
    x: int
    y: int
    col: int
    row: int

    def as_dict(self) -> dict[str, int | str]:
        return {"kind": self.kind, "symbol": self.symbol, "x": self.x, "y": self.y, "col": self.col,
                "row": self.row}


def tile_rows(ram: bytes, first_column: int) -> list[str]:
    """The 13 x 17 tile grid (symbols, no objects) whose left column is level column `first_column`."""
    rows = []
    for row in range(ROWS):
        cells = []
        for col in range(first_column, first_column + COLUMNS):
            page, column = (col >> 4) & 1, col & 0x0F
            cells.append(TILE_SYMBOL[ram[0x0500 + page * 208 + row * 16 + column]])
        rows.append("".join(cells))
    return rows


def _cell(x_center: int, y_center: int, first_column: int) -> tuple[int, int]:
    return x_center // TILE - first_column, (y_center - TOP_PIXEL) // TILE


def objects(ram: bytes, first_column: int) -> list[Object]:
    """Active object slots (enemies, power-up, flag) whose cell lies on the visible grid."""
    found = []
    for slot in range(6):
        kind_id = ram[0x0016 + slot]
        # the flagpole's flag (0x30) keeps vertical page 0 although it is drawn on screen
        on_screen = ram[0x00B6 + slot] == 1 or (kind_id == _FLAGPOLE_FLAG and ram[0x00B6 + slot] == 0)
        if not ram[0x000F + slot] or not on_screen:
            continue
        if kind_id == _POWERUP_OBJECT:
            kind, symbol = "power-up:" + POWERUP_NAMES.get(ram[0x0039], "unknown"), "*"
        else:
            kind, symbol = ENEMY_KINDS.get(kind_id, (f"enemy {kind_id:#04x}", "e"))
        x = ram[0x006E + slot] * 256 + ram[0x0087 + slot]
        y = ram[0x00CF + slot]
        col, row = _cell(x + 8, y + 16, first_column)
        if 0 <= col < COLUMNS and 0 <= row < ROWS:
            found.append(Object(kind, symbol, x, y, col, row))
    return found


def decode_view(ram: bytes) -> dict:
    """What the player sees, as a JSON-serialisable dict (the env's `info["view"]` minus episode counters).

    Keys: world, stage, x, y (pixels above the screen bottom, like `gymnasium-mariobros`), screen_x (left
    edge), first_column, tiles (13 strings of 17 symbols), objects (list of dicts), mario (col, rows,
    size, on_ground, vx, vy, visible), coins, time, lives, dying.
    """
    left = ram[0x071A] * 256 + ram[0x071C]
    first_column = left // TILE
    x = ram[0x006D] * 256 + ram[0x0086]
    y_screen = ram[0x00CE]
    viewport = ram[0x00B5]
    big = ram[0x0754] == 0
    if viewport == 1:
        y = 255 - y_screen
    elif viewport == 0:
        y = 255 + (255 - y_screen)
    else:
        y = -(viewport - 1) * 256 + (255 - y_screen)
    col = (x + 8) // TILE - first_column
    body_tops = (y_screen, y_screen + 16) if big else (y_screen + 16,)
    rows = [(top + 8 - TOP_PIXEL) // TILE for top in body_tops] if viewport == 1 else []
    size = {0: "small", 1: "big"}.get(ram[0x0756], "fire")
    state = ram[0x000E]
    return {
        "world": ram[0x075F] + 1,
        "stage": ram[0x075C] + 1,
        "x": x,
        "y": y,
        "screen_x": left,
        "first_column": first_column,
        "tiles": tile_rows(ram, first_column),
        "objects": [obj.as_dict() for obj in objects(ram, first_column)],
        "mario": {
            "col": col,
            "rows": [row for row in rows if 0 <= row < ROWS],
            "size": size,
            "on_ground": ram[0x001D] == 0,
            "vx": _signed(ram[0x0057]),
            "vy": _signed(ram[0x009F]),
            "visible": viewport == 1,
        },
        "coins": _digits(ram, 0x07ED, 2),
        "time": _digits(ram, 0x07F8, 3),
        "lives": ram[0x075A] + 1,
        "dying": state in (_STATE_DYING, _STATE_DEAD) or viewport > 1,
    }
