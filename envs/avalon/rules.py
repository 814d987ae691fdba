"""Avalon for 5 seats as a pure state machine: the deal, whose turn it is, the legal actions, one action
applied with its documented fallback, and the public history every seat sees.

Never imports `coplay`, PettingZoo or gymnasium; text, features and the AEC face live in sibling modules.
Roles are canonical ids here (`merlin`, `servant`, `minion`, `assassin`); display labels belong to `text.py`.

Turn structure (one quest): `propose` (the leader) -> `discuss` (every seat once per round, starting with the
leader, `discussion_rounds` rounds; 0 skips it) -> `vote` (seats 0..4, secret until all five are in; a strict
majority, 3 of 5, approves; a tie rejects, though with 5 voters and no abstention it cannot occur) -> `quest`
(team members in seat order, secret; only the number of fails is revealed; one fail fails the quest). The
leader passes to the next seat after every proposal, approved or not. Five rejected proposals for one quest
win for evil; with `auto_approve_fifth` the fifth proposal skips the vote and goes on the quest. Three
successful quests lead to `assassinate` (the Assassin names another seat; naming Merlin wins for evil,
anything else wins for good); three failed quests win for evil.

Action grammar (case-insensitive, surrounding whitespace ignored) and the fallback for anything else:
- `propose 0,2` (seat numbers, `player_0` also accepted, any order, exactly the quest's team size, distinct)
  -> fallback: the leader and the next seats in order (`leader, leader+1, ...`).
- `say <text>` -> the text is cleaned (non-printable characters dropped, whitespace collapsed) and cut to
  `max_message_chars`; cutting is not an invalid action. Fallback: an empty message.
- `approve` | `reject` (also `vote approve`) -> fallback: `approve`.
- `success` | `fail` (also `play success`); a good seat's `fail` is invalid -> fallback: `success`.
- `assassinate 3` (any seat but the Assassin's own) -> fallback: the lowest-numbered other seat.

There is no randomness after the deal, so the state (`to_dict`) fully determines the continuation.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

NUM_SEATS: int = 5
SEATS: tuple[str, ...] = tuple(f"player_{s}" for s in range(NUM_SEATS))  # the PettingZoo agent names
QUEST_SIZES: tuple[int, ...] = (2, 3, 2, 3, 3)
ROLE_DECK: tuple[str, ...] = ("merlin", "servant", "servant", "minion", "assassin")
ROLE_IDS: tuple[str, ...] = ("merlin", "servant", "minion", "assassin")
EVIL_ROLES: frozenset[str] = frozenset({"minion", "assassin"})
MAX_PROPOSALS: int = 5
WINS_NEEDED: int = 3
DEFAULT_MAX_MESSAGE_CHARS: int = 200
PHASES: tuple[str, ...] = ("propose", "discuss", "vote", "quest", "assassinate", "over")
SAY_TEMPLATE: str = "say <text>"

_SEAT_TOKEN = re.compile(r"(?:player_)?([0-9]+)")
_TEAM_SPLIT = re.compile(r"[,\s]+")
_PRINTABLE = frozenset(chr(c) for c in range(32, 127))


def majority_approves(approvals: int, voters: int) -> bool:
    """A strict majority approves; a tie (possible only with an even number of voters) rejects."""
    return 2 * approvals > voters


def side_of(role: str) -> str:
    """`evil` for the Minion and the Assassin, `good` otherwise."""
    return "evil" if role in EVIL_ROLES else "good"


@dataclass
class AvalonState:
    """The whole position (hidden parts included). Mutated in place by `apply_action`."""

    roles: list[str]
    discussion_rounds: int = 1
    auto_approve_fifth: bool = False
    max_message_chars: int = DEFAULT_MAX_MESSAGE_CHARS
    phase: str = "propose"
    quest: int = 0  # 0-based index of the current quest
    proposal: int = 0  # 0-based attempt for the current quest (= rejections so far)
    leader: int = 0
    team: list[int] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)  # seats still to act in this phase; [0] acts now
    discussion_round: int = 0
    votes: list[str | None] = field(default_factory=lambda: [None] * NUM_SEATS)  # secret until complete
    fails_played: int = 0  # secret until the quest resolves
    quest_results: list[str] = field(default_factory=list)
    quest_fails: list[int] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)  # public history; never mutated once appended
    invalid: list[bool] = field(default_factory=lambda: [False] * NUM_SEATS)  # each seat's latest action
    winner: str | None = None
    reason: str = ""
    steps: int = 0

    @property
    def acting_seat(self) -> int | None:
        return self.pending[0] if self.pending else None

    @property
    def successes(self) -> int:
        return self.quest_results.count("success")

    @property
    def failures(self) -> int:
        return self.quest_results.count("fail")

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable copy (event dicts are immutable once appended, so they are shared)."""
        data = {k: getattr(self, k) for k in self.__dataclass_fields__}
        for key in ("roles", "team", "pending", "votes", "quest_results", "quest_fails", "events", "invalid"):
            data[key] = list(data[key])
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AvalonState:
        """Inverse of `to_dict`, with checks that name the offending key."""
        if not isinstance(data, dict):
            raise TypeError(f"Avalon state must be a dict, got {type(data).__name__}")
        missing = [k for k in cls.__dataclass_fields__ if k not in data]
        if missing:
            raise ValueError(f"Avalon state is missing keys {missing}")
        roles = list(data["roles"])
        if sorted(roles) != sorted(ROLE_DECK):
            raise ValueError(f"Avalon state key 'roles' = {roles!r}; expected a permutation of {ROLE_DECK}")
        if data["phase"] not in PHASES:
            raise ValueError(f"Avalon state key 'phase' = {data['phase']!r}; expected one of {PHASES}")
        state = cls(**{k: data[k] for k in cls.__dataclass_fields__})
        for key in ("roles", "team", "pending", "votes", "quest_results", "quest_fails", "events", "invalid"):
            setattr(state, key, list(getattr(state, key)))
        state.events = [dict(e) for e in state.events]
        return state


def deal(seed: int) -> list[str]:
    """The role of each seat in the game `reset(seed=seed)` deals (the deal is `new_game`'s first draw from
    `seed_rng(seed)`): lets a scheduler seat a player in a chosen role without playing the game."""
    return [ROLE_DECK[i] for i in np.random.default_rng(seed).permutation(NUM_SEATS)]


def new_game(rng: np.random.Generator, discussion_rounds: int = 1, auto_approve_fifth: bool = False,
             max_message_chars: int = DEFAULT_MAX_MESSAGE_CHARS) -> AvalonState:
    """Shuffle the roles and draw the first leader from `rng` (the only random draws of a game)."""
    if discussion_rounds < 0:
        raise ValueError(f"discussion_rounds = {discussion_rounds}; expected >= 0")
    if max_message_chars < 1:
        raise ValueError(f"max_message_chars = {max_message_chars}; expected >= 1")
    roles = [ROLE_DECK[i] for i in rng.permutation(NUM_SEATS)]
    leader = int(rng.integers(NUM_SEATS))
    state = AvalonState(roles=roles, discussion_rounds=int(discussion_rounds),
                        auto_approve_fifth=bool(auto_approve_fifth), max_message_chars=int(max_message_chars),
                        leader=leader)
    _start_proposal(state)
    return state


def team_size(state: AvalonState) -> int:
    return QUEST_SIZES[min(state.quest, len(QUEST_SIZES) - 1)]


def assassin_seat(state: AvalonState) -> int:
    return state.roles.index("assassin")


def format_team(team: list[int]) -> str:
    return ",".join(str(s) for s in sorted(team))


def default_team(state: AvalonState) -> list[int]:
    """The propose fallback: the leader and the seats after it."""
    return sorted((state.leader + i) % NUM_SEATS for i in range(team_size(state)))


def legal_actions(state: AvalonState) -> list[str]:
    """Canonical actions of the acting seat (`[]` when the game is over)."""
    seat = state.acting_seat
    if seat is None:
        return []
    if state.phase == "propose":
        return [f"propose {format_team(list(c))}"
                for c in itertools.combinations(range(NUM_SEATS), team_size(state))]
    if state.phase == "discuss":
        return [SAY_TEMPLATE]
    if state.phase == "vote":
        return ["approve", "reject"]
    if state.phase == "quest":
        return ["success", "fail"] if side_of(state.roles[seat]) == "evil" else ["success"]
    if state.phase == "assassinate":
        return [f"assassinate {s}" for s in range(NUM_SEATS) if s != seat]
    return []


def clean_message(text: str, max_chars: int) -> str:
    """Printable ASCII only, whitespace collapsed to single spaces, cut to `max_chars`."""
    kept = "".join(ch if ch in _PRINTABLE else (" " if ch.isspace() else "") for ch in text)
    return " ".join(kept.split())[:max_chars].rstrip()


def _parse_seat(token: str) -> int | None:
    match = _SEAT_TOKEN.fullmatch(token)
    if match is None:
        return None
    seat = int(match.group(1))
    return seat if 0 <= seat < NUM_SEATS else None


def _parse_team(rest: str, size: int) -> list[int] | None:
    tokens = [t for t in _TEAM_SPLIT.split(rest) if t]
    seats = [_parse_seat(t) for t in tokens]
    if len(seats) != size or any(s is None for s in seats) or len(set(seats)) != size:
        return None
    return sorted(s for s in seats if s is not None)


def _words(action: str) -> list[str]:
    return action.strip().lower().split()


def apply_action(state: AvalonState, action: str) -> bool:
    """Apply `action` (already a `str`) for the acting seat; returns True when it was invalid and the
    fallback was played instead. A no-op returning True when the game is over."""
    seat = state.acting_seat
    if seat is None:
        return True
    phase = state.phase
    invalid = False
    if phase == "propose":
        words = _words(action)
        team = None
        if words and words[0] == "propose":
            team = _parse_team(action.strip().lower()[len("propose"):], team_size(state))
        if team is None:
            invalid, team = True, default_team(state)
        _play_proposal(state, team)
    elif phase == "discuss":
        stripped = action.strip()
        head = stripped[:3].lower()
        if head == "say" and (len(stripped) == 3 or stripped[3].isspace()):
            text = clean_message(stripped[3:], state.max_message_chars)
        else:
            invalid, text = True, ""
        _play_message(state, seat, text)
    elif phase == "vote":
        words = _words(action)
        if words[:1] == ["vote"]:
            words = words[1:]
        if words in (["approve"], ["reject"]):
            vote = words[0]
        else:
            invalid, vote = True, "approve"
        _play_vote(state, seat, vote)
    elif phase == "quest":
        words = _words(action)
        if words[:1] == ["play"]:
            words = words[1:]
        play = words[0] if len(words) == 1 and words[0] in ("success", "fail") else None
        if play is None or (play == "fail" and side_of(state.roles[seat]) == "good"):
            invalid, play = True, "success"
        _play_quest_card(state, play)
    elif phase == "assassinate":
        words = _words(action)
        target = _parse_seat(words[1]) if len(words) == 2 and words[0] == "assassinate" else None
        if target is None or target == seat:
            invalid, target = True, min(s for s in range(NUM_SEATS) if s != seat)
        _play_assassination(state, target)
    state.invalid[seat] = invalid
    state.steps += 1
    return invalid


def _start_proposal(state: AvalonState) -> None:
    state.phase, state.team, state.pending = "propose", [], [state.leader]


def _rotation(start: int) -> list[int]:
    return [(start + i) % NUM_SEATS for i in range(NUM_SEATS)]


def _play_proposal(state: AvalonState, team: list[int]) -> None:
    state.team = team
    state.events.append({"kind": "proposal", "quest": state.quest, "attempt": state.proposal,
                         "leader": state.leader, "team": list(team)})
    if state.discussion_rounds > 0:
        state.phase, state.discussion_round, state.pending = "discuss", 0, _rotation(state.leader)
    else:
        _start_vote(state)


def _play_message(state: AvalonState, seat: int, text: str) -> None:
    state.events.append({"kind": "message", "quest": state.quest, "attempt": state.proposal,
                         "round": state.discussion_round, "seat": seat, "text": text})
    state.pending.pop(0)
    if not state.pending:
        state.discussion_round += 1
        if state.discussion_round < state.discussion_rounds:
            state.pending = _rotation(state.leader)
        else:
            _start_vote(state)


def _start_vote(state: AvalonState) -> None:
    if state.auto_approve_fifth and state.proposal == MAX_PROPOSALS - 1:
        state.events.append({"kind": "vote", "quest": state.quest, "attempt": state.proposal, "votes": [],
                             "approvals": 0, "approved": True, "auto": True})
        state.leader = (state.leader + 1) % NUM_SEATS
        _start_quest(state)
        return
    state.phase, state.votes, state.pending = "vote", [None] * NUM_SEATS, list(range(NUM_SEATS))


def _play_vote(state: AvalonState, seat: int, vote: str) -> None:
    state.votes[seat] = vote
    state.pending.pop(0)
    if state.pending:
        return
    votes = [str(v) for v in state.votes]
    approvals = votes.count("approve")
    approved = majority_approves(approvals, len(votes))
    state.events.append({"kind": "vote", "quest": state.quest, "attempt": state.proposal, "votes": votes,
                         "approvals": approvals, "approved": approved, "auto": False})
    state.votes = [None] * NUM_SEATS
    state.leader = (state.leader + 1) % NUM_SEATS
    if approved:
        _start_quest(state)
        return
    state.proposal += 1
    if state.proposal >= MAX_PROPOSALS:
        _end(state, "evil", "five proposals for one quest were rejected")
    else:
        _start_proposal(state)


def _start_quest(state: AvalonState) -> None:
    state.phase, state.fails_played, state.pending = "quest", 0, sorted(state.team)


def _play_quest_card(state: AvalonState, play: str) -> None:
    state.fails_played += play == "fail"
    state.pending.pop(0)
    if state.pending:
        return
    result = "fail" if state.fails_played >= 1 else "success"
    state.quest_results.append(result)
    state.quest_fails.append(state.fails_played)
    state.events.append({"kind": "quest", "quest": state.quest, "team": list(state.team),
                         "fails": state.fails_played, "result": result})
    state.fails_played = 0
    if state.successes >= WINS_NEEDED:
        state.phase, state.team, state.pending = "assassinate", [], [assassin_seat(state)]
    elif state.failures >= WINS_NEEDED:
        _end(state, "evil", "three quests failed")
    else:
        state.quest += 1
        state.proposal = 0
        _start_proposal(state)


def _play_assassination(state: AvalonState, target: int) -> None:
    hit = state.roles[target] == "merlin"
    state.events.append({"kind": "assassination", "target": target, "hit": hit})
    if hit:
        _end(state, "evil", "three quests succeeded but the assassination found its target")
    else:
        _end(state, "good", "three quests succeeded and the assassination missed")


def _end(state: AvalonState, winner: str, reason: str) -> None:
    state.phase, state.pending, state.team = "over", [], []
    state.winner, state.reason = winner, reason
    state.events.append({"kind": "end", "winner": winner, "reason": reason})


def seat_reward(state: AvalonState, seat: int) -> float:
    """+1 to each seat of the winning side, -1 to the losing side, 0 while the game runs."""
    if state.winner is None:
        return 0.0
    return 1.0 if side_of(state.roles[seat]) == state.winner else -1.0
