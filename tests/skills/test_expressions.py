"""The validator language: what it accepts, what it computes, and everything outside the grammar rejected."""

from __future__ import annotations

import pytest

from coplay.skills.expressions import ExpressionError, is_valid_expression, parse_expression

VIEW = {"holes": 3, "max_height": 12.5, "danger": False, "can_clear": True}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("holes > 2", True),
        ("holes >= 4", False),
        ("max_height < 12.5", False),
        ("max_height <= 12.5", True),
        ("holes == 3 and can_clear", True),
        ("danger or holes != 3", False),
        ("not danger", True),
        ("not (danger or not can_clear)", True),
        ("danger == false and can_clear == true", True),
        ("holes > -1", True),
        ("true", True),
        ("false or holes > 1e0", True),
        ("", True),
        ("(holes > 1 or danger) and max_height < 20", True),
        ("not not danger", False),
    ],
)
def test_expressions_evaluate_as_written(text, expected):
    assert parse_expression(text).evaluate(VIEW) is expected


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('true')",
        "holes.__class__",
        "holes[0] > 1",
        "holes + 1 > 2",
        "len(holes) > 1",
        "'holes' == 'holes'",
        "holes >",
        "holes > 1 and",
        "(holes > 1",
        "holes > 1)",
        "holes > 1 2",
        "lambda: 1",
        "holes = 3",
        "holes && danger",
        "_private > 1",
        "and > 1",
        "x" * 500,
    ],
)
def test_anything_outside_the_grammar_is_rejected(text):
    with pytest.raises(ExpressionError):
        parse_expression(text)
    assert not is_valid_expression(text)


def test_unknown_features_are_rejected_when_the_vocabulary_is_given():
    parse_expression("holes > 1", known_features=VIEW)
    with pytest.raises(ExpressionError, match="unknown feature"):
        parse_expression("hole > 1", known_features=VIEW)


def test_missing_feature_raises_in_evaluate_and_does_not_hold():
    expr = parse_expression("lines > 1")
    with pytest.raises(ExpressionError, match="lines"):
        expr.evaluate(VIEW)
    assert expr.holds(VIEW) is False
    assert expr.features == {"lines"}
