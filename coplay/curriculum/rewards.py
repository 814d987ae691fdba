"""Rewards of skill-guided self-play (docs/curriculum.md).

The proposer's reward is a gated mid-difficulty score, R = 1{valid} x (1 - 2|p - 0.5|), p the solver's
success rate over its K attempts: an invalid task earns 0, a task the solver always or never solves earns 0,
one it solves half the time earns 1; with `curriculum.gate_credit` an invalid task also earns credit for the
gate checks it passed (`proposer_reward`). The solver's reward is whether its attempt satisfied the hidden
contract, plus the attempt's game reward scaled by `curriculum.game_reward_scale`.
"""

from __future__ import annotations

from collections.abc import Sequence


def success_rate(outcomes: Sequence[bool]) -> float:
    """p: the share of the K attempts that satisfied the contract (0 for no attempts)."""
    return sum(bool(o) for o in outcomes) / len(outcomes) if outcomes else 0.0


def proposer_reward(valid: bool, p: float, passed: float = 0.0, gate_credit: float = 0.0) -> float:
    """R = 1{valid} x (1 - 2|p - 0.5|) with `gate_credit` c = 0 (the paper's). With c > 0 the gate's checks
    are part of the reward: a valid task earns c + (1 - c)(1 - 2|p - 0.5|), an invalid one c x `passed`, the
    share of the gate's checks it passed before the one that refused it (`gate.passed_share`). A group of
    tasks that all fail then still differs by how far each got, which the paper's reward, 0 for all of them,
    cannot tell apart; and every valid task outranks every invalid one."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"solver success rate p={p} is not in [0, 1]")
    if not 0.0 <= passed <= 1.0 or not 0.0 <= gate_credit < 1.0:
        raise ValueError(f"passed={passed} must be in [0, 1] and gate_credit={gate_credit} in [0, 1)")
    if valid:
        return gate_credit + (1.0 - gate_credit) * (1.0 - 2.0 * abs(p - 0.5))
    return gate_credit * min(passed, 1.0 - 1e-9)


def solver_reward(satisfied: bool, game_reward: float = 0.0, scale: float = 0.0) -> float:
    """1 when the attempt satisfied the contract within the bound, else 0; plus `scale` x the game reward."""
    return float(bool(satisfied)) + scale * float(game_reward)
