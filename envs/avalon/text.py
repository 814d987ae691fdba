"""What one Avalon seat may know (`build_view`) and that view as the seat's observation text (`render`).

Never imports `coplay`, PettingZoo or gymnasium. The observation is rendered from the view alone, so nothing
hidden can reach the text that the view does not hold.

What each role learns (and nothing else, for the whole game, game end included):
- every seat: its own seat, role label and side, and the public history: every proposal (leader, team), every
  message, every completed vote seat by seat, every quest's team, number of fails and result, the
  assassination target and whether it hit, the winner and the reason;
- Merlin: the seats of the evil side, as "evil" (not which seat is the Minion and which the Assassin);
- Minion and Assassin: the other evil seat, as "evil" (not its role);
- Servant: nothing more.
Never shown to anyone: other seats' roles, votes before all five are in, who played a fail. Role labels:
a seat's texts name its own role only; the Assassin's texts also name the Merlin role (the one it hunts),
never next to a seat. The assassination is described as the evil side's, never by the Assassin's label;
the seat that names the target acts in public (`acting_seat`, as at the table), and nothing follows but the
end of the game.
"""

from __future__ import annotations

from typing import Any

from coplay_envs.avalon.rules import (
    MAX_PROPOSALS,
    NUM_SEATS,
    QUEST_SIZES,
    SAY_TEMPLATE,
    SEATS,
    AvalonState,
    format_team,
    side_of,
    team_size,
)

DEFAULT_ROLE_NAMES: dict[str, str] = {"merlin": "Merlin", "servant": "Servant", "minion": "Minion",
                                      "assassin": "Assassin"}

ROLE_GOALS: dict[str, str] = {
    "merlin": "Steer teams away from the evil seats without being obvious: if the good side wins three "
              "quests, the evil side gets one guess at your seat and wins if it is right.",
    "servant": "Find the evil seats from proposals, votes, messages and quest results; keep them off teams.",
    "minion": "Help the evil side fail three quests or get five proposals rejected; stay unsuspected.",
    "assassin": "Help the evil side fail three quests or get five proposals rejected. If the good side wins "
                "three quests, you name the seat you believe is {merlin}; naming it wins for evil.",
}


def seat_name(seat: int) -> str:
    return SEATS[seat]


def known_evil_seats(state: AvalonState, seat: int) -> list[int]:
    """Merlin: both evil seats; an evil seat: its teammate; a Servant: none."""
    role = state.roles[seat]
    if role == "merlin" or side_of(role) == "evil":
        return [s for s in range(NUM_SEATS) if s != seat and side_of(state.roles[s]) == "evil"]
    return []


def build_view(state: AvalonState, seat: int, role_names: dict[str, str]) -> dict[str, Any]:
    """Everything `seat` may know, JSON-serialisable. Shares the (immutable) public event dicts."""
    role = state.roles[seat]
    acting = state.acting_seat
    return {
        "seat": seat,
        "agent": seat_name(seat),
        "num_seats": NUM_SEATS,
        "role": role_names[role],
        "role_id": role,
        "side": side_of(role),
        "known_evil": known_evil_seats(state, seat),
        "merlin_label": role_names["merlin"] if role == "assassin" else None,
        "quest_sizes": list(QUEST_SIZES),
        "discussion_rounds": state.discussion_rounds,
        "auto_approve_fifth": state.auto_approve_fifth,
        "max_message_chars": state.max_message_chars,
        "phase": state.phase,
        "quest": state.quest,
        "proposal": state.proposal,
        "team_size": team_size(state),
        "leader": state.leader,
        "team": list(state.team),
        "discussion_round": state.discussion_round,
        "acting_seat": acting,
        "my_turn": acting == seat,
        "quest_results": list(state.quest_results),
        "quest_fails": list(state.quest_fails),
        "history": list(state.events),
        "winner": state.winner,
        "reason": state.reason,
    }


def _knowledge_line(view: dict[str, Any]) -> str:
    known = ", ".join(seat_name(s) for s in view["known_evil"])
    if view["role_id"] == "merlin":
        return f"You know the evil seats: {known} (not which evil role each holds)."
    if view["side"] == "evil":
        return f"Your evil teammate: {known} (you do not know its role). The other seats are good."
    return "You know only your own role; the other seats are two evil and two good seats you must tell apart."


def event_lines(event: dict[str, Any]) -> list[str]:
    kind = event["kind"]
    if kind == "proposal":
        return [f"Quest {event['quest'] + 1}, proposal {event['attempt'] + 1}: {seat_name(event['leader'])} "
                f"(leader) proposed team {format_team(event['team'])}."]
    if kind == "message":
        return [f"  {seat_name(event['seat'])} says: \"{event['text']}\""]
    if kind == "vote":
        if event["auto"]:
            return ["  Fifth proposal: approved automatically (no vote)."]
        verdict = "approved" if event["approved"] else "rejected"
        by_seat = ", ".join(f"{seat_name(s)} {v}" for s, v in enumerate(event["votes"]))
        return [f"  Votes: {by_seat} -> {verdict} ({event['approvals']} of {NUM_SEATS} approve)."]
    if kind == "quest":
        return [f"Quest {event['quest'] + 1} result: {event['result'].upper()} ({event['fails']} fail "
                f"card{'s' if event['fails'] != 1 else ''}) with team {format_team(event['team'])}."]
    if kind == "assassination":
        outcome = "hit: that seat was the target role" if event["hit"] else "missed"
        return [f"The evil side named {seat_name(event['target'])} as its assassination target: {outcome}."]
    if kind == "end":
        return [f"Game over: {event['winner']} wins ({event['reason']})."]
    return [f"Unknown event {kind}."]


def _prompt(view: dict[str, Any]) -> str:
    phase, acting = view["phase"], view["acting_seat"]
    team = format_team(view["team"])
    if phase == "over":
        mine = "you win (+1)" if view["winner"] == view["side"] else "you lose (-1)"
        return f"The game is over: {view['winner']} wins, {mine}."
    if not view["my_turn"]:
        doing = {"propose": "propose a team", "discuss": "post a message", "vote": "vote",
                 "quest": "play a quest card",
                 "assassinate": "name its assassination target (evil side)"}[phase]
        return f"Waiting for {seat_name(acting)} to {doing}."
    if phase == "propose":
        return (f"You are the leader: propose a team of {view['team_size']} seats for quest "
                f"{view['quest'] + 1}, e.g. `propose {format_team(list(range(view['team_size'])))}`.")
    if phase == "discuss":
        return (f"Discussion round {view['discussion_round'] + 1} of {view['discussion_rounds']} on team "
                f"{team}: post one message with `say <text>` (at most {view['max_message_chars']} "
                "characters, printable ASCII).")
    if phase == "vote":
        return f"Vote on team {team}: `approve` or `reject` (votes are revealed together)."
    if phase == "quest":
        if view["side"] == "good":
            return f"You are on the quest with team {team}: play `success` (good seats can only succeed)."
        return (f"You are on the quest with team {team}: play `success` or `fail` (one fail fails the quest; "
                "only the number of fails is revealed).")
    return (f"Three quests succeeded. Name the seat you believe is {view['merlin_label']}: "
            "`assassinate <seat>`; naming it wins for evil.")


def history_lines(events: list[dict[str, Any]]) -> list[str]:
    """The public history as text lines (the same for every seat)."""
    return [line for event in events for line in event_lines(event)]


def render(view: dict[str, Any], legal_actions: list[str], history: list[str] | None = None) -> str:
    """The seat's observation: role, knowledge, the full public history, what it must do now.
    `history` may pass `history_lines(view["history"])` precomputed (it is the same for every seat)."""
    results = view["quest_results"]
    board = []
    for q, size in enumerate(view["quest_sizes"]):
        if q < len(results):
            board.append(f"Q{q + 1}({size}) {results[q]} (fails: {view['quest_fails'][q]})")
        elif q == view["quest"] and view["phase"] != "over":
            board.append(f"Q{q + 1}({size}) current")
        else:
            board.append(f"Q{q + 1}({size}) -")
    role_id = view["role_id"]
    goal = (ROLE_GOALS[role_id].format(merlin=view["merlin_label"]) if role_id == "assassin"
            else ROLE_GOALS[role_id])
    fifth = ("approved automatically" if view["auto_approve_fifth"]
             else "voted on; its rejection wins for evil")
    lines = [
        f"Avalon, {view['num_seats']} seats player_0..player_{view['num_seats'] - 1}. "
        f"You are {view['agent']}.",
        f"Your role: {view['role']} ({view['side']} side). {goal}",
        _knowledge_line(view),
        f"Quests: {' | '.join(board)}. Successes {results.count('success')}, fails {results.count('fail')} "
        "(three of either decides; three successes lead to the evil side's assassination guess).",
        f"Now: quest {min(view['quest'], 4) + 1}, proposal {view['proposal'] + 1} of {MAX_PROPOSALS}, "
        f"leader {seat_name(view['leader'])}, phase {view['phase']}."
        + (f" Proposed team: {format_team(view['team'])}." if view["team"] else ""),
        f"Options: {view['discussion_rounds']} discussion round(s) per proposal; "
        f"the fifth proposal is {fifth}.",
        "History:",
    ]
    lines.extend((history if history is not None else history_lines(view["history"])) or ["  (nothing yet)"])
    lines.append(f"To do: {_prompt(view)}")
    if legal_actions:
        note = " (replace <text> with your message)" if SAY_TEMPLATE in legal_actions else ""
        lines.append(f"Legal actions: {' | '.join(legal_actions)}{note}")
    return "\n".join(lines)
