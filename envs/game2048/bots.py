"""2048 bots: `ExpertBot` (depth-limited expectimax over the row heuristic), `RandomBot`, and
`FixedOrderBot` (the first legal of left, down, right, up: a cheap fixed heuristic that coplay's evaluation
ruler plays beside the other two; the registry's `expert` / `random` contract is unchanged).

Bots read only `info["view"]` and `info["legal_actions"]`, never `info["state"]`; each action carries an
intention tag and a one-line reason (teacher data for the `act` format). Never imports `coplay`.
"""

from __future__ import annotations

from typing import Any

from coplay_envs.core import BotAction, seed_rng
from coplay_envs.game2048.rules import (
    DIRECTIONS,
    Board,
    apply_move,
    board_from_values,
    legal_directions,
    line_infos,
)


def _heuristic(board: Board) -> float:
    rows, cols = line_infos(board)
    return (rows[0].heuristic + rows[1].heuristic + rows[2].heuristic + rows[3].heuristic
            + cols[0].heuristic + cols[1].heuristic + cols[2].heuristic + cols[3].heuristic)


class ExpertBot:
    """Expectimax over `depth` moves of its own (default 2) with a chance node between them (a 2 with
    p=0.9 or a 4 with p=0.1 on every empty cell; with more than 6 empty cells only 2s, which keeps a
    decision near a millisecond); positions after the last move are scored by the row heuristic (empty
    cells, merges, monotonicity, tile sizes, summed over rows and columns)."""

    def __init__(self, seed: int = 0, depth: int = 2) -> None:
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        self.depth = depth
        self._rng = seed_rng(seed)

    def act(self, observation: str, info: dict[str, Any]) -> BotAction:
        legal = list(info.get("legal_actions") or [])
        if not legal:
            return BotAction("up", "SURVIVE", "no move changes the board; any move is as good")
        board = board_from_values(info["view"]["board"])
        best, best_value, best_reward = legal[0], float("-inf"), 0
        rows, cols = line_infos(board)
        for direction in legal:
            after, reward = apply_move(board, direction, rows, cols)
            if after is board:
                continue
            value = _heuristic(after) if self.depth == 1 else self._chance(after, self.depth - 1)
            if value > best_value:
                best, best_value, best_reward = direction, value, reward
        return BotAction(best, *_explain(board, best, best_reward))

    def _chance(self, board: Board, depth: int) -> float:
        empties = [i for i in range(16) if board[i] == 0]
        if not empties:
            return self._max(board, depth)
        spawn_fours = len(empties) <= 6
        total = 0.0
        for cell in empties:
            head, tail = board[:cell], board[cell + 1:]
            total += (0.9 if spawn_fours else 1.0) * self._max(head + (1,) + tail, depth)
            if spawn_fours:
                total += 0.1 * self._max(head + (2,) + tail, depth)
        return total / len(empties)

    def _max(self, board: Board, depth: int) -> float:
        rows, cols = line_infos(board)
        best = 0.0  # a lost board scores below any live one (the heuristic is positive)
        for direction in legal_directions(rows, cols):
            after, _ = apply_move(board, direction, rows, cols)
            value = _heuristic(after) if depth == 1 else self._chance(after, depth - 1)
            if value > best:
                best = value
        return best


def _explain(board: Board, direction: str, reward: int) -> tuple[str, str]:
    top = max(board)
    corners = (board[0], board[3], board[12], board[15])
    if reward:
        return "MERGE", f"{direction} merges tiles for {reward} points and keeps the board open"
    if top in corners:
        return "POSITION", f"{direction} keeps the {1 << top} tile in its corner with rows monotone"
    return "SETUP", f"{direction} lines tiles up for the next merges"


class RandomBot:
    """Uniform over `info["legal_actions"]` with its own seeded RNG."""

    def __init__(self, seed: int = 0) -> None:
        self._rng = seed_rng(seed)

    def act(self, observation: str, info: dict[str, Any]) -> BotAction:
        legal = list(info.get("legal_actions") or [])
        if not legal:
            return BotAction(DIRECTIONS[0], "EXPLORE", "no legal move is left; any move is as good")
        return BotAction(legal[int(self._rng.integers(len(legal)))], "EXPLORE",
                         "a uniformly random legal move")


class FixedOrderBot:
    """The first legal move of a fixed order (default left, down, right, up): the corner-hugging habit a
    human learns in minutes. It costs nothing to play and, unlike `RandomBot`, keeps big tiles together, so
    it shows whether an evaluation horizon rewards any strategy at all. `seed` is accepted (and unused) so it
    is constructed like the other bots."""

    ORDER = ("left", "down", "right", "up")

    def __init__(self, seed: int = 0, order: tuple[str, ...] = ORDER) -> None:
        unknown = [d for d in order if d not in DIRECTIONS]
        if unknown or not order:
            raise ValueError(f"FixedOrderBot order {order!r}: expected directions from {DIRECTIONS}")
        self.order = tuple(order)

    def act(self, observation: str, info: dict[str, Any]) -> BotAction:
        legal = set(info.get("legal_actions") or [])
        move = next((d for d in self.order if d in legal), self.order[0])
        return BotAction(move, "POSITION", f"{move}: the first legal move of {', '.join(self.order)}")
