"""Render one power's view of a Diplomacy game as the observation text.

The text holds the whole board (every power's units, dislodged units and centres: the board is public in
Diplomacy), every power's centre count, the power's own legal orders per unit, only its own messages from the
latest negotiation, the last phase's orders and results, and what it must do now.

Messages: the view holds those of the latest negotiation (before the current movement phase, kept through
its retreats and adjustments) that the power sent or received. The text shows two bounded lists, oldest
first: "Messages to you", the latest `MAX_RECEIVED_SHOWN` received, each marked ``private from GERMANY``
(only the two of you see it) or ``public from GERMANY`` (every power sees it); and "Messages you sent", the
latest `MAX_SENT_SHOWN`, marked ``private to GERMANY`` or ``public to all``. Each text is at most
`MAX_MESSAGE_CHARS` characters; a line says how many earlier messages a list leaves out.

Board lines have a fixed shape so a reader (or a test) can parse them back:
``FRANCE: units A PAR, F BRE | centres BRE, MAR, PAR``.

Pure function of the view (and the static map in `board.py`); never imports `coplay`.
"""

from __future__ import annotations

from typing import Any

from coplay_envs.diplomacy.board import supply_centers
from coplay_envs.diplomacy.orders import MAX_MESSAGE_CHARS, MAX_MESSAGES_PER_ROUND, POWERS

#: Most received messages the text shows (the latest ones): a full round from six powers is at most 48.
MAX_RECEIVED_SHOWN: int = 24
#: Most sent messages the text shows (the latest ones): one round's worth.
MAX_SENT_SHOWN: int = MAX_MESSAGES_PER_ROUND
SEASONS = {"S": "Spring", "F": "Fall", "W": "Winter"}
PHASE_KINDS = {"M": "movement", "R": "retreats", "A": "adjustments"}


def describe_phase(phase: str) -> str:
    """``S1901M`` -> ``Spring 1901 movement``; other names are returned unchanged."""
    if len(phase) == 6 and phase[0] in SEASONS and phase[-1] in PHASE_KINDS and phase[1:5].isdigit():
        return f"{SEASONS[phase[0]]} {phase[1:5]} {PHASE_KINDS[phase[-1]]}"
    return phase


def _join(items: list[str]) -> str:
    return ", ".join(items) if items else "none"


def _task(view: dict[str, Any]) -> str:
    """What the power must do now, with the action format."""
    power, stage = view["power"], view["stage"]
    if stage == "done" or power not in view["alive"]:
        return "NOW: nothing; the game is over for you."
    if stage == "negotiation":
        return (f"NOW: negotiation round {view['negotiation_round']}/{view['negotiation_rounds']} before "
                f"{view['phase']}. Send messages, one per line: 'to POWER: <text>' (private) or "
                f"'to ALL: <text>' (at most {MAX_MESSAGES_PER_ROUND} lines, {MAX_MESSAGE_CHARS} chars each), "
                "or nothing.")
    locs = sorted(view["legal_orders"])
    if not locs:
        return "NOW: you have nothing to order this phase; send an empty action."
    phase_type = view["phase_type"]
    if phase_type == "M":
        return (f"NOW: write one order per line for each of your {len(locs)} units ({', '.join(locs)}), "
                "chosen from your legal orders. A unit without a legal order holds.")
    if phase_type == "R":
        return (f"NOW: retreat or disband each dislodged unit ({', '.join(locs)}), one order per line. "
                "A dislodged unit without a legal order is disbanded.")
    count = view["build_counts"][power]
    if count > 0:
        return (f"NOW: you may build up to {count} unit(s), one order per line (e.g. A {locs[0]} B), on free "
                f"home centres ({', '.join(locs)}); WAIVE or fewer lines build less.")
    return (f"NOW: disband exactly {-count} unit(s), one order per line (e.g. A {locs[0]} D); "
            "missing disbands are chosen for you.")


def render_public(view: dict[str, Any]) -> str:
    """The part of the text every power sees alike: centre counts, the board, the last phase."""
    lines = [
        "Supply centres (34 in all, 18 win): "
        + ", ".join(f"{name} {view['center_counts'][name]}" for name in POWERS) + ".",
        "Board:",
    ]
    owned: set[str] = set()
    for name in POWERS:
        owned.update(view["centers"][name])
        lines.append(f"{name}: units {_join(view['units'][name])} | centres {_join(view['centers'][name])}")
    lines.append(f"Neutral centres: {_join([sc for sc in supply_centers() if sc not in owned])}")
    dislodged = [f"{name} {unit} (may retreat to {_join(locs)})"
                 for name in POWERS for unit, locs in view["dislodged"][name].items()]
    if dislodged:
        lines.append("Dislodged: " + "; ".join(dislodged))
    if view["last_phase"]:
        lines.append(f"Last phase {view['last_phase']} orders:")
        ordered = [name for name in POWERS if view["last_orders"].get(name)]
        for name in ordered:
            lines.append(f"  {name}: {'; '.join(view['last_orders'][name])}")
        if not ordered:
            lines.append("  none")
        results = [f"{unit} {'/'.join(outcome)}" for unit, outcome in view["last_results"].items()]
        lines.append(f"Last phase results: {'; '.join(results) if results else 'all orders succeeded'}")
    return "\n".join(lines)


def render_messages(view: dict[str, Any]) -> list[str]:
    """The message lines of the text (module docstring); none when the view holds no message."""
    power = view["power"]
    received = [message for message in view["messages"] if message["sender"] != power]
    sent = [message for message in view["messages"] if message["sender"] == power]
    lines: list[str] = []
    if received:
        lines.append(f"Messages to you (negotiation before {received[-1]['phase']}; private: only you and "
                     f"the sender see it; public: every power does; latest {MAX_RECEIVED_SHOWN} at most):")
        if len(received) > MAX_RECEIVED_SHOWN:
            lines.append(f"  ({len(received) - MAX_RECEIVED_SHOWN} earlier messages not shown)")
        for message in received[-MAX_RECEIVED_SHOWN:]:
            kind = "public" if message["to"] == "ALL" else "private"
            lines.append(f"  [round {message['round']}] {kind} from {message['sender']}: {message['text']}")
    if sent:
        lines.append(f"Messages you sent (negotiation before {sent[-1]['phase']}; latest {MAX_SENT_SHOWN} at "
                     "most):")
        if len(sent) > MAX_SENT_SHOWN:
            lines.append(f"  ({len(sent) - MAX_SENT_SHOWN} earlier messages not shown)")
        for message in sent[-MAX_SENT_SHOWN:]:
            target = "public to all" if message["to"] == "ALL" else f"private to {message['to']}"
            lines.append(f"  [round {message['round']}] {target}: {message['text']}")
    return lines


def render_observation(view: dict[str, Any], public_text: str | None = None) -> str:
    """The observation text of `view` (module docstring). `public_text`: `render_public` of the same
    view, when the caller already has it (it is the same for every power in a step)."""
    power = view["power"]
    lines = [
        f"DIPLOMACY (standard map). You are {power}.",
        f"Phase {view['phase']} ({describe_phase(view['phase'])}); engine phases played "
        f"{view['phases_played']} of {view['max_phases']}.",
        render_public(view) if public_text is None else public_text,
        f"You ({power}): units {_join(view['units'][power])}; centres {_join(view['centers'][power])}; "
        f"home centres {_join(view['homes'][power])}.",
    ]
    lines.extend(render_messages(view))
    if view["legal_orders"]:
        lines.append("Your legal orders:")
        for loc, orders in sorted(view["legal_orders"].items()):
            lines.append(f"  {loc}: {' | '.join(orders)}")
    lines.append(_task(view))
    return "\n".join(lines)
