"""Diplomacy env rules on hand-made positions: invalid orders hold, rewards, builds, elimination, solo win,
the phase limit, private messages (canaries), text faithfulness and features."""

from __future__ import annotations

import json
import re
from typing import Any

from coplay_envs.diplomacy.env import DiplomacyEnv
from coplay_envs.diplomacy.orders import POWERS


def position(phase: str, units: dict[str, list[str]], centers: dict[str, list[str]],
             negotiation_rounds: int = 0, max_phases: int = 20) -> DiplomacyEnv:
    """An env reset into a hand-made position (powers missing from `units`/`centers` have none)."""
    env = DiplomacyEnv(max_phases=max_phases, negotiation_rounds=negotiation_rounds)
    _, infos = env.reset()
    state = json.loads(json.dumps(infos["FRANCE"]["state"]))
    engine = state["engine"]
    engine["name"] = phase
    engine["units"] = {p: list(units.get(p, [])) for p in POWERS}
    engine["centers"] = {p: list(centers.get(p, [])) for p in POWERS}
    engine["influence"] = {p: list(centers.get(p, [])) for p in POWERS}
    engine["retreats"] = {p: {} for p in POWERS}
    state["agents"] = [p for p in POWERS if units.get(p) or centers.get(p)]
    state["stage"], state["round"] = (("negotiation", 1) if negotiation_rounds and phase.endswith("M")
                                      else ("orders", 0))
    env.reset(options={"state": state})
    return env


def units_of(info: dict[str, Any], power: str) -> list[str]:
    return sorted(info["view"]["units"][power])


def test_invalid_orders_are_dropped_and_those_units_hold() -> None:
    env = DiplomacyEnv(negotiation_rounds=0)
    env.reset()
    _, rewards, _, _, infos = env.step({"FRANCE": "A PAR - MUN\nF BRE - MAO\nattack!"})
    assert units_of(infos["FRANCE"], "FRANCE") == ["A MAR", "A PAR", "F MAO"]
    assert infos["FRANCE"]["invalid_action"] == 2 + 2  # two bad lines, PAR and MAR unordered
    assert infos["FRANCE"]["invalid_lines"] == ["A PAR - MUN", "attack!"]
    assert infos["FRANCE"]["view"]["last_orders"]["FRANCE"] == ["F BRE - MAO"]
    assert infos["GERMANY"]["invalid_action"] == 3  # no action at all: every unit holds, each counted
    assert units_of(infos["GERMANY"], "GERMANY") == ["A BER", "A MUN", "F KIE"]
    assert set(rewards.values()) == {0.0}


def test_rewards_follow_supply_centres_and_builds_happen() -> None:
    env = DiplomacyEnv(negotiation_rounds=0)
    env.reset()
    env.step({"FRANCE": "A PAR - BUR\nF BRE - MAO\nA MAR - SPA"})
    _, rewards, _, _, infos = env.step({"FRANCE": "A BUR - BEL\nF MAO - POR\nA SPA H"})
    assert rewards["FRANCE"] == 3.0 and rewards["GERMANY"] == 0.0
    france = infos["FRANCE"]
    assert france["score"] == 6 and france["view"]["phase"] == "W1901A"
    assert france["view"]["build_counts"]["FRANCE"] == 3 and france["features"]["my_build_count"] == 3
    assert sorted(france["legal_orders"]) == ["BRE", "MAR", "PAR"]
    _, rewards, _, _, infos = env.step({"FRANCE": "A PAR B\nF BRE B\nA MAR B\nWAIVE"})
    assert rewards["FRANCE"] == 0.0 and infos["FRANCE"]["invalid_action"] == 1  # a 4th build line
    assert len(infos["FRANCE"]["view"]["units"]["FRANCE"]) == 6
    assert infos["FRANCE"]["view"]["phase"] == "S1902M"


def test_truncated_after_twenty_phases_played_negotiation_and_skipped_phases_do_not_count() -> None:
    env = DiplomacyEnv()  # 20 phases, 1 negotiation round before each movement phase
    env.reset()
    steps, truncations = 0, []
    while env.agents:
        _, rewards, terminated, truncated, infos = env.step({})
        steps += 1
        truncations.append(all(truncated.values()))
    # All units hold: no retreats, no adjustments (skipped by the engine), 20 movement phases = 10 years.
    assert steps == 40 and truncations == [False] * 39 + [True]
    assert not any(terminated.values())
    assert infos["FRANCE"]["view"]["phases_played"] == 20 and infos["FRANCE"]["view"]["phase"] == "S1911M"
    assert rewards == {p: (4 if p == "RUSSIA" else 3) / 18 for p in POWERS}
    assert env.step({"FRANCE": "A PAR H"}) == ({}, {}, {}, {}, {})


def test_eliminated_power_is_terminated_and_leaves() -> None:
    env = position("F1901M", {"AUSTRIA": ["A GAL"], "FRANCE": ["A PAR"], "RUSSIA": ["A MOS"]},
                   {"FRANCE": ["PAR"], "RUSSIA": ["MOS"]})
    assert env.agents == ["AUSTRIA", "FRANCE", "RUSSIA"]
    _, _, terminated, _, infos = env.step({})
    assert infos["AUSTRIA"]["view"]["phase"] == "W1901A"
    assert infos["AUSTRIA"]["view"]["build_counts"]["AUSTRIA"] == -1
    observations, rewards, terminated, truncated, infos = env.step({})
    assert terminated == {"AUSTRIA": True, "FRANCE": False, "RUSSIA": False}
    assert rewards["AUSTRIA"] == 0.0 and infos["AUSTRIA"]["invalid_action"] == 1  # the missing disband
    assert env.agents == ["FRANCE", "RUSSIA"]
    assert (infos["AUSTRIA"]["legal_orders"] == {}
            and "NOW: nothing; the game is over for you." in observations["AUSTRIA"])


def test_eighteen_centres_win_outright_and_end_the_game() -> None:
    france = ["BRE", "MAR", "PAR", "SPA", "POR", "LON", "LVP", "EDI", "BER", "KIE", "MUN", "HOL", "DEN",
              "NWY", "SWE", "ROM", "NAP"]
    env = position("F1901M", {"FRANCE": ["A BUR"], "RUSSIA": ["A MOS"], "TURKEY": ["A CON"]},
                   {"FRANCE": france, "RUSSIA": ["MOS", "SEV", "STP", "WAR"],
                    "TURKEY": ["ANK", "CON", "SMY"]})
    _, rewards, terminated, truncated, infos = env.step({"FRANCE": "A BUR - BEL"})
    assert terminated == dict.fromkeys(["FRANCE", "RUSSIA", "TURKEY"], True)
    assert not any(truncated.values()) and env.agents == []
    assert rewards["FRANCE"] == 1.0 + 18 / 18 and infos["FRANCE"]["score"] == 18
    assert rewards["RUSSIA"] == 4 / 18 and infos["FRANCE"]["features"]["solo_win"]


def test_retreat_phase_orders_and_default_disband() -> None:
    env2 = position("S1901M", {"FRANCE": ["A BUR", "A RUH"], "GERMANY": ["A MUN"]},
                    {"FRANCE": ["PAR"], "GERMANY": ["MUN"]})
    _, _, _, _, infos = env2.step({"FRANCE": "A BUR - MUN\nA RUH S A BUR - MUN", "GERMANY": "A MUN H"})
    germany = infos["GERMANY"]
    assert germany["view"]["phase"] == "S1901R"
    assert germany["view"]["dislodged"]["GERMANY"] == {"A MUN": ["BER", "BOH", "KIE", "SIL", "TYR"]}
    assert "A MUN R BOH" in germany["legal_orders"]["MUN"] and "A MUN D" in germany["legal_orders"]["MUN"]
    assert infos["FRANCE"]["legal_actions"] == [""]  # nothing to retreat: the empty action
    _, _, _, _, infos = env2.step({"GERMANY": "retreat a mun to boh", "FRANCE": "A MUN H"})
    assert units_of(infos["GERMANY"], "GERMANY") == ["A BOH"]
    assert infos["FRANCE"]["invalid_action"] == 1 and infos["GERMANY"]["invalid_action"] == 0
    env2 = position("S1901M", {"FRANCE": ["A BUR", "A RUH"], "GERMANY": ["A MUN"]},
                    {"FRANCE": ["PAR"], "GERMANY": ["MUN"]})
    env2.step({"FRANCE": "A BUR - MUN\nA RUH S A BUR - MUN", "GERMANY": "A MUN H"})
    _, _, _, _, infos = env2.step({})  # a dislodged unit without an order is disbanded, and that counts
    assert units_of(infos["GERMANY"], "GERMANY") == [] and infos["GERMANY"]["invalid_action"] == 1
    assert infos["GERMANY"]["view"]["last_results"] == {"A MUN": ["disband"]}


def test_private_messages_reach_only_their_recipients() -> None:
    env = DiplomacyEnv(max_phases=4, negotiation_rounds=2)
    observations, infos = env.reset()
    seen_by_recipient = 0
    while env.agents:
        actions = {}
        if infos[env.agents[0]]["view"]["stage"] == "negotiation":
            for i, power in enumerate(env.agents):
                recipient = env.agents[(i + 1) % len(env.agents)]
                actions[power] = (f"to {recipient}: CANARY-{power}-{recipient} meet me\n"
                                  f"to ALL: public from {power}")
        observations, _, _, _, infos = env.step(actions)
        for power, info in infos.items():
            seen = json.dumps([observations[power], info["view"], info["features"], info["legal_actions"],
                               info["legal_orders"]])
            for canary in re.findall(r"CANARY-(\w+)-(\w+)", seen):
                assert power in canary, f"{power} sees the private message {canary}"
            if f"-{power} meet me" in seen:
                seen_by_recipient += 1
    assert seen_by_recipient > 0  # the check above can fail: recipients do see their messages


def test_observation_text_parses_back_into_the_board() -> None:
    env = DiplomacyEnv(negotiation_rounds=0)
    observations, infos = env.reset()
    observations, _, _, _, infos = env.step({"FRANCE": "A PAR - BUR\nF BRE - MAO",
                                             "RUSSIA": "F STP/SC - BOT"})
    text, view = observations["ITALY"], infos["ITALY"]["view"]
    board = {power: units for power, units, _ in
             re.findall(r"^([A-Z]+): units (.*) \| centres (.*)$", text, re.MULTILINE)}
    for power in POWERS:
        unit_text, center_text = re.search(rf"^{power}: units (.*) \| centres (.*)$", text,
                                           re.MULTILINE).groups()
        assert (unit_text.split(", ") if unit_text != "none" else []) == view["units"][power]
        assert (center_text.split(", ") if center_text != "none" else []) == view["centers"][power]
    assert len(board) == 7 and "F BOT" in board["RUSSIA"]
    assert "Last phase S1901M orders:" in text and "FRANCE: A PAR - BUR; F BRE - MAO" in text
    for loc, orders in infos["ITALY"]["legal_orders"].items():
        assert f"  {loc}: {' | '.join(orders)}" in text
    assert text.rstrip().splitlines()[-1].startswith("NOW: write one order per line")


def test_features_read_threats_and_targets_from_the_view() -> None:
    env = position("S1901M", {"FRANCE": ["A PAR", "A MAR", "F BRE"], "GERMANY": ["A BUR"]},
                   {"FRANCE": ["PAR", "MAR", "BRE"], "GERMANY": ["MUN"]})
    features = env._infos["FRANCE"]["features"]
    assert features["threatened_home_centers"] == 2  # A BUR reaches PAR and MAR, not BRE
    assert features["reachable_neutral_centers"] == 1  # SPA (from MAR)
    assert features["neutral_centers"] == 34 - 4 and features["my_rank"] == 1 and features["center_lead"] == 2


def test_render_shows_the_board_without_messages() -> None:
    env = DiplomacyEnv(render_mode="ansi")
    env.reset()
    env.step({"FRANCE": "to GERMANY: CANARY-private"})
    text = env.render()
    assert "FRANCE: units F BRE, A MAR, A PAR | centres BRE, MAR, PAR" in text
    assert "CANARY" not in text and "stage orders" in text
