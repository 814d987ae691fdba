"""Routing follows the statistics: skills whose solver success is near 0.5 are drawn most, saturated ones
never, untried ones as if p = 0.5; draws are seeded."""

from __future__ import annotations

from collections import Counter

import pytest

from coplay.curriculum.routing import Router
from coplay.skills.tasking import TaskUsage

USAGE = {
    "s1": TaskUsage(proposed=10, valid=10, attempts=40, successes=20),  # p = 0.5
    "s2": TaskUsage(proposed=10, valid=10, attempts=40, successes=0),  # never solved
    "s3": TaskUsage(proposed=10, valid=10, attempts=40, successes=39),  # nearly always: saturated
    "s4": TaskUsage(),  # never tried
}


def draws(router: Router, n: int = 2000) -> Counter[str | None]:
    return Counter(router.pick(USAGE, n))


def test_statistics_routing_prefers_mid_difficulty_and_skips_saturated() -> None:
    counts = draws(Router("statistics", exploration_share=0.0, retire_success=0.95, retire_after=8))
    assert counts["s3"] == 0 and counts[None] == 0
    assert counts["s1"] > 5 * counts["s2"]
    assert counts["s4"] > 5 * counts["s2"]


def test_uniform_routing_ignores_the_statistics() -> None:
    counts = draws(Router("uniform", exploration_share=0.0))
    assert set(counts) == {"s1", "s2", "s4"}
    assert max(counts.values()) < 1.2 * min(counts.values())


def test_exploration_share_goes_to_the_stream() -> None:
    counts = draws(Router(exploration_share=0.3))
    assert 0.25 < counts[None] / 2000 < 0.35


def test_no_routable_skill_means_exploration() -> None:
    assert Router(exploration_share=0.0).pick({"s3": USAGE["s3"]}, 3) == [None, None, None]


def test_draws_are_seeded_per_iteration() -> None:
    router = Router(seed=7)
    assert router.pick(USAGE, 20, iteration=2) == Router(seed=7).pick(USAGE, 20, iteration=2)
    assert router.pick(USAGE, 20, iteration=2) != router.pick(USAGE, 20, iteration=3)


def test_bad_mode_is_an_error() -> None:
    with pytest.raises(ValueError, match="routing mode"):
        Router("greedy")
