"""The Avalon PettingZoo AEC environment (`AvalonEnv`) and its short `RULES` text for prompts.

Only the acting seat acts (`agent_selection`); every seat's `infos[agent]` carries `legal_actions` (the acting
seat's canonical actions, `[]` for the others; `say <text>` is a template), `view` (what the seat may know,
see `text.py`), `features` (from the view only, see `features.py`), `state` (the full position with hidden
roles, for infrastructure only), `score` (+1/-1 once the game is over, else 0) and `invalid_action` (whether
the seat's latest action was invalid and replaced by its fallback, see `rules.py`). `step` never raises.
`reset(options={"state": S})` restores `infos[...]["state"]` S exactly (the env must be made with the
options S was played under); the deal is the only randomness. Infos are read-only: to stay fast, the views
and the state of one step share the public event dicts (the rules never read them back).

Never imports `coplay`.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from pettingzoo import AECEnv

from coplay_envs.avalon.features import HistoryTally, features_from_view
from coplay_envs.avalon.rules import (
    DEFAULT_MAX_MESSAGE_CHARS,
    MAX_PROPOSALS,
    NUM_SEATS,
    ROLE_IDS,
    AvalonState,
    apply_action,
    legal_actions,
    new_game,
    seat_reward,
)
from coplay_envs.avalon.text import DEFAULT_ROLE_NAMES, build_view, event_lines, render, seat_name
from coplay_envs.core import ObsStr, normalize_action, seed_rng, text_space

RULES: str = """Avalon, 5 seats: Merlin, two Servants (good); Minion, Assassin (evil). Roles are secret.
Merlin knows the evil seats; the evil seats know each other; Servants know only themselves.
Five quests need teams of 2,3,2,3,3. The leader (rotating after every proposal) proposes: `propose 0,2`.
Then each seat posts one message per discussion round: `say <text>` (at most 200 printable characters).
Every seat votes `approve` or `reject`; 3 of 5 approvals send the team, votes are then shown by seat.
Team members play `success` or `fail` (good seats can only succeed); one fail fails the quest, and only
the number of fails is revealed. Three failed quests, or five rejected proposals for one quest, win for evil.
After three successful quests the Assassin names a seat (`assassinate 3`); naming Merlin wins for evil.
Reward at the end: +1 to each seat of the winning side, -1 to each losing seat.
Invalid actions fall back: propose -> leader and next seats; say -> empty; vote -> approve;
quest -> success; assassinate -> lowest other seat."""

_MAX_LABEL_CHARS = 40


def _check_role_names(role_names: dict[str, str] | None) -> dict[str, str]:
    names = dict(DEFAULT_ROLE_NAMES)
    for role, label in (role_names or {}).items():
        if role not in ROLE_IDS:
            raise ValueError(f"role_names key {role!r}; expected one of {ROLE_IDS}")
        if (not isinstance(label, str) or not label or len(label) > _MAX_LABEL_CHARS
                or any(not (32 <= ord(ch) < 127) for ch in label)):
            raise ValueError(f"role_names[{role!r}] = {label!r}; "
                             f"expected 1..{_MAX_LABEL_CHARS} printable ASCII chars")
        names[role] = label
    return names


def observation_max_chars(discussion_rounds: int, max_message_chars: int) -> int:
    """An upper bound on an observation's length: a header, then at most 5x5 proposals, each with its
    messages and vote, 5 quest results, the assassination and the end, plus the legal actions."""
    per_proposal = 400 + NUM_SEATS * discussion_rounds * (max_message_chars + 40)
    return 6000 + 5 * MAX_PROPOSALS * per_proposal


class AvalonEnv(AECEnv):
    """Avalon for seats `player_0..player_4` (PettingZoo AEC). See the module docstring and `rules.py`."""

    metadata = {"name": "avalon_v0", "render_modes": ["human", "ansi"], "is_parallelizable": False}

    def __init__(self, discussion_rounds: int = 1, auto_approve_fifth: bool = False,
                 role_names: dict[str, str] | None = None, max_message_chars: int = DEFAULT_MAX_MESSAGE_CHARS,
                 render_mode: str | None = None) -> None:
        super().__init__()
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r}; expected one of {self.metadata['render_modes']}")
        if int(discussion_rounds) < 0 or int(max_message_chars) < 1:
            raise ValueError(f"discussion_rounds = {discussion_rounds} (>= 0), max_message_chars = "
                             f"{max_message_chars} (>= 1) expected")
        self.discussion_rounds = int(discussion_rounds)
        self.auto_approve_fifth = bool(auto_approve_fifth)
        self.max_message_chars = int(max_message_chars)
        self.role_names = _check_role_names(role_names)
        self.render_mode = render_mode
        self.possible_agents = [seat_name(s) for s in range(NUM_SEATS)]
        obs_space = text_space(observation_max_chars(self.discussion_rounds, self.max_message_chars))
        act_space = text_space(self.max_message_chars + 64)
        self.observation_spaces = {a: obs_space for a in self.possible_agents}
        self.action_spaces = {a: act_space for a in self.possible_agents}
        self._rng: np.random.Generator | None = None
        self._game: AvalonState | None = None
        self._observations: dict[str, ObsStr] = {}
        self._history: list[str] = []  # rendered public history, grown with the (append-only) events
        self._history_events = 0
        self._tally = HistoryTally()
        self.agents = []

    def observation_space(self, agent: str) -> Any:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> Any:
        return self.action_spaces[agent]

    @property
    def game(self) -> AvalonState:
        """The rules state (hidden information included); infrastructure and tests only."""
        if self._game is None:
            raise RuntimeError("AvalonEnv: call reset() before using the game")
        return self._game

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        if seed is not None or self._rng is None:
            self._rng = seed_rng(seed)  # a restored state ignores it; the next plain reset() deals from it
        if options and "state" in options:
            # A JSON round trip: the env never aliases the caller's dict, and S must be JSON anyway.
            game = AvalonState.from_dict(json.loads(json.dumps(options["state"])))
            for key in ("discussion_rounds", "auto_approve_fifth", "max_message_chars"):
                if getattr(game, key) != getattr(self, key):
                    raise ValueError(f"Avalon state key {key!r} = {getattr(game, key)!r}, but this env was "
                                     f"made with {key}={getattr(self, key)!r}; make the env with the same "
                                     f"options")
            self._game = game
        else:
            self._game = new_game(self._rng, self.discussion_rounds, self.auto_approve_fifth,
                                  self.max_message_chars)
        self._history, self._history_events, self._tally = [], 0, HistoryTally()
        self.agents = self.possible_agents[:]
        over = self._game.winner is not None
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: over for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self._refresh()

    def _refresh(self) -> None:
        game = self.game
        state = game.to_dict()
        acting = game.acting_seat
        legal = legal_actions(game)
        tally = self._tally.add(game.events)
        self.infos = {}
        for agent in self.agents:
            seat = int(agent.split("_")[1])
            view = build_view(game, seat, self.role_names)
            self.infos[agent] = {
                "legal_actions": list(legal) if seat == acting else [],
                "view": view,
                "features": features_from_view(view, tally),
                "state": state,
                "score": seat_reward(game, seat),
                "invalid_action": game.invalid[seat],
            }
        self._observations = {}
        for event in game.events[self._history_events:]:
            self._history.extend(event_lines(event))
        self._history_events = len(game.events)
        if acting is not None:
            self.agent_selection = seat_name(acting)
        elif self.agents and getattr(self, "agent_selection", None) not in self.agents:
            self.agent_selection = self.agents[0]

    def observe(self, agent: str) -> ObsStr:
        cached = self._observations.get(agent)
        if cached is None:
            info = self.infos[agent]
            cached = ObsStr(render(info["view"], info["legal_actions"], self._history))
            self._observations[agent] = cached
        return cached

    def step(self, action: Any) -> None:
        agent = getattr(self, "agent_selection", None)
        if agent not in getattr(self, "terminations", {}):  # before reset, or every seat is done and removed
            return
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(None)
            return
        game = self.game
        self._cumulative_rewards[agent] = 0.0
        apply_action(game, normalize_action(action))
        if game.winner is not None:
            self.rewards = {a: seat_reward(game, int(a.split("_")[1])) for a in self.agents}
            self.terminations = {a: True for a in self.agents}
        else:
            self.rewards = {a: 0.0 for a in self.agents}
        self._refresh()
        self._accumulate_rewards()
        if self.render_mode == "human":
            print(self.render())

    def render(self) -> str | None:
        """A spectator's text (roles revealed) for `ansi`/`human`; None without a render mode."""
        if self.render_mode is None or self._game is None:
            return None
        game = self._game
        roles = ", ".join(f"{seat_name(s)} {self.role_names[r]}" for s, r in enumerate(game.roles))
        public = render(build_view(game, 0, self.role_names), []).split("History:", 1)[1]
        return f"Spectator view. Roles: {roles}.\nHistory:{public}"

    def close(self) -> None:
        self._observations = {}
