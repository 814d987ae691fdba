"""`rollout.constrained_actions` (agent/constraint.py): the regex an `act` answer of a single-action game is
sampled under admits exactly the answers the parser accepts as legal, and nothing else."""

from __future__ import annotations

import re

from coplay.agent.constraint import FREE_TEXT_MAX_CHARS, actions_regex, constraint_for
from coplay.agent.parsing import parse_act

CANDY = ["swap (1,4) (1,5)", "swap (1,1) (2,1)"]


def _admits(regex: str, text: str) -> bool:
    return re.fullmatch(regex, text) is not None


def test_a_teacher_style_answer_with_a_legal_action_is_admitted_and_parses_clean():
    regex = actions_regex(["up", "down", "left"])
    for text in ("INTENTION: MERGE combine the bottom row\nACTION: left",
                 "INTENTION: SETUP\nSKILL: KEEP\nACTION: up"):
        assert _admits(regex, text), text
        assert parse_act(text, ["up", "down", "left"]).error == ""


def test_illegal_actions_missing_lines_and_trailing_prose_are_not_admitted():
    regex = actions_regex(["up", "down", "left"])
    for text in ("INTENTION: MERGE combine\nACTION: right",  # not legal here
                 "INTENTION: POSITION left",  # no ACTION line: the failure seen at temperature 0.7
                 "INTENTION: MERGE x\nACTION: left\nbecause it merges",  # runs on into prose
                 "INTENTION: WIN now\nACTION: up",  # not an intention tag
                 "ACTION: up"):  # no INTENTION line
        assert not _admits(regex, text), text


def test_special_characters_in_actions_are_literal():
    regex = actions_regex(CANDY)
    assert _admits(regex, "INTENTION: CLEAR row one\nACTION: swap (1,4) (1,5)")
    assert not _admits(regex, "INTENTION: CLEAR row one\nACTION: swap 1,4 1,5")


def test_a_template_action_keeps_one_line_of_free_text():
    regex = actions_regex(["say <text>"])
    assert _admits(regex, "INTENTION: DEFEND\nACTION: say seat 2 is evil, reject this team")
    assert parse_act("INTENTION: DEFEND\nACTION: say seat 2 is evil", ["say <text>"]).error == ""
    assert not _admits(regex, "INTENTION: DEFEND\nACTION: say a\nsecond line")
    assert not _admits(regex, "INTENTION: DEFEND\nACTION: say " + "x" * (FREE_TEXT_MAX_CHARS + 1))


def test_the_switch_decides_per_game():
    info = {"legal_actions": ["up", "down"]}
    assert constraint_for("2048", info) is None  # off unless asked: the default answers stay free
    assert constraint_for("2048", info, actions=True) == actions_regex(["up", "down"])
    assert constraint_for("2048", {"legal_actions": []}, actions=True) is None  # game over: nothing to pick
    # Diplomacy answers are multi-line orders: constrained_orders, never constrained_actions
    assert constraint_for("diplomacy", {"legal_actions": ["A PAR H"]}, orders=False, actions=True) is None


def test_intention_chars_zero_admits_the_tag_alone_and_the_budget_bounds_the_free_text():
    info = {"legal_actions": CANDY}
    tag_only = constraint_for("candy_crush", info, actions=True, intention_chars=0)
    assert _admits(tag_only, "INTENTION: CLEAR\nACTION: swap (1,1) (2,1)")
    assert parse_act("INTENTION: CLEAR\nACTION: swap (1,1) (2,1)", CANDY).error == ""
    assert not _admits(tag_only, "INTENTION: CLEAR the top\nACTION: swap (1,1) (2,1)")
    ten = actions_regex(CANDY, intention_chars=10)
    assert _admits(ten, "INTENTION: CLEAR " + "x" * 10 + "\nACTION: swap (1,4) (1,5)")
    assert not _admits(ten, "INTENTION: CLEAR " + "x" * 11 + "\nACTION: swap (1,4) (1,5)")


def test_the_configs_default_intention_budget_is_the_constraints_own():
    from coplay.agent.constraint import SUBGOAL_MAX_CHARS
    from coplay.config import RolloutConfig

    assert RolloutConfig().intention_chars == SUBGOAL_MAX_CHARS
