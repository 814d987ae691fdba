"""The schedule of docs/architecture.md as a table a user can check by hand."""

from __future__ import annotations

import pytest

from coplay.driver.schedule import VersionLedger, bank_version_for, policy_step_for


def test_synchronous_schedule_uses_the_previous_step():
    assert [policy_step_for(k, 0) for k in range(1, 6)] == [0, 1, 2, 3, 4]


def test_staleness_one_lags_by_one_more_step():
    assert [policy_step_for(k, 1) for k in range(1, 6)] == [0, 0, 1, 2, 3]
    assert [policy_step_for(k, 2) for k in range(1, 6)] == [0, 0, 0, 1, 2]


def test_bank_comes_from_iterations_up_to_k_minus_2():
    assert [bank_version_for(k) for k in range(1, 6)] == [0, 0, 1, 2, 3]


def test_bad_iterations_are_rejected():
    with pytest.raises(ValueError):
        policy_step_for(0, 1)
    with pytest.raises(ValueError):
        bank_version_for(0)


def test_ledger_keeps_untouched_adapters_at_their_version():
    ledger = VersionLedger.start(("act", "curator"))
    assert ledger.record(1, {"act": 1}) == {"act": 1, "curator": 0}
    assert ledger.record(2, {"curator": 1}) == {"act": 1, "curator": 1}
    assert ledger.at(1) == {"act": 1, "curator": 0}
    with pytest.raises(ValueError, match="consecutive"):
        ledger.record(4, {"act": 2})
    with pytest.raises(ValueError, match="advance"):
        ledger.record(3, {"act": 1})
