"""The Candy Crush gymnasium environment (`coplay/CandyCrush-v0`): text observations, string actions.

Rules (issue 3): 8x8 board, 4 colours (R G B Y; `n_colours` 3-6), no special candies, 50 moves. An action
swaps two orthogonally adjacent cells: `swap (r1,c1) (r2,c2)`, 0-indexed, in either order, spaces free,
case ignored. If the swap makes a line of 3+ same-coloured candies in a row or column, every such line
clears, the candies above fall, new candies fill the gaps from the episode's seeded stream, and this
repeats until no line is left (cascades). A swap that makes no line leaves the board as it was and still
costs a move (it is not flagged invalid); a malformed, out-of-board or non-adjacent action also costs
the move and sets `info["invalid_action"]`. When no swap can make a line the board is reshuffled (no
points). Boards at reset have no line and at least one move. Reward = candies cleared (cascades
included); score = total; the episode terminates when the moves are used up (the game's own end).

`info["legal_actions"]` lists the swaps that make a line, in canonical form `swap (r,c) (r,c+1)` /
`swap (r,c) (r+1,c)` (upper or left cell first), in reading order (row by row: a row's horizontal swaps,
then its swaps with the row below); any other adjacent swap is still a valid, wasted move.
`show_clears=True` changes only the text: it lists those swaps by the candies each clears at once (before
cascades), most first (`coplay_envs.candy.text`), and `info["clears"]` gives the counts in the order of
`info["legal_actions"]`. Off by default, so the game's own text and the benchmarks stay as they were.
`clears_order="board"` (with `show_clears`) lists them in reading order instead, each followed by its count:
the most clearing swap is then not simply the first one listed (a policy must read the counts).

Never imports `coplay`.
"""

from __future__ import annotations

import re
from typing import Any

import gymnasium as gym

from coplay_envs.candy.features import board_features
from coplay_envs.candy.rules import (
    CELLS,
    COLOUR_LETTERS,
    COLS,
    MASK64,
    ROWS,
    CandyStream,
    clears_at_once,
    colour_masks,
    generate,
    is_settled,
    matching_swaps,
    resolve,
    settle,
    swap_actions,
    swapped,
)
from coplay_envs.candy.text import CLEARS_ORDERS, render
from coplay_envs.core import normalize_action, text_space

RULES = """Candy Crush on an 8x8 board of 4 candy colours (R G B Y), 50 moves, no special candies.
A move swaps two orthogonally adjacent candies: swap (r1,c1) (r2,c2), rows and columns 0-7, row 0 on top.
If the swap makes a line of 3 or more same-coloured candies in a row or a column, all such lines clear,
the candies above fall down and new random candies drop in from the top; new lines clear too (cascades).
A swap that makes no line changes nothing but still costs a move. A malformed or non-adjacent swap is
invalid and also costs the move. If no swap can make a line, the board is reshuffled (no points).
Reward: 1 point per candy cleared, cascades included. Score: the total after 50 moves."""

OBSERVATION_MAX_CHARS = 4096
_SWAP_PATTERN = re.compile(
    r"^\s*swap\s*\(\s*([0-9]+)\s*,\s*([0-9]+)\s*\)\s*(?:,|and)?\s*\(\s*([0-9]+)\s*,\s*([0-9]+)\s*\)\s*\.?\s*$",
    re.I)


def _exact_actions() -> dict[str, tuple[int, int]]:
    """Canonical and reversed action strings -> (first cell, second cell), first < second."""
    table: dict[str, tuple[int, int]] = {}
    for r in range(ROWS):
        for c in range(COLS):
            for r2, c2 in ((r, c + 1), (r + 1, c)):
                if r2 < ROWS and c2 < COLS:
                    cells = (r * COLS + c, r2 * COLS + c2)
                    table[f"swap ({r},{c}) ({r2},{c2})"] = cells
                    table[f"swap ({r2},{c2}) ({r},{c})"] = cells
    return table


_EXACT = _exact_actions()


def parse_swap(action: str) -> tuple[int, int] | None:
    """(a, b) with a < b for an adjacent in-board swap, else None."""
    cells = _EXACT.get(action)
    if cells is not None:
        return cells
    match = _SWAP_PATTERN.match(action)
    if match is None:
        return None
    r1, c1, r2, c2 = (int(g) for g in match.groups())
    if not (r1 < ROWS and r2 < ROWS and c1 < COLS and c2 < COLS) or abs(r1 - r2) + abs(c1 - c2) != 1:
        return None
    a, b = r1 * COLS + c1, r2 * COLS + c2
    return (a, b) if a < b else (b, a)


class CandyCrushEnv(gym.Env[str, str]):
    """Candy Crush as text. `reset(options={"state": info["state"]})` restores a position exactly."""

    metadata = {"render_modes": ["ansi"], "render_fps": 2}

    def __init__(self, max_moves: int = 50, n_colours: int = 4, render_mode: str | None = None,
                 show_clears: bool = False, clears_order: str = "count") -> None:
        if max_moves < 1:
            raise ValueError(f"max_moves must be >= 1, got {max_moves}")
        if not 3 <= n_colours <= len(COLOUR_LETTERS):
            raise ValueError(f"n_colours must be 3-{len(COLOUR_LETTERS)}, got {n_colours}")
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode {render_mode!r}; expected None or 'ansi'")
        self.max_moves = max_moves
        self.colours = COLOUR_LETTERS[:n_colours]
        self.render_mode = render_mode
        self.show_clears = bool(show_clears)
        if clears_order not in CLEARS_ORDERS:
            raise ValueError(f"clears_order {clears_order!r}; expected one of {CLEARS_ORDERS}")
        self.clears_order = clears_order
        self.observation_space = text_space(OBSERVATION_MAX_CHARS)
        self.action_space = text_space(64)
        self._stream = CandyStream(0, self.colours)
        self._board = ""
        self._score = 0
        self._moves = 0
        self._obs = ""
        self._hmask = self._vmask = 0

    # ----------------------------------------------------------------------------------- gymnasium API
    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        state = (options or {}).get("state")
        if state is not None:
            self._restore(state)
        else:
            self._stream = CandyStream(int(self.np_random.integers(0, 1 << 63)), self.colours)
            self._board = generate(self._stream)
            self._score = 0
            self._moves = 0
        return self._observe(False, 0, False)

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if not self._board:
            raise RuntimeError("CandyCrushEnv.step() before reset(): call reset() first")
        over = self._moves >= self.max_moves
        if over:
            obs, info = self._observe(True, 0, False)
            return obs, 0.0, True, False, info
        self._moves += 1
        cells = parse_swap(normalize_action(action))
        if cells is None:
            obs, info = self._observe(True, 0, False)
            return obs, 0.0, self._moves >= self.max_moves, False, info
        a, b = cells
        line_made = (self._hmask >> a) & 1 if b == a + 1 else (self._vmask >> a) & 1
        cleared = waves = 0
        reshuffled = False
        if line_made:
            stream = self._stream
            board, cleared, waves = resolve(swapped(self._board, a, b), self.colours, stream.next_candy)
            if not is_settled(board, self.colours):
                board = settle(board, stream)
                reshuffled = True
            self._board = board
            self._score += cleared
        obs, info = self._observe(False, waves, reshuffled)
        return obs, float(cleared), self._moves >= self.max_moves, False, info

    def render(self) -> str | None:
        return self._obs if self.render_mode == "ansi" else None

    # ----------------------------------------------------------------------------------- internals
    def _observe(self, invalid: bool, waves: int, reshuffled: bool) -> tuple[str, dict[str, Any]]:
        board = self._board
        masks = colour_masks(board, self.colours)
        hmask, vmask = matching_swaps(masks)
        self._hmask, self._vmask = hmask, vmask
        over = self._moves >= self.max_moves
        legal = [] if over else swap_actions(hmask, vmask)
        clears = self._clears(legal) if self.show_clears else None
        obs = render(board, self.colours, self._score, self._moves, self.max_moves, legal, over, clears,
                     self.clears_order)
        self._obs = obs
        rows = [board[r * COLS:(r + 1) * COLS] for r in range(ROWS)]
        stream = self._stream
        info = {
            "legal_actions": legal,
            "state": {"board": rows, "colours": self.colours, "score": self._score, "moves": self._moves,
                      "max_moves": self.max_moves, "rng_key": stream.key,
                      "candy_counter": stream.candy_counter, "shuffle_counter": stream.shuffle_counter},
            "view": {"board": list(rows), "colours": self.colours, "score": self._score,
                     "moves": self._moves, "max_moves": self.max_moves},
            "features": board_features(masks, hmask, vmask, self._score, self.max_moves - self._moves),
            "score": self._score,
            "invalid_action": invalid,
            "cascades": waves,
            "reshuffled": reshuffled,
        }
        if clears is not None:
            info["clears"] = clears
        return obs, info

    def _clears(self, legal: list[str]) -> list[int]:
        """Candies each legal swap clears at once (the lines it makes; no cascades, no refills)."""
        out = []
        for action in legal:
            a, b = _EXACT[action]
            out.append(clears_at_once(self._board, self.colours, a, b))
        return out

    def _restore(self, state: dict[str, Any]) -> None:
        try:
            board = "".join(state["board"])
            colours = str(state["colours"])
            score, moves, max_moves = int(state["score"]), int(state["moves"]), int(state["max_moves"])
            key, candy_counter = int(state["rng_key"]), int(state["candy_counter"])
            shuffle_counter = int(state["shuffle_counter"])
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"Candy Crush reset: options['state'] is not a Candy Crush state ({err}); "
                             "expected the keys of info['state']") from err
        if not (3 <= len(colours) <= len(COLOUR_LETTERS) and colours == COLOUR_LETTERS[:len(colours)]):
            raise ValueError(f"Candy Crush reset: colours {colours!r}; "
                             f"expected a prefix of {COLOUR_LETTERS!r}")
        if len(board) != CELLS or any(ch not in colours for ch in board):
            raise ValueError(f"Candy Crush reset: board must be {ROWS} rows of {COLS} letters from "
                             f"{colours!r}, got {state['board']!r}")
        if not is_settled(board, colours):
            raise ValueError("Candy Crush reset: the board has a line or no move; a position between moves "
                             f"has neither: {state['board']!r}")
        if not 0 <= key <= MASK64 or min(candy_counter, shuffle_counter, score, moves) < 0 or max_moves < 1:
            raise ValueError(f"Candy Crush reset: out-of-range values in options['state']: {state!r}")
        self.colours, self.max_moves = colours, max_moves
        self._board, self._score, self._moves = board, score, moves
        self._stream = CandyStream(key, colours, candy_counter, shuffle_counter)
