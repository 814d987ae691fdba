"""`TetrisEnv`: Tetris as a gymnasium text environment (``coplay/Tetris-v0``), and its ``RULES`` text.

One step places the current piece: ``place <piece> rot <0-3> col <c>`` (case and spacing free; quotes,
backticks and a final period around it are ignored). A rotation
index that gives the same cells as a lower one (O: 1-3; I, S, Z: 2-3) is accepted as that placement. An
action that does not parse, names another piece, or is not a legal placement loses the move: the current
piece is dropped at its spawn placement (rotation 0, spawn column: 4 for O, 3 for the others) when that is
legal, else at the first legal placement in ``info["legal_actions"]``; the placement counts and scores as
usual and ``info["invalid_action"]`` is True. Steps after the game has ended change nothing, score 0 and
are flagged invalid.

Info on every reset/step: ``legal_actions``, ``state`` (full position incl. the bag seed: infrastructure
only), ``view`` (the position as the player sees it), ``features`` (see `features.py`), ``score``,
``invalid_action``, ``played`` (the canonical placement actually applied, None at reset) and ``lines``
(lines cleared by this step).

Never imports `coplay`.
"""

from __future__ import annotations

import re
from typing import Any

import gymnasium

from coplay_envs.core import normalize_action, text_space
from coplay_envs.tetris.features import compute_features, holes
from coplay_envs.tetris.pieces import PIECE_NAMES, SPAWN_COLUMN, canonical_rotation
from coplay_envs.tetris.rules import (
    DEFAULT_MAX_PLACEMENTS,
    POINTS_PER_LINE,
    POINTS_PER_PIECE,
    WIDTH,
    TetrisGame,
    board_to_text_rows,
)
from coplay_envs.tetris.text import render_observation

RULES: str = (
    "Tetris on a board 10 wide (columns 0-9) and 20 tall. Pieces I O T S Z J L come in shuffled bags of 7;\n"
    "you see the current piece and the next 4. Each turn you place the current piece with\n"
    "`place <piece> rot <r> col <c>`: rotation r (0-3, as drawn in the observation) with its left edge in\n"
    "column c; it falls straight down until it rests on the stack or the floor. A completely filled row\n"
    "clears and everything above it moves down. Reward per piece: 1 + 10 x lines it clears.\n"
    "The game ends when a new piece cannot enter the top of the board, or after 200 placements (default).\n"
    "An illegal or unreadable action loses the move: the piece drops where it appeared (rotation 0).\n"
    "Keep the stack low and flat and avoid holes (empty cells under filled ones)."
)

OBSERVATION_MAX_CHARS: int = 4096
ACTION_MAX_CHARS: int = 64

_ACTION_PATTERN = re.compile(r"place\s+([a-z])\s+rot\s+(\d{1,4})\s+col\s+(\d{1,4})", re.IGNORECASE)
_WRAPPING = " \t\r\n`'\"."

#: ACTION_TEXT[piece][rotation][col]: the canonical action string.
ACTION_TEXT: dict[str, list[list[str]]] = {
    piece: [[f"place {piece} rot {r} col {c}" for c in range(WIDTH)] for r in range(4)]
    for piece in PIECE_NAMES
}


def parse_placement(action: str, piece: str) -> tuple[int, int] | None:
    """``(canonical rotation, col)`` of a `place` action for ``piece``, or None when it does not parse,
    names another piece, or gives a rotation outside 0-3 (legality on the board is checked by the caller).
    Case and spacing are free; surrounding quotes, backticks and a final period are ignored."""
    match = _ACTION_PATTERN.fullmatch(action.strip(_WRAPPING))
    if match is None or match.group(1).upper() != piece:
        return None
    rotation, col = int(match.group(2)), int(match.group(3))
    if not 0 <= rotation <= 3 or not 0 <= col < WIDTH:
        return None
    return canonical_rotation(piece, rotation), col


class TetrisEnv(gymnasium.Env[str, str]):
    """Tetris, one placement per step, text observations and actions (docs/game-contract.md)."""

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 4}

    def __init__(self, max_placements: int = DEFAULT_MAX_PLACEMENTS, render_mode: str | None = None) -> None:
        if max_placements < 1:
            raise ValueError(f"TetrisEnv max_placements={max_placements}; expected >= 1")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"TetrisEnv render_mode={render_mode!r}; expected one of "
                             f"{self.metadata['render_modes']} or None")
        self.max_placements = max_placements
        self.render_mode = render_mode
        self.observation_space = text_space(OBSERVATION_MAX_CHARS)
        self.action_space = text_space(ACTION_MAX_CHARS)
        self._game = TetrisGame.new(0)  # replaced by reset; makes a step before any reset well defined
        self._legal: list[tuple[int, int]] = self._game.legal()
        self._observation = ""

    # -- gymnasium API -------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        if options and "state" in options:
            self._game = TetrisGame.from_state(options["state"])
        else:
            bag_seed = seed if seed is not None else int(self.np_random.integers(2**31))
            self._game = TetrisGame.new(bag_seed)
        self._legal = [] if self._ended() else self._game.legal()
        return self._observe(invalid=False, played=None, lines=0)

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict]:
        text = normalize_action(action)
        game = self._game
        if self._ended():
            obs, info = self._observe(invalid=True, played=None, lines=0)
            return obs, 0.0, game.game_over, self._truncated(), info
        placement = parse_placement(text, game.current)
        invalid = placement is None or placement not in self._legal
        if invalid:
            spawn = (0, SPAWN_COLUMN[game.current])
            placement = spawn if spawn in self._legal else self._legal[0]
        played = ACTION_TEXT[game.current][placement[0]][placement[1]]
        drop = game.play(*placement)
        reward = float(POINTS_PER_PIECE + POINTS_PER_LINE * drop.lines)
        self._legal = [] if self._ended() else game.legal()
        obs, info = self._observe(invalid=invalid, played=played, lines=drop.lines)
        if self.render_mode == "human":
            print(obs)
        return obs, reward, game.game_over, self._truncated(), info

    def render(self) -> str | None:
        """The current observation text (``ansi``), or print it (``human``)."""
        if self.render_mode == "ansi":
            return self._observation
        if self.render_mode == "human":
            print(self._observation)
        return None

    # -- internals -----------------------------------------------------------------------------------------
    def _truncated(self) -> bool:
        return not self._game.game_over and self._game.placements >= self.max_placements

    def _ended(self) -> bool:
        return self._game.game_over or self._game.placements >= self.max_placements

    def _observe(self, invalid: bool, played: str | None, lines: int) -> tuple[str, dict]:
        game = self._game
        board = board_to_text_rows(game.rows)
        heights = list(game.heights)
        view: dict[str, Any] = {
            "board": board,
            "current": game.current,
            "preview": game.preview,
            "placements": game.placements,
            "max_placements": self.max_placements,
            "placements_left": max(0, self.max_placements - game.placements),
            "lines": game.lines,
            "last_lines": game.last_lines,
            "score": game.score,
            "game_over": game.game_over,
            "column_heights": heights,
            "holes": holes(game.rows, game.heights),
        }
        self._observation = render_observation(view, self._legal, truncated=self._truncated())
        actions = [ACTION_TEXT[game.current][r][c] for r, c in self._legal]
        state = game.to_state()
        info = {
            "legal_actions": actions,
            "state": state,
            "view": view,
            "features": compute_features(view, rows=game.rows, heights=game.heights),
            "score": game.score,
            "invalid_action": invalid,
            "played": played,
            "lines": lines,
        }
        return self._observation, info

