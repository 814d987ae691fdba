"""Rewards of skill-guided self-play (docs/curriculum.md).

The proposer's reward is a gated mid-difficulty score, R = 1{valid} x (1 - 2|p - 0.5|), p the solver's
success rate over its K attempts: an invalid task earns 0, a task the solver always or never solves earns 0,
one it solves half the time earns 1. The solver's reward is whether its attempt satisfied the hidden
contract, plus the attempt's game reward scaled by `curriculum.game_reward_scale`.
"""

from __future__ import annotations

from collections.abc import Sequence


def success_rate(outcomes: Sequence[bool]) -> float:
    """p: the share of the K attempts that satisfied the contract (0 for no attempts)."""
    return sum(bool(o) for o in outcomes) / len(outcomes) if outcomes else 0.0


def proposer_reward(valid: bool, p: float) -> float:
    """R = 1{valid} x (1 - 2|p - 0.5|)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"solver success rate p={p} is not in [0, 1]")
    return (1.0 - 2.0 * abs(p - 0.5)) if valid else 0.0


def solver_reward(satisfied: bool, game_reward: float = 0.0, scale: float = 0.0) -> float:
    """1 when the attempt satisfied the contract within the bound, else 0; plus `scale` x the game reward."""
    return float(bool(satisfied)) + scale * float(game_reward)
