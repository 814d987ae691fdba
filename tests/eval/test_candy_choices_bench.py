"""`benchmarks.candy_choices` ranks a chosen swap among the legal swaps of the board an observation shows,
in either text order, and counts a run's act decisions per iteration from its shards."""

from __future__ import annotations

import coplay_envs
from benchmarks.candy_choices import POLICIES, decision, run_choices
from tests.helpers import write_act_shards


def _position(order: str, seed: int = 4):
    env = coplay_envs.make_env("candy_crush", max_moves=6, show_clears=True, clears_order=order)
    return env.reset(seed=seed)


def test_a_choice_is_ranked_from_the_board_in_both_text_orders():
    for seed in range(6):
        (by_count, info), (by_board, _) = _position("count", seed), _position("board", seed)
        legal, clears = info["legal_actions"], info["clears"]
        best = POLICIES["first listed (count order)"][1](legal, clears)
        # the count-sorted text shows it first; the board-order text shows the first legal swap first
        assert by_count.split("by candies cleared at once: ", 1)[1].split(": ", 1)[1].startswith(best)
        assert by_board.split("clears at once: ", 1)[1].startswith(legal[0])
        for obs in (by_count, by_board):
            assert decision(obs, best) == {"most_clearing": True, "first_listed_count_order": True,
                                           "first_in_reading_order": best == legal[0],
                                           "position": legal.index(best) / (len(legal) - 1)}
            assert decision(obs, legal[-1])["position"] == 1.0 and decision(obs, legal[0])["position"] == 0.0
            worst = min(zip(clears, legal, strict=True))[1]
            assert decision(obs, worst)["most_clearing"] is (min(clears) == max(clears))
    assert decision("no board here", "swap (0,0) (0,1)") is None


def test_a_runs_act_decisions_are_counted_per_iteration(tmp_path):
    obs, info = _position("count")
    legal, clears = info["legal_actions"], info["clears"]
    best = POLICIES["first listed (count order)"][1](legal, clears)
    other = next(a for a, c in zip(legal, clears, strict=True) if c < max(clears))
    # a bot's step there (no act sample) is not a decision of the policy: 4 decisions per iteration
    write_act_shards(tmp_path, "candy_crush", 4, obs,
                     {1: [other, other, best, other], 2: [best, best, best, other]}, best)
    rows = run_choices(tmp_path)
    assert [(r["iteration"], r["decisions"], r["most_clearing_share"]) for r in rows] == [(1, 4, 0.25),
                                                                                         (2, 4, 0.75)]
    assert rows[1]["first_listed_count_order_share"] == 0.75
    place_best, place_other = (legal.index(a) / (len(legal) - 1) for a in (best, other))
    assert rows[1]["reading_position_mean"] == round((3 * place_best + place_other) / 4, 4)
