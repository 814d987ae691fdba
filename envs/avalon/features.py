"""Avalon features: a flat dict of named numbers and booleans computed from one seat's `view` only
(`text.build_view`), the vocabulary skills are written in (docs/game-contract.md). Never reads the hidden
state and never imports `coplay`.

Features (all from the seat's own view):
- `quest` (int, 1..5): the current quest number; `proposal` (int, 1..5): the attempt for this quest.
- `rejections` (int): rejected proposals for the current quest (proposal - 1).
- `successes`, `failures` (int): quests won by each side so far.
- `good_needs`, `evil_needs` (int): quests each side still needs to win (3 - successes, 3 - failures).
- `team_size` (int): seats the current quest needs.
- `is_good`, `is_evil` (bool): my side. `is_merlin`, `is_servant`, `is_minion`, `is_assassin` (bool): my role.
- `known_evil` (int): evil seats I know (Merlin 2, evil seats 1, Servants 0).
- `phase_propose`, `phase_discuss`, `phase_vote`, `phase_quest`, `phase_assassinate`, `game_over` (bool).
- `my_turn` (bool): I must act now. `i_am_leader` (bool). `on_team` (bool): I am on the proposed team.
- `team_known_evil` (int): seats of the proposed team I know to be evil (me included if I am evil).
- `team_has_known_evil` (bool): team_known_evil > 0.
- `last_quest_fails` (int): fail cards in the last quest (0 before any quest).
- `fails_on_my_quests` (int): fail cards summed over the quests I was on.
- `last_vote_approvals` (int): approvals in the last completed vote (0 before any).
- `my_approvals`, `my_rejections` (int): my votes so far.
- `messages` (int): messages posted so far by all seats; `my_messages` (int): by me.
- `won` (bool): the game is over and my side won.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from coplay_envs.avalon.rules import NUM_SEATS, WINS_NEEDED


@dataclass
class HistoryTally:
    """Per-seat counts over the public history, grown event by event (the history is append-only), so an
    env can keep one per game instead of rescanning the history for every seat and step."""

    events_seen: int = 0
    last_approvals: int = 0
    messages: int = 0
    approvals: list[int] = field(default_factory=lambda: [0] * NUM_SEATS)
    rejections: list[int] = field(default_factory=lambda: [0] * NUM_SEATS)
    messages_by_seat: list[int] = field(default_factory=lambda: [0] * NUM_SEATS)
    fails_on_quests_of: list[int] = field(default_factory=lambda: [0] * NUM_SEATS)

    def add(self, history: list[dict[str, Any]]) -> HistoryTally:
        """Count the events of `history` not seen yet; returns self."""
        for event in history[self.events_seen:]:
            kind = event["kind"]
            if kind == "vote" and not event["auto"]:
                self.last_approvals = event["approvals"]
                for seat, vote in enumerate(event["votes"]):
                    self.approvals[seat] += vote == "approve"
                    self.rejections[seat] += vote == "reject"
            elif kind == "message":
                self.messages += 1
                self.messages_by_seat[event["seat"]] += 1
            elif kind == "quest":
                for seat in event["team"]:
                    self.fails_on_quests_of[seat] += event["fails"]
        self.events_seen = len(history)
        return self


def features_from_view(view: dict[str, Any],
                       tally: HistoryTally | None = None) -> dict[str, int | float | bool]:
    """The named features above, from `view` alone (`tally`: the same view history already counted)."""
    seat = view["seat"]
    known = set(view["known_evil"])
    if view["side"] == "evil":
        known.add(seat)
    if tally is None:
        tally = HistoryTally().add(view["history"])
    results = view["quest_results"]
    successes, failures = results.count("success"), results.count("fail")
    team = view["team"]
    team_known_evil = sum(1 for s in team if s in known)
    phase, role = view["phase"], view["role_id"]
    return {
        "quest": min(view["quest"], 4) + 1,
        "proposal": view["proposal"] + 1,
        "rejections": view["proposal"],
        "successes": successes,
        "failures": failures,
        "good_needs": WINS_NEEDED - successes,
        "evil_needs": WINS_NEEDED - failures,
        "team_size": view["team_size"],
        "is_good": view["side"] == "good",
        "is_evil": view["side"] == "evil",
        "is_merlin": role == "merlin",
        "is_servant": role == "servant",
        "is_minion": role == "minion",
        "is_assassin": role == "assassin",
        "known_evil": len(view["known_evil"]),
        "phase_propose": phase == "propose",
        "phase_discuss": phase == "discuss",
        "phase_vote": phase == "vote",
        "phase_quest": phase == "quest",
        "phase_assassinate": phase == "assassinate",
        "game_over": phase == "over",
        "my_turn": bool(view["my_turn"]),
        "i_am_leader": view["leader"] == seat and phase != "over",
        "on_team": seat in team,
        "team_known_evil": team_known_evil,
        "team_has_known_evil": team_known_evil > 0,
        "last_quest_fails": view["quest_fails"][-1] if view["quest_fails"] else 0,
        "fails_on_my_quests": tally.fails_on_quests_of[seat],
        "last_vote_approvals": tally.last_approvals,
        "my_approvals": tally.approvals[seat],
        "my_rejections": tally.rejections[seat],
        "messages": tally.messages,
        "my_messages": tally.messages_by_seat[seat],
        "won": phase == "over" and view["winner"] == view["side"],
    }
