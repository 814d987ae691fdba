"""The 2048 gymnasium environment (`coplay/2048-v0`): text observations, string actions.

Rules (issue 3): 4x4 board, two tiles at reset, each spawn is a 2 (p=0.9) or a 4 (p=0.1) on a uniformly
drawn empty cell; actions `up`, `down`, `left`, `right`; tiles slide as far as they go, equal tiles merge
once per move, the pair nearest the wall moved toward first (`2 2 2 2 -> 4 4`, `2 2 4 -> 4 4`); reward =
sum of the merged tiles' values (Python ints); a move that changes nothing (or any other string) spawns
nothing, scores 0 and sets `info["invalid_action"]`; the episode terminates when no move changes the board
and is truncated after `max_moves` steps (200 by default; every step counts, including flagged ones, so an
episode always ends); score = total reward.

`show_merges=True` changes only the text: each legal move is followed by the points its merges score at once
(`coplay_envs.game2048.text`), and `info["merges"]` holds those points in the order of `legal_actions`.

Never imports `coplay`.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from coplay_envs.core import normalize_action, text_space
from coplay_envs.game2048.features import board_features
from coplay_envs.game2048.rules import (
    MASK64,
    Board,
    RowInfo,
    apply_move,
    board_from_values,
    board_values,
    legal_directions,
    line_infos,
    new_board,
    spawn,
)
from coplay_envs.game2048.text import render

RULES = """2048 on a 4x4 board. Each move slides every tile up, down, left or right as far as it goes.
Two equal tiles that meet merge into one tile of twice the value; a tile merges at most once per move,
and the pair nearest the wall you move toward merges first (2 2 2 2 -> 4 4, 2 2 4 -> 4 4).
After every move that changes the board a new tile appears on a random empty cell: 2 (90%) or 4 (10%).
Reward: the sum of the values of the tiles created by merges. A move that changes nothing scores 0,
spawns nothing and is flagged invalid. The game ends when no move changes the board, or after 200 moves.
Actions: up, down, left, right."""

OBSERVATION_MAX_CHARS = 1024
_DIRECTION_OF = {d: d for d in ("up", "down", "left", "right")}


class Game2048Env(gym.Env[str, str]):
    """2048 as text. `reset(options={"state": info["state"]})` restores a position exactly."""

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, max_moves: int = 200, render_mode: str | None = None,
                 show_merges: bool = False) -> None:
        if max_moves < 1:
            raise ValueError(f"max_moves must be >= 1, got {max_moves}")
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode {render_mode!r}; expected None or 'ansi'")
        self.max_moves = max_moves
        self.render_mode = render_mode
        self.show_merges = bool(show_merges)
        self.observation_space = text_space(OBSERVATION_MAX_CHARS)
        self.action_space = text_space(64)
        self._board: Board = (0,) * 16
        self._score = 0
        self._moves = 0
        self._key = 0
        self._counter = 0
        self._obs = ""  # empty until the first reset
        self._lines: tuple[list[RowInfo], list[RowInfo]] = ([], [])
        self._terminated = self._truncated = self._over = False

    # ----------------------------------------------------------------------------------- gymnasium API
    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        state = (options or {}).get("state")
        if state is not None:
            self._restore(state)
        else:
            self._key = int(self.np_random.integers(0, 1 << 63))
            self._board, self._counter = new_board(self._key)
            self._score = 0
            self._moves = 0
        return self._observe(False)

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if not self._obs:
            raise RuntimeError("Game2048Env.step() before reset(): call reset() first")
        direction = _DIRECTION_OF.get(normalize_action(action).strip().lower())
        rows, cols = self._lines
        if self._over:
            obs, info = self._observe(True, rows, cols)
            return obs, 0.0, self._terminated, self._truncated, info
        self._moves += 1
        reward = 0
        invalid = True
        if direction is not None:
            board, reward = apply_move(self._board, direction, rows, cols)
            if board is not self._board:
                invalid = False
                self._board = spawn(board, self._key, self._counter)
                self._counter += 1
                self._score += reward
        obs, info = self._observe(invalid, None if not invalid else rows, cols)
        return obs, float(reward), self._terminated, self._truncated, info

    def render(self) -> str | None:
        return self._obs if self.render_mode == "ansi" else None

    # ----------------------------------------------------------------------------------- internals
    def _observe(self, invalid: bool, rows: Any = None, cols: Any = None) -> tuple[str, dict[str, Any]]:
        board = self._board
        if rows is None:
            rows, cols = line_infos(board)
        self._lines = (rows, cols)
        movable = legal_directions(rows, cols)
        self._terminated = not movable
        self._truncated = not self._terminated and self._moves >= self.max_moves
        self._over = self._terminated or self._truncated
        legal = [] if self._over else movable
        moves_left = self.max_moves - self._moves
        points = [apply_move(board, d, rows, cols)[1] for d in legal] if self.show_merges else None
        obs = render(board, self._score, self._moves, self.max_moves, legal, self._terminated,
                     self._truncated, points)
        self._obs = obs
        values = board_values(board)
        info = {
            "legal_actions": legal,
            "state": {"board": values, "score": self._score, "moves": self._moves,
                      "max_moves": self.max_moves, "rng_key": self._key, "rng_counter": self._counter},
            "view": {"board": [list(r) for r in values], "score": self._score, "moves": self._moves,
                     "max_moves": self.max_moves},
            "features": board_features(board, rows, cols, len(legal), self._score, moves_left),
            "score": self._score,
            "invalid_action": invalid,
        }
        if points is not None:
            info["merges"] = points
        return obs, info

    def _restore(self, state: dict[str, Any]) -> None:
        try:
            board = board_from_values(state["board"])
            score, moves = int(state["score"]), int(state["moves"])
            max_moves, key, counter = (int(state["max_moves"]), int(state["rng_key"]),
                                       int(state["rng_counter"]))
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"2048 reset: options['state'] is not a 2048 state ({err}); expected the keys "
                             "board, score, moves, max_moves, rng_key, rng_counter of info['state']") from err
        if not 0 <= key <= MASK64 or counter < 0 or moves < 0 or score < 0 or max_moves < 1:
            raise ValueError(f"2048 reset: out-of-range values in options['state']: {state!r}")
        self._board, self._score, self._moves = board, score, moves
        self.max_moves, self._key, self._counter = max_moves, key, counter
