"""Mario features: named numbers and booleans computed from `info["view"]` only (never from the emulator
state), the vocabulary skills are written in. "Ahead" means the 3 grid columns right of Mario's column.

Features:
- `x` (int): Mario's level x in pixels; `furthest_x` (int): the furthest x this episode (the score).
- `y` (int): pixels above the screen bottom (79 when small Mario stands on the 1-1 ground).
- `vx`, `vy` (int): horizontal / vertical speed as the game stores them (vy < 0 rising).
- `on_ground` (bool): standing on something (not jumping or falling).
- `big` (bool): big or fire Mario (one hit does not kill).
- `coins`, `time`, `lives` (int): the status bar; `actions_left` (int): actions before truncation.
- `enemies_near` (int): harmful enemies within 4 tiles (64 px) horizontally of Mario.
- `enemy_ahead_tiles` (float): tiles to the nearest harmful enemy ahead on screen (16.0 if none).
- `enemy_behind` (bool): a harmful enemy within 2 tiles behind Mario.
- `gap_ahead` (bool): a pit (no solid cell from Mario's feet row down) in one of the columns ahead.
- `pipe_ahead` (bool): a pipe cell in the columns ahead.
- `obstacle_ahead` (bool) / `obstacle_height` (int): a solid cell in the columns ahead at Mario's body or
  feet height / how many tiles it rises above Mario's feet row (0 if none).
- `block_above` (bool): a brick or ?-block within 4 rows straight above Mario.
- `question_blocks` (int): ?-blocks on screen; `flag_visible` (bool): the flagpole is on screen.
- `mario_row`, `mario_col` (int): Mario's (feet) cell on the grid (row -1 when off screen).
- `dying` (bool): Mario is dying.

Never imports `coplay`.
"""

from __future__ import annotations

from coplay_envs.mario.ram import COLUMNS, HARMLESS_KINDS, ROWS, SOLID_SYMBOLS, TILE

AHEAD_COLUMNS: int = 3
NEAR_PIXELS: int = 64
NO_ENEMY_TILES: float = 16.0
_LEVEL_PIXELS: int = 4096  # level x in pixels (16 per tile); World 1-1 is shorter

#: Per integer feature the values a contract's threshold may take (`coplay_envs.feature_scales`): pixel
#: positions inside a level, the status bar's ranges (coins 0-99, a 400-second clock), the 200-action
#: episode, the 13 x 17 screen grid. Speeds, `y` (negative in a pit) and `enemy_ahead_tiles` (a fraction)
#: stay free; booleans have none.
FEATURE_SCALES: dict[str, tuple[int, ...]] = {
    "x": tuple(range(_LEVEL_PIXELS + 1)),
    "furthest_x": tuple(range(_LEVEL_PIXELS + 1)),
    "coins": tuple(range(100)),
    "time": tuple(range(401)),
    "lives": tuple(range(257)),  # the RAM byte + 1
    "actions_left": tuple(range(201)),
    "enemies_near": tuple(range(11)),
    "obstacle_height": tuple(range(ROWS + 1)),
    "question_blocks": tuple(range(ROWS * COLUMNS + 1)),
    "mario_row": tuple(range(-1, ROWS)),
    "mario_col": tuple(range(-1, COLUMNS)),
}


def _column_has_floor(tiles: list[str], col: int, from_row: int) -> bool:
    return any(tiles[row][col] in SOLID_SYMBOLS for row in range(max(from_row, 0), ROWS))


def terrain_ahead(view: dict) -> dict[str, int | bool]:
    """gap / pipe / obstacle checks over the columns ahead of Mario (shared with the expert bot)."""
    tiles = view["tiles"]
    mario = view["mario"]
    col = mario["col"]
    feet = mario["rows"][-1] if mario["rows"] else ROWS - 3
    head = mario["rows"][0] if mario["rows"] else feet
    gap = pipe = obstacle = False
    height = 0
    for ahead in range(col + 1, min(col + 1 + AHEAD_COLUMNS, COLUMNS)):
        if ahead < 0:
            continue
        if not _column_has_floor(tiles, ahead, feet + 1) and tiles[feet][ahead] not in SOLID_SYMBOLS:
            gap = True
        if any(tiles[row][ahead] == "P" for row in range(ROWS)):
            pipe = True
        if any(tiles[row][ahead] in SOLID_SYMBOLS for row in range(max(head, 0), feet + 1)):
            obstacle = True
            top = feet
            while top - 1 >= 0 and tiles[top - 1][ahead] in SOLID_SYMBOLS:
                top -= 1
            height = max(height, feet - top + 1)
    return {"gap_ahead": gap, "pipe_ahead": pipe, "obstacle_ahead": obstacle, "obstacle_height": height}


def compute_features(view: dict) -> dict[str, int | float | bool]:
    """The documented features of one view."""
    mario = view["mario"]
    harmful = [obj for obj in view["objects"] if obj["kind"] not in HARMLESS_KINDS
               and not obj["kind"].startswith("power-up")]
    near = [obj for obj in harmful if abs(obj["x"] - view["x"]) <= NEAR_PIXELS]
    ahead = [obj["x"] - view["x"] for obj in harmful if obj["x"] >= view["x"]]
    behind = [obj for obj in harmful if 0 < view["x"] - obj["x"] <= 2 * TILE]
    tiles = view["tiles"]
    col = mario["col"]
    feet = mario["rows"][-1] if mario["rows"] else -1
    block_above = False
    if 0 <= col < COLUMNS and feet >= 0:
        block_above = any(tiles[row][col] in "B?" for row in range(max(feet - 4, 0), feet))
    features: dict[str, int | float | bool] = {
        "x": view["x"],
        "furthest_x": view["furthest_x"],
        "y": view["y"],
        "vx": mario["vx"],
        "vy": mario["vy"],
        "on_ground": mario["on_ground"],
        "big": mario["size"] != "small",
        "coins": view["coins"],
        "time": view["time"],
        "lives": view["lives"],
        "actions_left": view["max_actions"] - view["steps"],
        "enemies_near": len(near),
        "enemy_ahead_tiles": round(min(ahead) / TILE, 2) if ahead else NO_ENEMY_TILES,
        "enemy_behind": bool(behind),
        "block_above": block_above,
        "question_blocks": sum(row.count("?") for row in tiles),
        "flag_visible": any("|" in row for row in tiles),
        "mario_row": feet,
        "mario_col": col,
        "dying": view["dying"],
    }
    features.update(terrain_ahead(view))
    return features
