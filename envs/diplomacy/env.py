"""Diplomacy as a PettingZoo Parallel env: 7 powers on the standard map, adjudicated by `diplomacy.Game`.

One `step` is one stage for all live powers at once (PettingZoo Parallel: every live agent acts every step):
- a negotiation round (``negotiation_rounds`` of them, default 1, before each movement phase; 0 disables):
  each power's action is message lines ``to FRANCE: <text>`` / ``to ALL: <text>`` (grammar and bounds in
  `orders.py`), delivered only to their recipients; reward 0;
- an engine phase (movement, retreats or adjustments): each power's action holds one order per line;
  orders not in the legal set are dropped and the unit holds (a dislodged unit without an order disbands, a
  missing disband is chosen by the engine's civil-disorder rule); `info["invalid_action"]` counts the dropped
  lines plus the units left without an order. A power with nothing to order in a phase (no retreats, no
  builds) is still stepped: its legal action is the empty string, and any line it sends is invalid.

Horizon: truncated after `max_phases` (default 20) engine phases played. Phases the engine skips (retreats
nobody has, adjustments nobody can make) are not played and do not count; negotiation rounds do not count.
Reward per engine phase = change in the power's supply-centre count; at the end (truncation, a solo win, or
elimination) + centres / 18. A power with no units, centres or dislodged units is eliminated: terminated, and
gone from `agents` after that step. Score (`info["score"]`) = the power's supply centres; 18 wins outright.

Info of each power, every step: ``legal_actions`` (its legal order lines, sorted; ``[""]`` when it has
nothing to order; in negotiation ``""`` and the templates ``to ALL: <text>`` / ``to POWER: <text>``),
``legal_orders`` (orderable location -> sorted legal orders), ``view`` (the board, centre counts, build
counts, the last phase's orders and results, its own legal orders, and only the messages it sent or received
in the latest negotiation: those before the current movement phase, kept through its retreats and
adjustments), ``features`` (`features.py`), ``score``, ``invalid_action`` (a count) and ``invalid_lines``
(the dropped lines), ``state``.

Start position: ``reset(seed=s)`` starts from the seeded position of `start.py`: the board after a number
of years of bot play from the standard 1901 opening, drawn in ``start_years`` (default (1, 3): Spring 1902,
1903 or 1904), by the expert bot with each unit's order replaced by a random legal one with probability
``start_random_share`` (default 0.3). Same seed, same position, bit for bit; different seeds give different
positions (a repeat would need the same draws for dozens of unit orders). ``start_years=0`` keeps the
standard opening for every seed, and ``reset()`` without a seed always gives the standard opening. The
warm-up is not part of the episode: the horizon of ``max_phases`` engine phases counts from the start position
(``phases_played`` is 0 there), so every seed gets the same number of engine phases whatever year it starts
in. Starts are cached per (seed, start_years, start_random_share) in the process, because a GRPO group
resets to the same seed G times.

`info["state"]` is the engine's fast `get_state()` (without its wall-clock timestamp) plus this env's
counters, the messages and the last phase's orders/results; `reset(options={"state": S})` restores it exactly
(a seeded start too: the state holds the position, not the seed). The game itself has no randomness.

Imports `diplomacy` (the engine) and PettingZoo; never imports `coplay`.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from diplomacy import Game
from gymnasium import spaces
from pettingzoo import ParallelEnv

from coplay_envs.core import MAX_ACTION_CHARS, ObsStr, normalize_action, text_space
from coplay_envs.diplomacy.features import compute_features
from coplay_envs.diplomacy.orders import (
    MAX_MESSAGE_CHARS,
    MAX_MESSAGES_PER_ROUND,
    POWERS,
    LegalOrderIndex,
    resolve_messages,
    resolve_orders,
)
from coplay_envs.diplomacy.start import (
    START_RANDOM_SHARE,
    START_YEARS,
    check_random_share,
    parse_start_years,
    play_warm_up,
)
from coplay_envs.diplomacy.text import describe_phase, render_observation, render_public

RULES: str = (
    "Diplomacy, standard map, 7 powers, 34 supply centres; 18 centres win outright.\n"
    "Movement: each unit holds (A PAR H), moves (A PAR - BUR), supports "
    "(F BRE S A PAR - PIC, A MAR S A PAR)\n"
    "or convoys (F NTH C A LON - NWY; the army moves A LON - NWY VIA). Equal strength bounces; "
    "support is cut\n"
    "when the supporting unit is attacked. A dislodged unit retreats (A MUN R BOH) or disbands (A MUN D).\n"
    "After Fall, a unit standing on a supply centre takes it. In Winter a power builds "
    "(F BRE B, A PAR B) on\n"
    "free home centres it owns, up to centres - units, or disbands (A MUN D) down to its centre count.\n"
    "Your action: one order per line, only from your legal orders; an illegal line is dropped and that unit\n"
    "holds. Negotiation rounds before movement: lines 'to FRANCE: <text>' or 'to ALL: <text>' (private to\n"
    f"the recipients, <= {MAX_MESSAGE_CHARS} chars, <= {MAX_MESSAGES_PER_ROUND} lines).\n"
    "Start: by default a seeded position, reached by 1-3 years of bot play from the 1901 opening.\n"
    "Reward: change in your centres each phase, + centres/18 at the end (20 phases played from the start)."
)

STATE_FORMAT = "coplay-diplomacy-1"


OBS_MAX_CHARS = 1_000_000
SOLO_CENTERS = 18


def _copy_last(last: dict[str, Any]) -> dict[str, Any]:
    """A copy of the last phase's record:
    {"phase": str, "orders": {power: [order]}, "results": {unit: [str]}}."""
    return {"phase": last["phase"],
            "orders": {power: list(orders) for power, orders in last["orders"].items()},
            "results": {unit: list(results) for unit, results in last["results"].items()}}


def _engine_state(game: Game) -> dict[str, Any]:
    """The engine's state without its wall-clock timestamp (so equal positions give equal states)."""
    state = game.get_state()
    del state["timestamp"]
    return state


class DiplomacyEnv(ParallelEnv):
    """The Parallel env (module docstring: stages, orders, horizon, rewards, state)."""

    metadata = {"name": "diplomacy_v0", "render_modes": ["human", "ansi"], "is_parallelizable": True}

    def __init__(self, max_phases: int = 20, negotiation_rounds: int = 1, render_mode: str | None = None, *,
                 start_years: int | tuple[int, int] | list[int] = START_YEARS,
                 start_random_share: float = START_RANDOM_SHARE) -> None:
        if max_phases < 1 or negotiation_rounds < 0:
            raise ValueError(f"max_phases={max_phases} (expected >= 1), "
                             f"negotiation_rounds={negotiation_rounds} (expected >= 0)")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r}; expected one of {self.metadata['render_modes']}")
        self.max_phases = max_phases
        self.negotiation_rounds = negotiation_rounds
        self.start_years = parse_start_years(start_years)
        self.start_random_share = check_random_share(start_random_share)
        self._configured = (max_phases, negotiation_rounds)  # a restored state may override until next reset
        self.render_mode = render_mode
        self.possible_agents: list[str] = list(POWERS)
        self.agents: list[str] = []
        self._game: Game | None = None
        self._phases_played = 0
        self._stage = "orders"
        self._round = 0
        self._messages: list[dict[str, Any]] = []
        self._last: dict[str, Any] = {"phase": "", "orders": {}, "results": {}}
        self._legal: dict[str, dict[str, list[str]]] = {}
        self._engine: dict[str, Any] = {}  # the engine's state at the start of the current phase
        self._observations: dict[str, ObsStr] = {}
        self._infos: dict[str, dict[str, Any]] = {}
        self._observation_spaces = {agent: text_space(OBS_MAX_CHARS) for agent in POWERS}
        self._action_spaces = {agent: text_space(MAX_ACTION_CHARS) for agent in POWERS}

    # PettingZoo requires the same space object for an agent on every call.
    def observation_space(self, agent: str) -> spaces.Text:
        return self._observation_spaces.setdefault(agent, text_space(OBS_MAX_CHARS))

    def action_space(self, agent: str) -> spaces.Text:
        return self._action_spaces.setdefault(agent, text_space(MAX_ACTION_CHARS))

    # ------------------------------------------------------------------ reset / step
    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None):
        state = (options or {}).get("state")
        self._game = Game()
        if state is None and seed is not None and self.start_years[1] > 0:
            state = self._seeded_start(seed)
        if state is None:
            self.max_phases, self.negotiation_rounds = self._configured
            self._phases_played = 0
            self._messages = []
            self._last = {"phase": "", "orders": {}, "results": {}}
            self.agents = list(POWERS)
            self._enter_phase()
        else:
            self._restore(state)
        self._refresh([])
        return dict(self._observations), dict(self._infos)

    def step(self, actions: dict[str, Any]):
        if not self.agents or self._game is None:
            return {}, {}, {}, {}, {}
        actions = actions if isinstance(actions, dict) else {}
        texts = {power: normalize_action(actions.get(power)) for power in self.agents}
        acting = list(self.agents)
        rewards = dict.fromkeys(acting, 0.0)
        terminated = dict.fromkeys(acting, False)
        truncated = dict.fromkeys(acting, False)
        invalid: dict[str, tuple[int, list[str]]] = {}
        if self._stage == "negotiation":
            phase = self._game.get_current_phase()
            for power in acting:
                sent = resolve_messages(texts[power], power, acting)
                for recipient, text in sent.messages:
                    self._messages.append({"phase": phase, "round": self._round, "sender": power,
                                           "to": recipient, "text": text})
                invalid[power] = (sent.invalid_count, sent.invalid_lines)
            if self._round < self.negotiation_rounds:
                self._round += 1
            else:
                self._stage, self._round = "orders", 0
        else:
            game = self._game
            phase_type = game.phase_type
            before = {power: len(game.get_power(power).centers) for power in acting}
            for power in acting:
                count = self._engine["builds"][power]["count"] if phase_type == "A" else 0
                index = LegalOrderIndex(self._legal.get(power, {}))
                resolution = resolve_orders(texts[power], index, phase_type, count)
                if resolution.orders:  # canonical legal orders: no re-parsing by the engine (expand)
                    game.set_orders(power, resolution.orders, expand=False)
                invalid[power] = (resolution.invalid_count, resolution.invalid_lines)
            phase_data = game.process()
            self._phases_played += 1
            self._last = {
                "phase": str(phase_data.name),
                "orders": {power: list(orders) for power, orders in sorted(phase_data.orders.items())},
                "results": {unit: messages for unit, messages in
                            ((unit, [r.message for r in results if r.message])
                             for unit, results in sorted(phase_data.results.items())) if messages},
            }
            done = game.is_game_done
            out_of_time = self._phases_played >= self.max_phases
            for power in acting:
                engine_power = game.get_power(power)
                centers = len(engine_power.centers)
                rewards[power] = float(centers - before[power])
                terminated[power] = done or engine_power.is_eliminated()
                truncated[power] = out_of_time and not terminated[power]
                if terminated[power] or truncated[power]:
                    rewards[power] += centers / SOLO_CENTERS
            self.agents = [power for power in acting if not (terminated[power] or truncated[power])]
            if self.agents:
                self._enter_phase()
            else:
                self._engine = _engine_state(game)
        self._refresh(acting, invalid)
        observations = {power: self._observations[power] for power in acting}
        infos = {power: self._infos[power] for power in acting}
        if self.render_mode == "human":
            self.render()
        return observations, rewards, terminated, truncated, infos

    def _enter_phase(self) -> None:
        """Set up the stage for the engine's current phase and list every power's legal orders."""
        game = self._game
        if game.phase_type == "M":
            phase = game.get_current_phase()
            self._messages = [message for message in self._messages if message["phase"] == phase]
        if game.phase_type == "M" and self.negotiation_rounds > 0:
            self._stage, self._round = "negotiation", 1
        else:
            self._stage, self._round = "orders", 0
        self._engine = _engine_state(game)
        possible = game.get_all_possible_orders()
        orderable = game.get_orderable_locations()
        self._legal = {power: {loc: sorted(possible[loc]) for loc in orderable[power]} for power in POWERS}

    # ------------------------------------------------------------------ state
    def _seeded_start(self, seed: int) -> dict[str, Any]:
        """The state of the seeded start position (module docstring), with this env's configured horizon
        and negotiation rounds, no phase played yet and no messages."""
        start = json.loads(_start_position(seed, self.start_years, self.start_random_share))
        max_phases, rounds = self._configured
        return {"format": STATE_FORMAT, "engine": start["engine"], "phases_played": 0,
                "max_phases": max_phases, "negotiation_rounds": rounds,
                "stage": "negotiation" if rounds else "orders", "round": 1 if rounds else 0,
                "agents": start["agents"], "messages": [], "last": start["last"]}

    def state_dict(self) -> dict[str, Any]:
        """`info["state"]`: everything needed to continue this game exactly (JSON-serialisable)."""
        return {
            "format": STATE_FORMAT,
            "engine": _engine_state(self._game),  # fresh from the engine (about 10 us), nothing shared
            "phases_played": self._phases_played,
            "max_phases": self.max_phases,
            "negotiation_rounds": self.negotiation_rounds,
            "stage": self._stage,
            "round": self._round,
            "agents": list(self.agents),
            "messages": [dict(message) for message in self._messages],
            "last": _copy_last(self._last),
        }

    def _restore(self, state: dict[str, Any]) -> None:
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            found = state.get("format") if isinstance(state, dict) else type(state).__name__
            raise ValueError(f"options['state']: expected a dict with format={STATE_FORMAT!r}, got {found!r}")
        self._game.set_state(json.loads(json.dumps(state["engine"])))  # the engine keeps what it is given
        self._phases_played = int(state["phases_played"])
        self.max_phases = int(state["max_phases"])
        self.negotiation_rounds = int(state["negotiation_rounds"])
        self.agents = [power for power in state["agents"] if power in POWERS]
        self._messages = [dict(message) for message in state["messages"]]
        self._last = _copy_last(state["last"])
        self._enter_phase()
        self._stage, self._round = str(state["stage"]), int(state["round"])

    # ------------------------------------------------------------------ views
    def _public_view(self) -> dict[str, Any]:
        """What every power may know: the board, centre counts, the last phase's orders and results."""
        game = self._game
        engine = self._engine
        return {
            "phase": game.get_current_phase(),
            "phase_type": game.phase_type if not game.is_game_done else "",
            "stage": self._stage if self.agents else "done",
            "negotiation_round": self._round,
            "negotiation_rounds": self.negotiation_rounds,
            "phases_played": self._phases_played,
            "max_phases": self.max_phases,
            "units": {power: [unit for unit in engine["units"][power] if not unit.startswith("*")]
                      for power in POWERS},
            "dislodged": {power: {unit: list(locs) for unit, locs in engine["retreats"][power].items()}
                          for power in POWERS},
            "centers": {power: sorted(engine["centers"][power]) for power in POWERS},
            "homes": {power: list(engine["homes"][power]) for power in POWERS},
            "center_counts": {power: len(engine["centers"][power]) for power in POWERS},
            "build_counts": {power: engine["builds"][power]["count"] for power in POWERS},
            "build_sites": {power: list(engine["builds"][power]["homes"]) for power in POWERS},
            "alive": list(self.agents),
            "last_phase": self._last["phase"],
            "last_orders": {power: list(orders) for power, orders in self._last["orders"].items()},
            "last_results": {unit: list(results) for unit, results in self._last["results"].items()},
        }

    def _view(self, power: str, public: dict[str, Any]) -> dict[str, Any]:
        """What `power` may know: the public view, its own legal orders and only its own messages."""
        view = dict(public)
        view["power"] = power
        legal = self._legal.get(power, {}) if power in self.agents else {}
        view["legal_orders"] = {loc: list(orders) for loc, orders in legal.items()}
        view["messages"] = [dict(message) for message in self._messages
                            if message["sender"] == power or message["to"] in (power, "ALL")]
        return view

    def _legal_actions(self, view: dict[str, Any]) -> list[str]:
        if view["stage"] == "negotiation":
            others = [other for other in ["ALL"] + view["alive"] if other != view["power"]]
            return [""] + [f"to {other}: <text>" for other in others]
        orders = sorted(order for orders in view["legal_orders"].values() for order in orders)
        return orders or [""]

    def _refresh(self, acting: list[str], invalid: dict[str, tuple[int, list[str]]] | None = None) -> None:
        """Build observations and infos of the live agents and of those that acted this step."""
        invalid = invalid or {}
        public = self._public_view()
        public_text = render_public(public)
        state = self.state_dict()
        self._observations, self._infos = {}, {}
        for power in dict.fromkeys(list(acting) + list(self.agents)):
            view = self._view(power, public)
            count, lines = invalid.get(power, (0, []))
            self._observations[power] = ObsStr(render_observation(view, public_text))
            self._infos[power] = {
                "legal_actions": self._legal_actions(view),
                "legal_orders": view["legal_orders"],
                "state": state,
                "view": view,
                "features": compute_features(view),
                "score": public["center_counts"][power],
                "invalid_action": count,
                "invalid_lines": lines,
            }

    # ------------------------------------------------------------------ PettingZoo extras
    def observe(self, agent: str) -> ObsStr:
        return self._observations[agent]

    def state(self) -> dict[str, Any]:
        return self.state_dict()

    def render(self) -> str | None:
        if self._game is None or self.render_mode is None:
            return None
        public = self._public_view()
        text = (f"DIPLOMACY (standard map), observer view (no messages).\n"
                f"Phase {public['phase']} ({describe_phase(public['phase'])}), stage {public['stage']}; "
                f"engine phases played {public['phases_played']} of {public['max_phases']}.\n"
                + render_public(public))
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def close(self) -> None:
        self._game = None


@functools.lru_cache(maxsize=1024)
def _start_position(seed: int, years: tuple[int, int], random_share: float) -> str:
    """JSON of a seeded start (engine state, live powers, last phase), played on a scratch env with no
    negotiation. Cached as an immutable string: G episodes of a GRPO group reset to the same seed."""
    scratch = DiplomacyEnv(max_phases=10**6, negotiation_rounds=0, start_years=0)
    play_warm_up(scratch, seed, years, random_share)
    state = scratch.state_dict()
    return json.dumps({"engine": state["engine"], "agents": state["agents"], "last": state["last"]})
