"""`coplay.eval.stats.gain_verdict`: the words a summary uses for a paired change."""

from __future__ import annotations

from coplay.eval.stats import gain_verdict, paired_difference


def test_a_gain_is_claimed_only_when_the_whole_interval_is_on_the_better_side():
    up = paired_difference({"a": 1.0, "b": 2.0, "c": 3.0}, {"a": 3.0, "b": 4.5, "c": 5.0})
    flat = paired_difference({"a": 1.0, "b": 2.0, "c": 3.0}, {"a": 2.0, "b": 1.0, "c": 3.5})
    assert gain_verdict(up).startswith("a gain was measured")
    assert gain_verdict(up, higher_is_better=False).startswith("a loss was measured")  # e.g. regret rose
    assert gain_verdict(flat).startswith("no gain was measured")
