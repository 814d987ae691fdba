"""Parsing `act` / `retrieve` completions: tolerant of form, exact about legality."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from coplay.agent.parsing import match_legal, parse_act, parse_retrieve

MOVES = ["up", "down", "left", "right"]
SWAPS = ["swap (0,1) (0,2)", "swap (3,4) (4,4)"]
AVALON = ["say <text>", "approve", "reject"]


def test_canonical_completion():
    p = parse_act("INTENTION: MERGE build the corner\nSKILL: KEEP\nACTION: left", MOVES)
    assert (p.tag, p.subgoal, p.skill_directive, p.action, p.error) == ("MERGE", "build the corner", "KEEP",
                                                                        "left", "")


def test_tolerates_case_markdown_numbering_quotes_and_spaces():
    text = "**intention:** merge keep big tile\n1. **Action:** `Swap (0, 1)  (0,2)`."
    p = parse_act(text, SWAPS)
    assert p.action == "swap (0,1) (0,2)" and p.tag == "MERGE" and p.error == ""


def test_illegal_action_is_passed_on_with_an_error():
    p = parse_act("INTENTION: CLEAR x\nACTION: diagonal", MOVES)
    assert p.action == "diagonal" and "illegal action" in p.error


def test_missing_parts_are_recorded_not_guessed():
    p = parse_act("I think up is best", MOVES)
    assert p.action == "" and "no ACTION line" in p.error and "no INTENTION line" in p.error
    p = parse_act("INTENTION: DANCE around\nACTION: up", MOVES)
    assert p.action == "up" and "intention tag" in p.error and p.tag == ""


def test_template_actions_keep_free_text():
    p = parse_act("INTENTION: ATTACK sow doubt\nACTION: Say player 3 is evil, trust me", AVALON)
    assert p.action == "say player 3 is evil, trust me" and p.error == ""
    assert match_legal("approve", AVALON) == "approve"


def test_multi_line_orders_block():
    text = "INTENTION: ATTACK take BUR\nORDERS:\n1. A PAR - BUR\n- F BRE H\n\nA MAR S A PAR - BUR\n"
    p = parse_act(text, [], multi_line=True)
    assert p.action == "A PAR - BUR\nF BRE H\nA MAR S A PAR - BUR" and p.error == ""


def test_first_action_header_wins():
    p = parse_act("INTENTION: MERGE a\nACTION: up\nACTION: down", MOVES)
    assert p.action == "up"


def test_retrieve_answers():
    ids = ["s1", "corner-merge"]
    assert parse_retrieve("SKILL: corner-merge", ids).skill_id == "corner-merge"
    assert parse_retrieve("skill: NONE", ids) == parse_retrieve("SKILL: none.", ids)
    assert (parse_retrieve("SKILL: none", ids).skill_id is None
            and parse_retrieve("SKILL: none", ids).error == "")
    bad = parse_retrieve("SKILL: s9", ids)
    assert bad.skill_id is None and "not among" in bad.error
    assert parse_retrieve("whatever", ids).error == "no SKILL line"


@given(st.text(max_size=300))
def test_never_raises_on_garbage(text):
    p = parse_act(text, MOVES)
    assert p.action == "" or isinstance(p.action, str)
    parse_act(text, [], multi_line=True)
    parse_retrieve(text, ["a"])
