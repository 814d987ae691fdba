"""Candy Crush bots: `ExpertBot` (cascade-seeking greedy), `RandomBot`, and `GreedyClearBot` (the swap
that clears the most candies at once, no cascades: what a player reading `show_clears`'s text can do).

Bots read only `info["view"]` and `info["legal_actions"]`, never `info["state"]` (the refill stream is
hidden from them); each action carries an intention tag and a one-line reason. Never imports `coplay`.
"""

from __future__ import annotations

from typing import Any

from coplay_envs.candy.env import parse_swap
from coplay_envs.candy.rules import clears_at_once, collapse, colour_masks, line_cells, swapped
from coplay_envs.core import BotAction, seed_rng


class ExpertBot:
    """Cascade-seeking greedy: every swap that makes a line is played out on a copy of the board — the
    certain clears and the cascades of the candies already on the board, then `samples` guesses of the
    unseen refills drawn uniformly from the colours with the bot's own RNG, each resolved to the end —
    and the swap with the highest mean number of candies cleared is played (ties: the lower swap, since
    clearing low makes more candies fall)."""

    def __init__(self, seed: int = 0, samples: int = 4) -> None:
        if samples < 1:
            raise ValueError(f"samples must be >= 1, got {samples}")
        self.samples = samples
        self._rng = seed_rng(seed)

    def act(self, observation: str, info: dict[str, Any]) -> BotAction:
        legal = list(info.get("legal_actions") or [])
        if not legal:
            return BotAction("swap (0,0) (0,1)", "EXECUTE", "no swap makes a line; the move is spent anyway")
        view = info["view"]
        board = "".join(view["board"])
        colours: str = view["colours"]
        best, best_value, best_mean, best_certain = legal[0], -1.0, 0.0, 0
        for action in legal:
            cells = parse_swap(action)
            if cells is None:
                continue
            after = swapped(board, *cells)
            first = line_cells(colour_masks(after, colours))
            certain = first.bit_count()
            total = 0
            for _ in range(self.samples):
                total += self._play_out(after, first, colours)
            mean = total / self.samples
            value = mean + cells[1] / 1000.0  # tie-break toward the bottom
            if value > best_value:
                best, best_value, best_mean, best_certain = action, value, mean, certain
        if best_mean > best_certain + 0.5:
            return BotAction(best, "CLEAR",
                             f"clears {best_certain} now and about {best_mean:.0f} with cascades")
        return BotAction(best, "CLEAR", f"clears {best_certain} candies, the best sure clear on the board")

    def _play_out(self, board: str, clear: int, colours: str) -> int:
        """Candies cleared from a board whose first wave `clear` is known, guessing refills."""
        rng = self._rng
        guesses = rng.integers(0, len(colours), size=64 * 4).tolist()
        position = 0

        def guess() -> str:
            nonlocal position
            colour = colours[guesses[position % len(guesses)]]
            position += 1
            return colour

        cleared = 0
        while clear:
            cleared += clear.bit_count()
            board = collapse(board, clear, guess)
            clear = line_cells(colour_masks(board, colours))
        return cleared


class RandomBot:
    """Uniform over `info["legal_actions"]` (the swaps that make a line) with its own seeded RNG."""

    def __init__(self, seed: int = 0) -> None:
        self._rng = seed_rng(seed)

    def act(self, observation: str, info: dict[str, Any]) -> BotAction:
        legal = list(info.get("legal_actions") or [])
        if not legal:
            return BotAction("swap (0,0) (0,1)", "EXPLORE", "no swap makes a line; the move is spent anyway")
        return BotAction(legal[int(self._rng.integers(len(legal)))], "EXPLORE",
                         "a uniformly random swap that makes a line")


class GreedyClearBot:
    """The legal swap whose lines clear the most candies at once (before cascades and refills), ties to the
    lower swap as `ExpertBot` breaks them: the ceiling of a policy that only reads the counts the env's
    `show_clears` text lists, below the expert, which also plays the cascades out."""

    def __init__(self, seed: int = 0) -> None:
        del seed  # deterministic; the argument keeps the registry's `Bot(seed=...)` form

    def act(self, observation: str, info: dict[str, Any]) -> BotAction:
        legal = list(info.get("legal_actions") or [])
        if not legal:
            return BotAction("swap (0,0) (0,1)", "EXECUTE", "no swap makes a line; the move is spent anyway")
        view = info["view"]
        board, colours = "".join(view["board"]), view["colours"]
        best, best_key = legal[0], (-1, -1)
        for action in legal:
            cells = parse_swap(action)
            if cells is None:
                continue
            key = (clears_at_once(board, colours, *cells), cells[1])
            if key > best_key:
                best, best_key = action, key
        return BotAction(best, "CLEAR", f"clears {best_key[0]} candies at once, the most on the board")
