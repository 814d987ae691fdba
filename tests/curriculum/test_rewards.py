"""The proposer's gated mid-difficulty reward and the solver's reward, by hand."""

from __future__ import annotations

import pytest

from coplay.curriculum.rewards import proposer_reward, solver_reward, success_rate


@pytest.mark.parametrize(("outcomes", "expected"), [
    ([False] * 4, 0.0),
    ([True, False, False, False], 0.5),
    ([True, True, False, False], 1.0),
    ([True] * 4, 0.0),
])
def test_proposer_reward_by_hand(outcomes: list[bool], expected: float) -> None:
    assert proposer_reward(True, success_rate(outcomes)) == pytest.approx(expected)


def test_invalid_tasks_earn_nothing_at_any_p() -> None:
    assert all(proposer_reward(False, p) == 0.0 for p in (0.0, 0.25, 0.5, 1.0))


def test_p_outside_unit_interval_is_an_error() -> None:
    with pytest.raises(ValueError, match="not in"):
        proposer_reward(True, 1.5)


def test_solver_reward_is_the_contract_plus_the_scaled_game_reward() -> None:
    assert solver_reward(True) == 1.0
    assert solver_reward(False, game_reward=8.0) == 0.0
    assert solver_reward(True, game_reward=8.0, scale=0.01) == pytest.approx(1.08)
    assert success_rate([]) == 0.0



def test_with_gate_credit_tasks_rank_by_how_far_they_got_and_every_valid_one_outranks_the_invalid() -> None:
    """c = 0.2: an invalid task earns 0.2 x the share of gate checks it passed (in the gate's order), so a
    group whose tasks all fail still has reward variance; a valid task earns at least 0.2."""
    from coplay.curriculum.gate import REASONS, passed_share

    invalid = [proposer_reward(False, 0.0, passed_share(reason), 0.2) for reason in REASONS]
    assert invalid == sorted(invalid) and invalid[0] == 0.0 and len(set(invalid)) == len(REASONS)
    assert max(invalid) < proposer_reward(True, 0.0, 1.0, 0.2) == pytest.approx(0.2)
    assert proposer_reward(True, 0.5, 1.0, 0.2) == pytest.approx(1.0)
    assert proposer_reward(True, 0.25, 1.0, 0.2) == pytest.approx(0.2 + 0.8 * 0.5)
    assert passed_share("off_scale") == REASONS.index("off_scale") / len(REASONS)
    assert passed_share(None) == 1.0
