"""`benchmarks.merge_choices` ranks a chosen 2048 move among the legal moves of the board an observation
shows (with or without the points listed) and counts a run's act decisions per iteration from its shards."""

from __future__ import annotations

import coplay_envs
from benchmarks.merge_choices import POLICIES, decision, run_choices
from tests.helpers import write_act_shards


def _positions(count: int = 40):
    """Observations (points shown, and the same position without them) with their infos, along a game."""
    shown, plain = coplay_envs.make_env("2048", show_merges=True), coplay_envs.make_env("2048")
    (obs, info), (obs_plain, _) = shown.reset(seed=2), plain.reset(seed=2)
    out = []
    for i in range(count):
        out.append((obs, obs_plain, info))
        move = info["legal_actions"][i % len(info["legal_actions"])]
        (obs, _, _, _, info), (obs_plain, *_) = shown.step(move), plain.step(move)
    return out


def test_a_choice_is_ranked_from_the_board_with_or_without_the_points_shown():
    seen_a_choice = False
    for obs, obs_plain, info in _positions():
        legal, points = info["legal_actions"], info["merges"]
        best = POLICIES["highest-scoring, first listed"][1](legal, points)
        for text in (obs, obs_plain):
            ranked = decision(text, best)
            assert ranked["best_merge"] and ranked["first_listed"] is (best == legal[0])
            assert ranked["chance"] == points.count(max(points)) / len(legal)
            assert decision(text, legal[0])["position"] == 0.0
            assert decision(text, legal[-1])["position"] == (1.0 if len(legal) > 1 else 0.0)
            worst = legal[points.index(min(points))]
            assert decision(text, worst)["best_merge"] is (min(points) == max(points))
        seen_a_choice |= min(points) < max(points)
    assert seen_a_choice
    assert decision("no board here", "up") is None


def test_a_runs_act_decisions_are_counted_per_iteration(tmp_path):
    obs, _, info = next(p for p in _positions() if min(p[2]["merges"]) < max(p[2]["merges"]))
    legal, points = info["legal_actions"], info["merges"]
    best = POLICIES["highest-scoring, first listed"][1](legal, points)
    other = next(m for m, p in zip(legal, points, strict=True) if p < max(points))
    # a bot's step there (no act sample) is not a decision of the policy: 4 decisions per iteration
    write_act_shards(tmp_path, "2048", 2, obs,
                     {1: [other, other, best, other], 2: [best, best, best, other]}, best)
    rows = run_choices(tmp_path)
    assert [(r["iteration"], r["decisions"], r["best_merge_share"]) for r in rows] == [(1, 4, 0.25),
                                                                                       (2, 4, 0.75)]
    assert rows[0]["chance_share"] == round(points.count(max(points)) / len(legal), 4)
    # the position's points differ, so every decision also counts among those that show a reading
    assert [r["best_merge_share_where_points_differ"] for r in rows] == [0.25, 0.75]
    places = {m: legal.index(m) / max(len(legal) - 1, 1) for m in (best, other)}
    assert rows[1]["reading_position_mean"] == round((3 * places[best] + places[other]) / 4, 4)
