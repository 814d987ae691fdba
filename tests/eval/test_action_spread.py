"""How a policy's choices spread over the actions beside the expert bot's (`coplay.eval.action_spread`): the
probe's scoring counts each answer as the legal action it amounts to, and the collapse warning fires only
when one action takes more than half of the policy's choices while the expert chose it on at most half."""

from __future__ import annotations

import pytest

from coplay.eval.action_spread import (
    action_counts,
    brief_spread,
    collapse_warning,
    compare_spread,
    spread_text,
)
from coplay.eval.probe import build_probe, score_actions


def test_the_probe_counts_each_answer_as_the_legal_move_it_makes():
    probe = build_probe("2048", n=6, horizon=3, rollouts=2)
    answers = ["UP" if "up" in p.legal_actions else p.legal_actions[0] for p in probe.positions]
    answers[0] = "no such move"
    scored = score_actions(probe, answers)
    assert sum(scored["actions"].values()) == 5  # the unusable answer is counted by invalid_share instead
    assert scored["invalid_share"] == pytest.approx(1 / 6)
    assert all(a in ("up", "down", "left", "right") for a in scored["actions"])  # "UP" counts as "up"
    assert action_counts(["left", None, "down", "left"]) == {"left": 2, "down": 1}


def test_one_action_on_most_positions_where_the_expert_spreads_is_a_collapse():
    """The issue's cold start: `left` on 44 of 64 positions, the expert's choices spread over four moves."""
    expert = {"down": 20, "left": 18, "right": 14, "up": 12}
    spread = compare_spread({"left": 44, "down": 10, "up": 6}, expert, 64)
    assert spread["model_top"] == "left" and spread["model_top_share"] == pytest.approx(44 / 64)
    assert spread["expert_share_of_model_top"] == pytest.approx(18 / 64)
    assert spread["expert_top"] == "down" and spread["collapsed"]
    assert spread["actions"][0] == {"action": "left", "model": 44, "model_share": 44 / 64, "expert": 18,
                                    "expert_share": 18 / 64}
    assert spread["model_invalid"] == 4
    # |44-18| + |10-20| + |6-12| + |0-14| + 4 unusable answers against none, halved, over 64 positions
    assert spread["total_variation"] == pytest.approx(0.5 * (26 + 10 + 6 + 14 + 4) / 64)
    warning = collapse_warning("2048", 0, spread)
    assert "after the cold start" in warning and "'left'" in warning and "69%" in warning and "28%" in warning
    assert brief_spread(spread)["collapsed"] and "actions" not in brief_spread(spread)
    assert "COLLAPSED" in spread_text(spread)


def test_no_warning_when_the_spread_is_wide_or_the_expert_prefers_the_same_action():
    wide = compare_spread({"left": 30, "down": 20, "up": 14}, {"down": 20, "left": 18, "right": 26}, 64)
    assert not wide["collapsed"] and collapse_warning("2048", 3, wide) is None
    shared = compare_spread({"down": 50, "left": 14}, {"down": 40, "left": 24}, 64)  # expert: down 62%
    assert shared["model_top_share"] > 0.5 and not shared["collapsed"]
    exactly_half = compare_spread({"left": 32, "down": 32}, {"down": 64}, 64)
    assert not exactly_half["collapsed"]  # more than half, not half
    nothing = compare_spread({}, {"down": 4}, 4)
    assert nothing["model_top"] is None and not nothing["collapsed"]
    assert "no usable answer" in spread_text(nothing)
