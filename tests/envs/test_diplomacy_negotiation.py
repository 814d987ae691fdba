"""Diplomacy negotiation: the expert's messages go to specific powers and to all, say what its own orders
then do, and are deterministic per seed; private messages reach only their addressee, public ones reach
everyone, the observation bounds and marks them, and the message features count them from the view."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import pytest

from coplay_envs.diplomacy.board import neighbours, unit_type_and_loc
from coplay_envs.diplomacy.bots import ExpertBot
from coplay_envs.diplomacy.env import DiplomacyEnv
from coplay_envs.diplomacy.features import move_destinations
from coplay_envs.diplomacy.orders import MAX_MESSAGE_CHARS, MAX_MESSAGES_PER_ROUND, POWERS, resolve_messages
from coplay_envs.diplomacy.text import MAX_RECEIVED_SHOWN, MAX_SENT_SHOWN

SUPPORT = re.compile(r"^to ([A-Z]+): I will support (.+)\.$")
REQUEST = re.compile(r"^to ([A-Z]+): please support my (.+) with your (.+)\.$")
ALLIANCE = re.compile(r"^to ([A-Z]+): I propose an alliance( against [A-Z]+)?: ")
DMZ = re.compile(r"^to ([A-Z]+): let us keep ([A-Z]{3}) demilitarised: ")
QUARREL = re.compile(r"^to ALL: ([A-Z]+) has a quarrel with (.+) only; ")
HOLDS = re.compile(r"^to ALL: ([A-Z]+) holds (.+); whoever attacks them makes an enemy\.$")
PEACE = re.compile(r"^to ALL: ([A-Z]+) takes no centre of another power this season\.$")


def expert_games(seeds: list[int], max_phases: int = 8) -> list[tuple[dict[str, Any], dict[str, Any], dict]]:
    """Experts (bot seed = game seed * 10 + power index) in seeded games with one negotiation round; per
    negotiation round: (views at negotiation, the experts' decisions, the orders they gave next)."""
    record = []
    for seed in seeds:
        env = DiplomacyEnv(max_phases=max_phases, negotiation_rounds=1)
        observations, infos = env.reset(seed=seed)
        bots = {power: ExpertBot(seed=seed * 10 + i, agent=power) for i, power in enumerate(POWERS)}
        while env.agents:
            decisions = {power: bots[power].act(observations[power], infos[power]) for power in env.agents}
            negotiating = infos[env.agents[0]]["view"]["stage"] == "negotiation"
            views = {power: infos[power]["view"] for power in env.agents}
            observations, _, _, _, infos = env.step({power: d.action for power, d in decisions.items()})
            if negotiating:
                orders = {power: bots[power].act(observations[power], infos[power]) for power in env.agents}
                given = {power: order.action.splitlines() for power, order in orders.items()}
                record.append((views, decisions, given))
    return record


@pytest.fixture(scope="module")
def games() -> list[tuple[dict[str, Any], dict[str, Any], dict]]:
    return expert_games([0, 1, 2, 1_000_000])


def destination(order: str) -> str | None:
    words = order.split()
    return words[words.index("-") + 1][:3] if "-" in words else None


def test_expert_messages_keep_the_format_and_go_to_specific_powers(games) -> None:
    recipients: Counter[str] = Counter()
    for views, decisions, _ in games:
        for power, decision in decisions.items():
            lines = decision.action.splitlines()
            assert decision.intention == "SETUP" and decision.reason and "\n" not in decision.reason
            assert 0 < len(lines) <= MAX_MESSAGES_PER_ROUND
            assert all(len(line.split(": ", 1)[1]) <= MAX_MESSAGE_CHARS for line in lines)
            assert resolve_messages(decision.action, power, views[power]["alive"]).invalid_count == 0
            recipients.update("ALL" if line.startswith("to ALL:") else "private" for line in lines)
    assert recipients["private"] > 50 and recipients["ALL"] > 10


def test_expert_messages_say_what_its_own_orders_then_do(games) -> None:
    kinds: Counter[str] = Counter()
    for views, decisions, orders_of in games:
        for power, decision in decisions.items():
            view, orders = views[power], orders_of[power]
            moves_into = {destination(order) for order in orders if order.split()[2] == "-"}
            for line in decision.action.splitlines():
                if match := SUPPORT.match(line):
                    for part in match[2].split(", and "):
                        supported, mine = re.fullmatch(r"your (.+) with my (.+)", part).groups()
                        supported = supported.removesuffix(" to hold")
                        assert f"{mine} S {supported}" in orders, (line, orders)
                        assert supported.split(" - ")[0] in view["units"][match[1]]
                    kinds["support offer"] += 1
                elif match := REQUEST.match(line):
                    assert match[2] in orders and match[3] in view["units"][match[1]]
                    assert destination(match[2]) in neighbours(*unit_type_and_loc(match[3]))
                    kinds["support request"] += 1
                elif match := ALLIANCE.match(line):
                    partner = match[1]
                    places = set(view["centers"][partner]) | {unit[2:5] for unit in view["units"][partner]}
                    assert not moves_into & places, (line, orders)
                    kinds["alliance"] += 1
                elif match := DMZ.match(line):
                    zone = match[2]
                    assert zone not in {destination(order) for order in orders}, (line, orders)
                    assert zone in move_destinations(view["units"][power])
                    assert zone in move_destinations(view["units"][match[1]])
                    kinds["dmz"] += 1
                elif match := QUARREL.match(line):
                    owners = {name for name in POWERS if name != power
                              and moves_into & set(view["centers"][name])}
                    assert owners == set(match[2].split(" and ")), (line, orders)
                    kinds["public"] += 1
                elif match := HOLDS.match(line):
                    staying = {order.split()[1][:3] for order in orders if order.split()[2] != "-"}
                    assert set(match[2].split(", ")) <= staying & set(view["centers"][power])
                    kinds["public"] += 1
                elif PEACE.match(line):
                    foreign = {c for name in POWERS if name != power for c in view["centers"][name]}
                    assert not moves_into & foreign, (line, orders)
                    kinds["public"] += 1
                else:
                    raise AssertionError(f"unknown expert message {line!r}")
    assert set(kinds) == {"support offer", "support request", "alliance", "dmz", "public"}, kinds


def test_expert_messages_are_deterministic_per_seed_and_vary_with_it() -> None:
    env = DiplomacyEnv(max_phases=2)
    observations, infos = env.reset(seed=6)
    again = {power: ExpertBot(seed=3, agent=power).act(observations[power], infos[power]) for power in POWERS}
    first = {power: ExpertBot(seed=3, agent=power).act(observations[power], infos[power]) for power in POWERS}
    assert first == again
    others = [{power: ExpertBot(seed=seed, agent=power).act(observations[power], infos[power]).action
               for power in POWERS} for seed in range(4, 12)]
    assert any(other != {power: d.action for power, d in first.items()} for other in others)
    assert repr(expert_games([4], max_phases=3)) == repr(expert_games([4], max_phases=3))


def test_expert_says_nothing_in_later_rounds() -> None:
    env = DiplomacyEnv(max_phases=1, negotiation_rounds=2)
    observations, infos = env.reset(seed=2)
    bots = {power: ExpertBot(seed=1, agent=power) for power in POWERS}
    first = {power: bots[power].act(observations[power], infos[power]) for power in POWERS}
    observations, _, _, _, infos = env.step({power: d.action for power, d in first.items()})
    assert infos["FRANCE"]["view"]["negotiation_round"] == 2
    second = {power: bots[power].act(observations[power], infos[power]) for power in POWERS}
    assert all(d.action for d in first.values()) and not any(d.action for d in second.values())


def test_private_messages_reach_only_their_addressee_public_ones_everyone() -> None:
    env = DiplomacyEnv(max_phases=2)
    observations, infos = env.reset(seed=12)
    bots = {power: ExpertBot(seed=i, agent=power) for i, power in enumerate(POWERS)}
    decisions = {power: bots[power].act(observations[power], infos[power]).action for power in POWERS}
    observations, _, _, _, infos = env.step(decisions)
    sent = [(sender, *line.split(": ", 1))
            for sender, action in decisions.items() for line in action.splitlines()]
    assert sent
    for sender, to, text in sent:
        recipient = to.removeprefix("to ")
        seen_by = {power for power in POWERS if any(
            m["sender"] == sender and m["text"] == text for m in infos[power]["view"]["messages"])}
        shown_to = {power for power in POWERS if f"from {sender}: {text}" in observations[power]}
        if recipient == "ALL":
            assert seen_by == set(POWERS) and shown_to == set(POWERS) - {sender}
            assert all(f"public from {sender}: {text}" in observations[p] for p in POWERS if p != sender)
        else:
            assert seen_by == {sender, recipient} and shown_to == {recipient}, (sender, recipient, text)
            assert f"private from {sender}: {text}" in observations[recipient]
        assert f"{'public to all' if recipient == 'ALL' else f'private to {recipient}'}: {text}" in \
            observations[sender]


def test_observation_bounds_the_messages_it_shows() -> None:
    env = DiplomacyEnv(max_phases=1, negotiation_rounds=2)
    env.reset()
    for round_ in (1, 2):  # every other power floods FRANCE; FRANCE sends 8 lines a round
        actions = {power: "\n".join(f"to FRANCE: r{round_} {power} #{i}" for i in range(8))
                   for power in POWERS if power != "FRANCE"}
        actions["FRANCE"] = "\n".join(f"to {'ALL' if i % 2 else 'ITALY'}: r{round_} mine #{i}"
                                      for i in range(8))
        observations, _, _, _, infos = env.step(actions)
    text = observations["FRANCE"]
    assert len(infos["FRANCE"]["view"]["messages"]) == 2 * (6 * 8 + 8)  # the view keeps them all
    shown = re.findall(r"^  \[round \d\] private from [A-Z]+: (.*)$", text, re.MULTILINE)
    assert len(shown) == MAX_RECEIVED_SHOWN and shown[-1] == "r2 TURKEY #7"  # the latest ones
    assert f"({2 * 6 * 8 - MAX_RECEIVED_SHOWN} earlier messages not shown)" in text
    mine = re.findall(r"^  \[round \d\] (?:private to ITALY|public to all): (.*)$", text, re.MULTILINE)
    assert mine == [f"r2 mine #{i}" for i in range(MAX_SENT_SHOWN)]
    assert "r1 mine" not in text and "r1 AUSTRIA" not in text
    assert "private from ITALY" not in observations["GERMANY"] and "r2 mine #1" in observations["GERMANY"]


def test_message_features_count_from_the_view() -> None:
    env = DiplomacyEnv(max_phases=1, negotiation_rounds=1, start_years=0)
    env.reset()
    actions = {"GERMANY": "to FRANCE: hi\nto FRANCE: again\nto ALL: news", "ITALY": "to FRANCE: ciao",
               "ENGLAND": "to ALL: hello", "RUSSIA": "to TURKEY: secret", "FRANCE": "to ITALY: x\nto ALL: y"}
    _, _, _, _, infos = env.step(actions)
    features = infos["FRANCE"]["features"]
    assert features["messages_received"] == 5 and features["messages_sent"] == 2
    assert features["private_messages_received"] == 3 and features["public_messages_received"] == 2
    assert features["private_messages_sent"] == 1 and features["private_senders"] == 2
    assert features["threatening_senders"] == 0  # in 1901 no foreign unit can move into a French centre
    turkey = infos["TURKEY"]["features"]
    assert turkey["private_messages_received"] == 1 and turkey["public_messages_received"] == 3
    assert turkey["private_senders"] == 1 and turkey["messages_sent"] == 0


def test_threatening_senders_are_powers_whose_units_reach_my_centres() -> None:
    env = DiplomacyEnv(max_phases=1, negotiation_rounds=1, start_years=0)
    _, infos = env.reset()
    state = json.loads(json.dumps(infos["FRANCE"]["state"]))
    state["engine"]["units"]["GERMANY"] = ["A BUR", "A BER", "F KIE"]  # A BUR reaches PAR and MAR
    env.reset(options={"state": state})
    _, _, _, _, infos = env.step({"GERMANY": "to FRANCE: peace?", "ITALY": "to ALL: hello"})
    assert infos["FRANCE"]["features"]["threatening_senders"] == 1
    assert infos["FRANCE"]["features"]["private_senders"] == 1
