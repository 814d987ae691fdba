"""Diplomacy action grammar: tolerant parsing of order and message lines, exact about legality.

An order action holds one order per line in standard notation (``A PAR - BUR``, ``F BRE S A PAR - PIC``,
``A MAR H``, ``A PAR - BUR VIA``, ``F NTH C A LON - NWY``, ``A MUN R BOH``, ``A MUN D``, ``F BRE B``,
``WAIVE``). Parsing forgives presentation, never legality:

- case, extra whitespace, list numbering (``1.``, ``2)``, ``-``, ``*``), surrounding quotes or backticks and a
  trailing ``.``/``,``/``;`` are ignored; lines may also be separated by ``;``;
- words: ``HOLD(S)`` = ``H``, ``SUPPORT(S)`` = ``S``, ``CONVOY(S)`` = ``C``,
  ``MOVE(S)``/``TO``/``->`` = ``-``, ``RETREAT(S)`` = ``R``, ``BUILD(S)`` = ``B``, ``DISBAND(S)`` = ``D``,
  ``ARMY`` = ``A``, ``FLEET`` = ``F``; coasts as ``STP/SC`` or ``STP (SC)``;
  ``S A PAR H`` (support to hold) = ``S A PAR``;
- unit types may be left out when the location decides them (``PAR - BUR``), except in builds;
- a move that is legal only by convoy may be written without ``VIA``; a retreat may be written as a move
  (``A MUN - BOH``); the verb may come first (``BUILD F BRE``, ``DISBAND A MUN``, ``RETREAT A MUN TO BOH``,
  ``MOVE A PAR TO BUR``).

The resulting canonical order must be in the power's legal set (`diplomacy.Game.get_all_possible_orders`
restricted to its orderable locations), else the line is dropped. One order per unit: a second order for
the same unit is dropped. Adjustments: at most ``build_count`` builds/waives (distinct sites) or exactly
``-build_count`` disbands. Every dropped line is counted as invalid, and so is every unit left without an
order in movement and retreat phases and every missing disband.

Message lines (negotiation stage only): ``to FRANCE: <text>`` or ``to ALL: <text>``; the text is made
printable ASCII on one line and cut at `MAX_MESSAGE_CHARS`; at most `MAX_MESSAGES_PER_ROUND` lines count.

Pure functions on plain data; never imports the engine (`diplomacy`), `coplay` or anything heavy.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field

POWERS: tuple[str, ...] = ("AUSTRIA", "ENGLAND", "FRANCE", "GERMANY", "ITALY", "RUSSIA", "TURKEY")

#: Longest message text kept (characters); longer texts are cut, not refused.
MAX_MESSAGE_CHARS: int = 300
#: Most message lines one power may send in one negotiation round; further lines are dropped (invalid).
MAX_MESSAGES_PER_ROUND: int = 8

_NUMBERING = re.compile(r"^\s*(?:\(?\d{1,3}\s*[.):]\)?|[-*\u2022>]+(?=\s))\s*")
_COAST_PAREN = re.compile(r"\s*\(\s*(NC|SC|EC|WC)\s*\)")
_COAST_SLASH = re.compile(r"\s*/\s*(NC|SC|EC|WC)\b")
_ARROWS = re.compile(r"->|=>|\u2192|-")
_MESSAGE_LINE = re.compile(r"^TO\s+([A-Z]+)\s*:(.*)$", re.IGNORECASE | re.DOTALL)
_STRIP_CHARS = "\"'`\u201c\u201d\u2018\u2019 \t"
_PRINTABLE = set(string.printable) - set("\t\n\r\x0b\x0c")
_WORDS: dict[str, str] = {
    "HOLD": "H", "HOLDS": "H", "SUPPORT": "S", "SUPPORTS": "S", "CONVOY": "C", "CONVOYS": "C",
    "MOVE": "-", "MOVES": "-", "TO": "-", "RETREAT": "R", "RETREATS": "R", "BUILD": "B", "BUILDS": "B",
    "DISBAND": "D", "DISBANDS": "D", "ARMY": "A", "FLEET": "F",
}


def split_lines(action: str, semicolons: bool = True) -> list[str]:
    """Non-blank lines of an action (newline-separated, and ``;``-separated when `semicolons`), stripped."""
    text = action.replace("\r", "\n")
    if semicolons:
        text = text.replace(";", "\n")
    lines = []
    for raw in text.split("\n"):
        line = raw.strip()
        if line:
            lines.append(line)
    return lines


def _clean_line(line: str) -> str:
    """Remove numbering, quotes and trailing punctuation around one line."""
    line = _NUMBERING.sub("", line, count=1)
    line = line.strip(_STRIP_CHARS).rstrip(".,;").strip(_STRIP_CHARS)
    return line


def normalize_order(line: str) -> str:
    """One order line in canonical spelling (``A PAR - BUR``); legality is not checked here."""
    text = _clean_line(line).upper()
    text = _COAST_PAREN.sub(r"/\1", text)
    text = _COAST_SLASH.sub(r"/\1", text)
    text = _ARROWS.sub(" - ", text)
    tokens: list[str] = []
    for word in text.replace(",", " ").split():
        word = _WORDS.get(word, word)
        if word == "-" and tokens and tokens[-1] in ("-", "R"):  # "MOVE TO", "RETREAT TO"
            continue
        if word == "C" and tokens and tokens[-1] == "VIA":  # "VIA CONVOY"
            continue
        tokens.append(word)
    if tokens and tokens[0] == "-":  # "MOVE A PAR TO BUR"
        tokens = tokens[1:]
    if len(tokens) == 3 and tokens[0] in ("B", "D", "H"):  # "BUILD F BRE", "DISBAND A MUN", "HOLD A PAR"
        tokens = tokens[1:] + tokens[:1]
    elif len(tokens) >= 4 and tokens[0] == "R":  # "RETREAT A MUN TO BOH"
        tokens = tokens[1:3] + ["R"] + [token for token in tokens[3:] if token != "-"]
    # "A BRE S A PAR H" (support to hold) is written "A BRE S A PAR".
    if "S" in tokens and tokens[-1] == "H" and "-" not in tokens:
        tokens.pop()
    return " ".join(tokens)


def _loose_key(order: str) -> str:
    """An order without unit-type letters, so ``PAR - BUR`` finds ``A PAR - BUR``."""
    return " ".join(token for token in order.split() if token not in ("A", "F"))


@dataclass
class OrderResolution:
    """What the env submits for one power and what it dropped."""

    orders: list[str] = field(default_factory=list)
    invalid_lines: list[str] = field(default_factory=list)
    missing: int = 0

    @property
    def invalid_count(self) -> int:
        return len(self.invalid_lines) + self.missing


class LegalOrderIndex:
    """Look-up from any tolerated spelling to (location, canonical order) for one power's legal orders.
    Canonical lines are found directly; the loose index (unit types left out) is built on the first miss."""

    def __init__(self, legal_orders: dict[str, list[str]]) -> None:
        self.legal_orders = legal_orders
        self.exact: dict[str, str] = {}
        for loc, orders in legal_orders.items():
            for order in orders:
                self.exact.setdefault(order, loc)
        self._loose: dict[str, str] | None = None

    def _loose_index(self) -> dict[str, str]:
        if self._loose is None:
            found: dict[str, set[str]] = {}
            for order in self.exact:
                found.setdefault(_loose_key(order), set()).add(order)
            self._loose = {key: next(iter(orders)) for key, orders in found.items() if len(orders) == 1}
        return self._loose

    def match(self, line: str) -> tuple[str, str] | None:
        """(location, canonical order) for a line, or None when it names no legal order."""
        if line in self.exact:
            return self.exact[line], line
        order = normalize_order(line)
        retreat = order.replace(" - ", " R ", 1)  # "A MUN - BOH" in a retreat phase
        for candidate in (order, order + " VIA", retreat):
            if candidate in self.exact:
                return self.exact[candidate], candidate
        loose = self._loose_index()
        for candidate in (order, order + " VIA", retreat):
            canonical = loose.get(_loose_key(candidate))
            if canonical is not None:
                return self.exact[canonical], canonical
        return None


def resolve_orders(action: str, legal_orders: dict[str, list[str]] | LegalOrderIndex, phase_type: str,
                   build_count: int) -> OrderResolution:
    """Turn an order action into the legal orders to submit (module docstring: the rules).

    legal_orders: location -> legal orders (or its `LegalOrderIndex`, to reuse within a phase).
    phase_type: ``M`` movement, ``R`` retreats, ``A`` adjustments. build_count: adjustments only; builds
    allowed (> 0) or disbands required (< 0).
    """
    result = OrderResolution()
    index = legal_orders if isinstance(legal_orders, LegalOrderIndex) else LegalOrderIndex(legal_orders)
    legal_orders = index.legal_orders
    ordered_locs: set[str] = set()
    for line in split_lines(action):
        found = index.match(line)
        if found is None:
            result.invalid_lines.append(line)
            continue
        loc, order = found
        if phase_type == "A":
            if len(result.orders) >= abs(build_count) or (order != "WAIVE" and loc in ordered_locs):
                result.invalid_lines.append(line)
                continue
            if order != "WAIVE":
                ordered_locs.add(loc)
            result.orders.append(order)
            continue
        if loc in ordered_locs:
            result.invalid_lines.append(line)
            continue
        ordered_locs.add(loc)
        result.orders.append(order)
    if phase_type in ("M", "R"):
        result.missing = len(legal_orders) - len(ordered_locs)
    elif build_count < 0:
        result.missing = -build_count - len(result.orders)
    return result


def clean_message_text(text: str) -> str:
    """Message text as one line of printable ASCII, at most `MAX_MESSAGE_CHARS` characters."""
    flat = " ".join(text.split())
    printable = "".join(ch if ch in _PRINTABLE else "?" for ch in flat)
    return printable.strip(_STRIP_CHARS)[:MAX_MESSAGE_CHARS]


@dataclass
class MessageResolution:
    """Messages one power sends in one negotiation round: (recipient, text) pairs and dropped lines."""

    messages: list[tuple[str, str]] = field(default_factory=list)
    invalid_lines: list[str] = field(default_factory=list)

    @property
    def invalid_count(self) -> int:
        return len(self.invalid_lines)


def resolve_messages(action: str, sender: str, live_powers: list[str]) -> MessageResolution:
    """Parse message lines ``to POWER: text`` / ``to ALL: text``; a recipient must be a live power other
    than the sender, or ALL."""
    result = MessageResolution()
    for line in split_lines(action, semicolons=False):  # ';' may occur inside a message text
        match = _MESSAGE_LINE.match(_NUMBERING.sub("", line, count=1).strip(_STRIP_CHARS))
        if match is None or len(result.messages) >= MAX_MESSAGES_PER_ROUND:
            result.invalid_lines.append(line)
            continue
        recipient, text = match.group(1).upper(), clean_message_text(match.group(2))
        if not text or not (recipient == "ALL" or (recipient in live_powers and recipient != sender)):
            result.invalid_lines.append(line)
            continue
        result.messages.append((recipient, text))
    return result
