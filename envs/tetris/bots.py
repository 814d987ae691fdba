"""Tetris bots: `ExpertBot` (a one-piece placement search with Dellacherie's evaluation) and `RandomBot`.

Bots read only ``info["view"]`` and ``info["legal_actions"]`` (never ``info["state"]``), and tag every
action with an intention and a one-line reason (docs/game-contract.md). Never imports `coplay` or gymnasium.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from coplay_envs.core import BotAction, seed_rng
from coplay_envs.tetris.features import (
    column_transitions,
    cumulative_wells,
    holes,
    row_transitions,
)
from coplay_envs.tetris.pieces import ROTATIONS
from coplay_envs.tetris.rules import board_from_text_rows, column_heights, drop_piece

#: Pierre Dellacherie's hand-tuned weights (as reported by Fahey and by Thiery & Scherrer, 2009).
DELLACHERIE_WEIGHTS: dict[str, float] = {
    "landing_height": -1.0,
    "eroded_cells": 1.0,
    "row_transitions": -1.0,
    "column_transitions": -1.0,
    "holes": -4.0,
    "wells": -1.0,
}
HIGH_STACK: int = 12


@dataclass(frozen=True)
class PlacementEvaluation:
    """One candidate placement with the board terms of its evaluation."""

    action: str
    value: float
    lines: int
    holes: int
    max_height: int
    landing_row: int


def _parse_action(action: str) -> tuple[str, int, int]:
    _, piece, _, rotation, _, col = action.split()
    return piece, int(rotation), int(col)


def evaluate_placements(board: list[str], legal_actions: list[str],
                        weights: dict[str, float] | None = None) -> list[PlacementEvaluation]:
    """Evaluate every legal action on the board (text rows, top first) with Dellacherie's features."""
    weights = weights or DELLACHERIE_WEIGHTS
    rows = board_from_text_rows(board)
    heights = column_heights(rows)
    evaluations: list[PlacementEvaluation] = []
    for action in legal_actions:
        piece, rotation_index, col = _parse_action(action)
        rot = ROTATIONS[piece][rotation_index]
        drop = drop_piece(rows, heights, rot, col)
        hole_count = holes(drop.rows, drop.heights)
        value = (
            weights["landing_height"] * (drop.base_row + (rot.height - 1) / 2)
            + weights["eroded_cells"] * drop.lines * drop.eroded_cells
            + weights["row_transitions"] * row_transitions(drop.rows)
            + weights["column_transitions"] * column_transitions(drop.rows)
            + weights["holes"] * hole_count
            + weights["wells"] * cumulative_wells(drop.rows)
        )
        evaluations.append(
            PlacementEvaluation(action, value, drop.lines, hole_count, max(drop.heights), drop.base_row)
        )
    return evaluations


class ExpertBot:
    """Places each piece where Dellacherie's evaluation of the resulting board is highest (first on ties)."""

    def __init__(self, seed: int = 0, weights: dict[str, float] | None = None) -> None:
        self.seed = seed
        self.weights = dict(weights or DELLACHERIE_WEIGHTS)

    def act(self, observation: str, info: dict[str, Any]) -> BotAction:
        legal: list[str] = info["legal_actions"]
        if not legal:
            return BotAction("", "SURVIVE", "no legal placement: the game is over")
        evaluations = evaluate_placements(info["view"]["board"], legal, self.weights)
        best = max(evaluations, key=lambda e: e.value)
        if best.lines:
            intention = "CLEAR"
            what = f"clears {best.lines} line{'s' if best.lines > 1 else ''}"
        elif best.max_height >= HIGH_STACK:
            intention = "SURVIVE"
            what = "keeps the high stack as low and solid as it can"
        else:
            intention = "BUILD"
            what = "builds a flat, solid stack"
        reason = (f"{what}; lands on row {best.landing_row + 1}, leaves {best.holes} holes, "
                  f"max height {best.max_height}")
        return BotAction(best.action, intention, reason)


class RandomBot:
    """Picks uniformly among the legal placements with its own seeded generator."""

    def __init__(self, seed: int = 0) -> None:
        self._rng = seed_rng(seed)

    def act(self, observation: str, info: dict[str, Any]) -> BotAction:
        legal: list[str] = info["legal_actions"]
        if not legal:
            return BotAction("", "EXPLORE", "no legal placement: the game is over")
        action = legal[int(self._rng.integers(len(legal)))]
        return BotAction(action, "EXPLORE", f"uniform random choice among {len(legal)} legal placements")


def play_episode(env: Any, bot: Any, seed: int) -> tuple[float, int]:
    """Play one episode of ``env`` from ``reset(seed=seed)`` with ``bot``; return (score, placements)."""
    observation, info = env.reset(seed=seed)
    total = 0.0
    steps = 0
    while True:
        decision = bot.act(observation, info)
        observation, reward, terminated, truncated, info = env.step(decision.action)
        total += reward
        steps += 1
        if terminated or truncated:
            return total, steps
