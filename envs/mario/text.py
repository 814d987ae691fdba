"""The Mario observation text: the status bar, the visible screen as a grid of tile and object symbols
(decoded from RAM by `ram.py`), the enemies in words, and what the player must do now. Also the parser
that reads the grid back (used by the faithfulness tests).

Never imports `coplay`.
"""

from __future__ import annotations

from coplay_envs.mario.ram import COLUMNS, MARIO, OBJECT_LEGEND, ROWS, TILE, TILE_LEGEND

_LEGEND_LINE = "Legend: " + ", ".join(
    f"{symbol} {name}" for symbol, name in list(OBJECT_LEGEND.items()) + list(TILE_LEGEND.items())
)
_GRID_PREFIX = "r"


def grid_rows(view: dict) -> list[str]:
    """The tile rows with objects and then Mario drawn on top (Mario wins a shared cell)."""
    cells = [list(row) for row in view["tiles"]]
    for obj in view["objects"]:
        cells[obj["row"]][obj["col"]] = obj["symbol"]
    mario = view["mario"]
    if 0 <= mario["col"] < COLUMNS:
        for row in mario["rows"]:
            cells[row][mario["col"]] = MARIO
    return ["".join(row) for row in cells]


def _describe_objects(view: dict) -> str:
    if not view["objects"]:
        return "Objects on screen: none"
    mario = view["mario"]
    mario_row = mario["rows"][-1] if mario["rows"] else None
    parts = []
    for obj in sorted(view["objects"], key=lambda o: o["x"]):
        tiles_ahead = (obj["x"] - view["x"]) / TILE
        where = f"{abs(tiles_ahead):.1f} tiles {'ahead' if tiles_ahead >= 0 else 'behind'}"
        if mario_row is not None:
            rise = mario_row - obj["row"]
            where += (", same height" if rise == 0
                      else f", {abs(rise)} rows {'higher' if rise > 0 else 'lower'}")
        parts.append(f"{obj['kind']} at x={obj['x']} ({where})")
    return "Objects on screen: " + "; ".join(parts)


def render(view: dict, legal_actions: list[str], frames_per_action: int) -> str:
    """The whole observation: everything on the screen a player sees, never a summary."""
    mario = view["mario"]
    lines = [
        f"Super Mario Bros. world {view['world']}-{view['stage']}"
        f" | action {view['steps']}/{view['max_actions']}"
        f" | x={view['x']} y={view['y']} furthest x={view['furthest_x']}",
        f"coins {view['coins']} | time {view['time']} | lives {view['lives']} | {mario['size']} Mario"
        f" | {'on the ground' if mario['on_ground'] else 'in the air'}"
        f" | speed x={mario['vx']} y={mario['vy']}"
        f" | last action {view['last_action']}",
        f"Screen: {ROWS} rows x {COLUMNS} columns of 16-px tiles, level columns {view['first_column']}"
        f"..{view['first_column'] + COLUMNS - 1} (left edge x={view['screen_x']}); row 12 is the bottom,"
        " a column with no ground at the bottom is a pit.",
    ]
    if not mario["visible"]:
        lines.append("Mario is above the top of the screen." if view["y"] > 255
                     else "Mario fell off the screen.")
    for index, row in enumerate(grid_rows(view)):
        lines.append(f"{_GRID_PREFIX}{index:02d} {row}")
    lines.append(_describe_objects(view))
    lines.append(_LEGEND_LINE)
    lines.append(
        f"Choose one action (held for {frames_per_action} frames; A jumps, B runs): "
        + ", ".join(legal_actions)
    )
    return "\n".join(lines)


def parse_grid(observation: str) -> list[str]:
    """The grid rows of a rendered observation, in order (what `grid_rows` produced)."""
    rows = []
    for line in observation.splitlines():
        head, _, body = line.partition(" ")
        if len(head) == 3 and head.startswith(_GRID_PREFIX) and head[1:].isdigit() and len(body) == COLUMNS:
            rows.append(body)
    return rows
