"""The `contract` answer grammar (`skill_bank.constrained_contracts`): it admits every teacher protocol the
cold start teaches, in every single-player game, and only answers `parse_protocol` accepts."""

from __future__ import annotations

import re

import pytest

from coplay.config import CoplayConfig
from coplay.rollout.bot_episodes import play_bot_episodes
from coplay.skills import Bank
from coplay.skills.contract_grammar import contract_regex
from coplay.skills.prompts import AnswerError, parse_protocol
from coplay.skills.teacher import seed_bank

FEATURES = {"corner_max": "bool", "empty_cells": "number", "merges": "number"}
GOOD = ('EFFECTS: empty_cells↓, merges↑\n{"summary": "MERGE: lower empty_cells (about 6 steps)", '
        '"plan": ["Start when corner_max == true", "Raise merges"], "preconditions": "corner_max == true", '
        '"success": "empty_cells <= 10.5 and merges >= 2", "abort": "false"}')


@pytest.mark.parametrize("game", ["2048", "tetris", "candy_crush"])
def test_every_teacher_protocol_is_admitted(game):
    episodes = play_bot_episodes(game, "expert", list(range(12)), 40)
    bank, examples = seed_bank(Bank(bank_key=game), episodes, CoplayConfig().skill_bank, example_groups=2)
    regex = contract_regex(bank.features)
    answers = [answer for adapter, _, answer in examples if adapter == "contract"]
    assert answers
    for answer in answers:
        assert re.fullmatch(regex, answer), answer


def test_an_admitted_answer_parses_and_validates():
    assert re.fullmatch(contract_regex(FEATURES), GOOD)
    protocol, effects = parse_protocol(GOOD, FEATURES)
    assert effects == ["empty_cells↓", "merges↑"] and protocol["success"].startswith("empty_cells <=")


@pytest.mark.parametrize("bad", [
    GOOD.replace("empty_cells <= 10.5", "holes <= 10.5"),  # a feature the bank does not have
    GOOD.replace("merges↑\n", "merges↑ raise raise raise\n"),  # prose after the effects
    GOOD.replace('"plan": ["Start when corner_max == true", ', '"plan": ['),  # a plan of one step
    GOOD.replace("(about 6 steps)", "x" * 400),  # an overlong summary
    GOOD.replace("(about 6 steps)", "(about\t6 steps)"),  # a control character JSON refuses
    GOOD.replace("corner_max == true\", \"success", "corner_max >= 3 +\", \"success"),  # not an expression
    GOOD[:-1],  # the object is never closed (cut off at the token limit)
])
def test_what_the_parser_rejects_is_not_admitted(bad):
    assert re.fullmatch(contract_regex(FEATURES), bad) is None
    if bad != GOOD.replace("merges↑\n", "merges↑ raise raise raise\n"):
        with pytest.raises(AnswerError):
            parse_protocol(bad, FEATURES)
