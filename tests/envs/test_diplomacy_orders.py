"""Diplomacy action grammar: tolerant spelling, exact legality, one order per unit, message lines."""

from __future__ import annotations

import pytest

from coplay_envs.diplomacy.orders import (
    MAX_MESSAGE_CHARS,
    MAX_MESSAGES_PER_ROUND,
    POWERS,
    normalize_order,
    resolve_messages,
    resolve_orders,
)

FRANCE_S1901 = {
    "BRE": ["F BRE - ENG", "F BRE - GAS", "F BRE - MAO", "F BRE - PIC", "F BRE H", "F BRE S A PAR - PIC"],
    "MAR": ["A MAR - BUR", "A MAR - SPA", "A MAR H", "A MAR S A PAR - BUR"],
    "PAR": ["A PAR - BUR", "A PAR - PIC", "A PAR H", "A PAR S F BRE"],
}


@pytest.mark.parametrize("line, canonical", [
    ("A PAR - BUR", "A PAR - BUR"),
    ("  a par-bur ", "A PAR - BUR"),
    ("1. A PAR - BUR", "A PAR - BUR"),
    ("2) \"A PAR -> BUR\".", "A PAR - BUR"),
    ("- `A PAR MOVES TO BUR`", "A PAR - BUR"),
    ("Army Par Hold", "A PAR H"),
    ("F BRE SUPPORTS A PAR - PIC", "F BRE S A PAR - PIC"),
    ("A PAR S F BRE H", "A PAR S F BRE"),
    ("F STP (sc) - BOT", "F STP/SC - BOT"),
    ("F STP / SC H", "F STP/SC H"),
    ("A MUN RETREAT BOH", "A MUN R BOH"),
    ("build F BRE", "F BRE B"),
    ("Disband army MUN", "A MUN D"),
    ("retreat A MUN to BOH", "A MUN R BOH"),
    ("move a par to bur", "A PAR - BUR"),
])
def test_normalize_order_forgives_presentation(line: str, canonical: str) -> None:
    assert normalize_order(line) == canonical


def test_legal_orders_pass_through_in_canonical_form() -> None:
    action = "1. a par - bur\n2. F BRE -> MAO\n3. MAR - SPA"  # unit type left out on the last line
    result = resolve_orders(action, FRANCE_S1901, "M", 0)
    assert result.orders == ["A PAR - BUR", "F BRE - MAO", "A MAR - SPA"]
    assert result.invalid_count == 0


def test_illegal_and_unparseable_lines_are_dropped_and_counted() -> None:
    action = "A PAR - MUN\nF BRE - MAO\nplease hold everything\nA MAR - SPA"
    result = resolve_orders(action, FRANCE_S1901, "M", 0)
    assert result.orders == ["F BRE - MAO", "A MAR - SPA"]
    assert result.invalid_lines == ["A PAR - MUN", "please hold everything"]
    assert result.missing == 1  # PAR has no legal order: it holds, and that counts
    assert result.invalid_count == 3


def test_another_powers_unit_cannot_be_ordered() -> None:
    result = resolve_orders("A MUN - BUR", FRANCE_S1901, "M", 0)
    assert result.orders == [] and result.invalid_count == 1 + 3


def test_second_order_for_a_unit_is_dropped() -> None:
    result = resolve_orders("A PAR - BUR\nA PAR H\nF BRE H\nA MAR H", FRANCE_S1901, "M", 0)
    assert result.orders == ["A PAR - BUR", "F BRE H", "A MAR H"]
    assert result.invalid_lines == ["A PAR H"] and result.missing == 0


def test_every_unit_without_an_order_counts() -> None:
    assert resolve_orders("", FRANCE_S1901, "M", 0).invalid_count == 3
    assert resolve_orders("F BRE H; A PAR H; A MAR H", FRANCE_S1901, "M", 0).invalid_count == 0


def test_move_legal_only_by_convoy_may_omit_via() -> None:
    legal = {"LON": ["A LON - NWY VIA", "A LON - YOR", "A LON H"]}
    assert resolve_orders("A LON - NWY", legal, "M", 0).orders == ["A LON - NWY VIA"]
    assert resolve_orders("A LON - NWY via convoy", legal, "M", 0).orders == ["A LON - NWY VIA"]


def test_builds_are_capped_by_the_build_count_and_need_a_unit_type() -> None:
    legal = {"BRE": ["A BRE B", "F BRE B", "WAIVE"], "MAR": ["A MAR B", "F MAR B", "WAIVE"],
             "PAR": ["A PAR B", "WAIVE"]}
    result = resolve_orders("F BRE B\nBRE B\nA BRE B\nA PAR B\nA MAR B", legal, "A", 2)
    assert result.orders == ["F BRE B", "A PAR B"]
    assert result.invalid_lines == ["BRE B", "A BRE B", "A MAR B"]
    assert result.missing == 0  # building fewer than allowed is a choice, not an error
    assert resolve_orders("WAIVE\nWAIVE", legal, "A", 2).orders == ["WAIVE", "WAIVE"]


def test_missing_disbands_are_counted() -> None:
    legal = {"MUN": ["A MUN D"], "KIE": ["F KIE D"], "BER": ["A BER D"]}
    result = resolve_orders("A MUN D\nA MUN D", legal, "A", -2)
    assert result.orders == ["A MUN D"] and result.invalid_lines == ["A MUN D"] and result.missing == 1


def test_retreat_orders() -> None:
    legal = {"MUN": ["A MUN D", "A MUN R BOH", "A MUN R TYR"]}
    assert resolve_orders("a mun retreats to boh", legal, "R", 0).orders == ["A MUN R BOH"]
    assert resolve_orders("A MUN - TYR", legal, "R", 0).orders == ["A MUN R TYR"]
    assert resolve_orders("A MUN R SIL", legal, "R", 0).invalid_count == 2


def test_message_lines_reach_only_valid_recipients() -> None:
    live = list(POWERS)
    action = ("to germany: let us split BEL; you take HOL\n1. To ALL: \"peace\"\nto FRANCE: self\n"
              "to NARNIA: hi\nto ITALY:   \nhello everyone")
    result = resolve_messages(action, "FRANCE", live)
    assert result.messages == [("GERMANY", "let us split BEL; you take HOL"), ("ALL", "peace")]
    assert result.invalid_lines == ["to FRANCE: self", "to NARNIA: hi", "to ITALY:", "hello everyone"]
    dead = resolve_messages("to TURKEY: hi", "FRANCE", [p for p in live if p != "TURKEY"])
    assert dead.messages == [] and dead.invalid_count == 1


def test_message_text_is_bounded_and_printable() -> None:
    result = resolve_messages("to ALL: " + "\u00e9x" * MAX_MESSAGE_CHARS, "FRANCE", list(POWERS))
    (recipient, text), = result.messages
    assert len(text) == MAX_MESSAGE_CHARS and set(text) <= {"?", "x"}
    many = "\n".join(f"to ALL: m{i}" for i in range(MAX_MESSAGES_PER_ROUND + 3))
    result = resolve_messages(many, "FRANCE", list(POWERS))
    assert len(result.messages) == MAX_MESSAGES_PER_ROUND and result.invalid_count == 3
