"""The cold start's `act` examples are balanced over the teacher's actions (`coplay.learn.act_balance`): a
skewed teacher still yields an SFT set whose most frequent action stays within the stated bound, spread over
the episodes' depth, the same set for the same seed; the other adapters' examples are untouched."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from coplay.config import CoplayConfig
from coplay.learn.act_balance import action_quotas, balance_act_examples, game_limits
from coplay.learn.teacher import ChatExample, expert_examples


def skewed_teacher(n: int = 600) -> list[ChatExample]:
    """A teacher that plays `left` 80% of the time, `down` 10%, `up` 6%, `right` 4%, over 60-move episodes."""
    plan = ["left"] * 80 + ["down"] * 10 + ["up"] * 6 + ["right"] * 4
    return [ChatExample("act", [{"role": "user", "content": f"board {i}"}], f"ACTION: {plan[(i * 37) % 100]}",
                        game="2048", action=plan[(i * 37) % 100], step=i % 60) for i in range(n)]


def shares(examples: list[ChatExample]) -> dict[str, float]:
    counts = Counter(e.action for e in examples if e.adapter == "act")
    return {a: c / sum(counts.values()) for a, c in counts.items()}


def test_a_skewed_teacher_gives_an_sft_set_with_every_action_equally_often():
    teacher = skewed_teacher()
    assert shares(teacher)["left"] == pytest.approx(0.8)
    kept, report = balance_act_examples(teacher, limit=64, max_share=0.5, seed=0)
    assert Counter(e.action for e in kept) == {"left": 16, "down": 16, "up": 16, "right": 16}
    assert report["2048"]["teacher"]["top_share"] == pytest.approx(0.8)
    assert report["2048"]["kept"]["top_share"] == 0.25 and report["2048"]["kept"]["examples"] == 64
    # the kept `left` examples come from early and late moves alike, not the first 16 the teacher made
    depths = sorted(e.step for e in kept if e.action == "left")
    assert depths[0] < 10 and depths[-1] > 50
    again, _ = balance_act_examples(teacher, limit=64, max_share=0.5, seed=0)
    assert again == kept


def test_when_the_rarer_actions_run_out_the_majority_is_capped_at_the_bound():
    """200 `left`, 10 `down`: round-robin alone would keep 190 `left` (95%); the cap keeps `left` at most
    half of the set, unless it is switched off (max_share 1)."""
    teacher = [ChatExample("act", [], "", game="2048", action="left" if i % 21 else "down", step=i)
               for i in range(210)]
    kept, report = balance_act_examples(teacher, limit=200, max_share=0.5, seed=3)
    assert Counter(e.action for e in kept) == {"left": 10, "down": 10}
    assert report["2048"]["bound"] == 0.5
    uncapped, _ = balance_act_examples(teacher, limit=200, max_share=1.0, seed=3)
    assert Counter(e.action for e in uncapped) == {"left": 190, "down": 10}


def test_the_bound_holds_for_any_skew_and_limit():
    for limit in (8, 50, 333):
        for weights in ([1, 1, 1, 97], [3, 5, 300], [50, 50], [1000]):
            counts = {f"a{i}": w for i, w in enumerate(weights)}
            quotas = action_quotas(counts, limit, 0.5, random.Random(0))
            total = sum(quotas.values())
            assert total <= limit and all(quotas[a] <= counts[a] for a in counts)
            kept = [q for q in quotas.values() if q]
            assert max(kept) <= max(0.5, 1 / len(kept)) * total + 1e-9


def test_other_adapters_pass_through_and_games_share_the_limit_in_proportion():
    retrieve = [ChatExample("retrieve", [], "SKILL: NONE", game="2048")] * 5
    tetris = [ChatExample("act", [], "", game="tetris", action=f"place {i % 3}", step=i) for i in range(300)]
    kept, report = balance_act_examples(skewed_teacher(600) + tetris + retrieve, limit=90, max_share=0.5,
                                        seed=1)
    assert game_limits({"2048": 600, "tetris": 300}, 90) == {"2048": 60, "tetris": 30}
    assert Counter(e.game for e in kept if e.adapter == "act") == {"2048": 60, "tetris": 30}
    assert [e for e in kept if e.adapter == "retrieve"] == retrieve
    assert set(report) == {"2048", "tetris"}


def test_the_expert_bots_examples_carry_what_balancing_reads():
    """Real teacher data: every `act` example names its game, the expert's action and the step; balanced,
    2048's four moves each take a quarter of 16 examples."""
    examples = expert_examples("2048", [99990, 99991, 99992], "rules", max_steps=20)
    act = [e for e in examples if e.adapter == "act"]
    assert len(act) == 60 and all(e.game == "2048" and e.action in e.completion for e in act)
    assert [e.step for e in act[:3]] == [0, 1, 2]
    cap = CoplayConfig().sft.act_balance.max_action_share
    kept, _ = balance_act_examples(examples, limit=16, max_share=cap, seed=0)
    assert max(shares(kept).values()) == 0.25
