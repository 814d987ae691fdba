"""Avalon bots: `ExpertBot` (rule-based, per role) and `RandomBot`, plus `play_episode` to run one game.

Bots read only the observation, `info["view"]` and `info["legal_actions"]`, never `info["state"]`.
Never imports `coplay`.

The expert's belief: every way to place the two evil seats consistent with what the seat knows is a
hypothesis; each is weighted by the public record: a quest with f fail cards needs at least f evil members
(probability of each evil member failing taken as 0.75), evil seats tend to approve teams holding evil and
reject clean ones, and evil leaders tend to put evil on their teams. Per role:
- Servant: proposes the team most likely clean (itself included), approves a team close to the best one it
  could imagine, always approves the fifth proposal (a rejection there loses), names its top suspect.
- Merlin: proposes clean teams; votes by what it knows except on the first quest, where it votes like a
  Servant would (cover); speaks only from public evidence, so its knowledge is not obvious.
- Minion / Assassin: propose themselves plus good seats, approve teams holding evil and reject clean ones,
  fail quests, but when both evil seats are on one team only the lower-numbered seat fails (one fail is
  enough in a 5-seat game); they accuse good seats.
- Assassin, at the end: names the good seat whose votes and proposals best avoided the evil seats (Merlin's
  footprint), with messages that named an evil seat counting too.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable
from typing import Any

import numpy as np

from coplay_envs.avalon.rules import MAX_PROPOSALS, NUM_SEATS
from coplay_envs.core import BotAction

_P_FAIL = 0.75
_RANDOM_WORDS = ("team", "trust", "good", "evil", "quest", "approve", "reject", "maybe", "sure", "player",
                 "suspect", "fine", "no", "yes", "why")
_SEAT_MENTION = re.compile(r"player_([0-9])")


def _intention(action: str) -> str:
    head = action.split(" ", 1)[0]
    return {"propose": "POSITION", "say": "EXPLORE", "approve": "EXECUTE", "reject": "DEFEND",
            "success": "EXECUTE", "fail": "ATTACK", "assassinate": "ATTACK"}.get(head, "EXECUTE")


def _team_text(team: Iterable[int]) -> str:
    return ",".join(str(s) for s in sorted(team))


class RandomBot:
    """Uniform over the legal actions with its own seeded RNG; `say <text>` gets a few random words."""

    def __init__(self, seed: int = 0, agent: str | None = None) -> None:
        self.agent = agent
        self._rng = np.random.default_rng(seed)

    def act(self, observation: str, info: dict[str, Any]) -> BotAction:
        legal = info.get("legal_actions") or []
        if not legal:
            return BotAction("", "EXECUTE", "not my turn")
        action = legal[int(self._rng.integers(len(legal)))]
        if action == "say <text>":
            words = [_RANDOM_WORDS[int(i)] for i in self._rng.integers(len(_RANDOM_WORDS), size=4)]
            action = "say " + " ".join(words)
        return BotAction(action, _intention(action), "random legal action")


class Belief:
    """Posterior over which pair of seats is evil, from one seat's view (see the module docstring)."""

    def __init__(self, view: dict[str, Any], public_only: bool = False) -> None:
        seat = view["seat"]
        evil_known = set(view["known_evil"]) | ({seat} if view["side"] == "evil" else set())
        pairs = [frozenset(p) for p in itertools.combinations(range(NUM_SEATS), 2)]
        if public_only or view["side"] == "good" and view["role_id"] != "merlin":
            pairs = [p for p in pairs if seat not in p]  # I am good (Merlin's public face: same)
        else:
            pairs = [p for p in pairs if p == frozenset(evil_known)]
        weights = [self._likelihood(p, view["history"]) for p in pairs]
        total = sum(weights)
        if total <= 0:  # the record contradicts every hypothesis (cannot happen with legal play)
            weights, total = [1.0] * len(pairs), float(len(pairs))
        self.posterior = {p: w / total for p, w in zip(pairs, weights, strict=True)}

    @staticmethod
    def _likelihood(evil: frozenset[int], history: list[dict[str, Any]]) -> float:
        like = 1.0
        team: list[int] = []
        for event in history:
            kind = event["kind"]
            if kind == "proposal":
                team = event["team"]
                holds_evil = bool(evil.intersection(team))
                if event["leader"] in evil:
                    like *= 1.4 if holds_evil else 0.6
            elif kind == "vote" and not event["auto"]:
                holds_evil = bool(evil.intersection(team))
                for s in evil:
                    approve = event["votes"][s] == "approve"
                    p = 0.75 if holds_evil else 0.35
                    like *= (p if approve else 1 - p) / 0.5
            elif kind == "quest":
                k, f = len(evil.intersection(event["team"])), event["fails"]
                if f > k:
                    return 0.0
                like *= float(math.comb(k, f)) * _P_FAIL ** f * (1 - _P_FAIL) ** (k - f) if k else 1.0
        return like

    def p_clean(self, team: Iterable[int]) -> float:
        team_set = set(team)
        return sum(w for p, w in self.posterior.items() if not p & team_set)

    def p_evil(self, seat: int) -> float:
        return sum(w for p, w in self.posterior.items() if seat in p)


class ExpertBot:
    """Rule-based Avalon play per role (see the module docstring). Deterministic given `seed`."""

    def __init__(self, seed: int = 0, agent: str | None = None) -> None:
        self.agent = agent
        self._rng = np.random.default_rng(seed)

    def act(self, observation: str, info: dict[str, Any]) -> BotAction:
        legal = info.get("legal_actions") or []
        view = info.get("view")
        if not legal or not view:
            return BotAction("", "EXECUTE", "not my turn")
        phase = view["phase"]
        if phase == "propose":
            return self._propose(view)
        if phase == "discuss":
            return self._say(view)
        if phase == "vote":
            return self._vote(view)
        if phase == "quest":
            return self._quest(view, legal)
        if phase == "assassinate":
            return self._assassinate(view)
        return BotAction(legal[0], _intention(legal[0]), "only option")

    # -- helpers -------------------------------------------------------------------------------
    def _pick(self, options: list[Any]) -> Any:
        return options[int(self._rng.integers(len(options)))]

    @staticmethod
    def _evil_set(view: dict[str, Any]) -> set[int] | None:
        """The exact evil seats when this seat knows them (Merlin, evil), else None."""
        if view["role_id"] == "merlin":
            return set(view["known_evil"])
        if view["side"] == "evil":
            return set(view["known_evil"]) | {view["seat"]}
        return None

    @staticmethod
    def _teams(size: int, including: int | None = None) -> list[tuple[int, ...]]:
        teams = list(itertools.combinations(range(NUM_SEATS), size))
        return [t for t in teams if including is None or including in t]

    def _must_approve(self, view: dict[str, Any]) -> bool:
        return view["proposal"] == MAX_PROPOSALS - 1 and not view["auto_approve_fifth"]

    # -- phases --------------------------------------------------------------------------------
    def _propose(self, view: dict[str, Any]) -> BotAction:
        seat, size = view["seat"], view["team_size"]
        evil = self._evil_set(view)
        public = Belief(view, public_only=True)
        if view["side"] == "evil":
            assert evil is not None
            teams = [t for t in self._teams(size, seat) if len(evil.intersection(t)) == 1]
            best = max(public.p_clean(t) for t in teams)
            team = self._pick([t for t in teams if public.p_clean(t) >= best - 1e-9])
            return BotAction(f"propose {_team_text(team)}", "POSITION",
                             "bring myself with trusted good seats")
        if evil is not None:  # Merlin: clean teams, the publicly most plausible one
            teams = [t for t in self._teams(size, seat) if not evil.intersection(t)]
            best = max(public.p_clean(t) for t in teams)
            team = self._pick([t for t in teams if public.p_clean(t) >= best - 1e-9])
            return BotAction(f"propose {_team_text(team)}", "POSITION",
                             "a team I can defend with public evidence")
        belief = Belief(view)
        teams = self._teams(size, seat)
        best = max(belief.p_clean(t) for t in teams)
        team = self._pick([t for t in teams if belief.p_clean(t) >= best - 1e-9])
        return BotAction(f"propose {_team_text(team)}", "POSITION",
                         f"most likely clean team (p={best:.2f})")

    def _vote(self, view: dict[str, Any]) -> BotAction:
        team = view["team"]
        evil = self._evil_set(view)
        if view["side"] == "evil":
            assert evil is not None
            if evil.intersection(team):
                return BotAction("approve", "EXECUTE", "the team holds an evil seat")
            return BotAction("reject", "DEFEND", "a clean team would help good")
        if self._must_approve(view):
            return BotAction("approve", "EXECUTE", "rejecting the fifth proposal loses the game")
        if evil is not None and view["quest"] > 0:
            if evil.intersection(team):
                return BotAction("reject", "DEFEND", "this team is not safe")
            return BotAction("approve", "EXECUTE", "this team looks safe")
        belief = Belief(view, public_only=evil is not None)
        p = belief.p_clean(team)
        best = max(belief.p_clean(t) for t in self._teams(len(team)))
        slack = 0.05 if view["proposal"] < MAX_PROPOSALS - 2 else 0.2
        if p >= best - slack or p >= 0.9:
            return BotAction("approve", "EXECUTE", f"team likely clean (p={p:.2f}, best {best:.2f})")
        return BotAction("reject", "DEFEND", f"a safer team exists (p={p:.2f} < {best:.2f})")

    def _quest(self, view: dict[str, Any], legal: list[str]) -> BotAction:
        if "fail" not in legal:
            return BotAction("success", "EXECUTE", "good seats succeed")
        evil = self._evil_set(view) or {view["seat"]}
        evil_on_team = sorted(evil.intersection(view["team"]))
        if evil_on_team and evil_on_team[0] != view["seat"]:
            return BotAction("success", "EXECUTE", "my teammate plays the one fail needed; no double fail")
        return BotAction("fail", "ATTACK", "one fail fails the quest")

    def _say(self, view: dict[str, Any]) -> BotAction:
        seat, team = view["seat"], view["team"]
        public = Belief(view, public_only=True)
        others = [s for s in range(NUM_SEATS) if s != seat]
        if view["side"] == "evil":
            evil = self._evil_set(view) or set()
            goods = [s for s in others if s not in evil]
            target = max(goods, key=lambda s: (public.p_evil(s), -s))
            if evil.intersection(team):
                text = f"Team {_team_text(team)} looks fine to me. I am wary of player_{target}."
            else:
                text = f"I do not like team {_team_text(team)}; player_{target} worries me."
            return BotAction(f"say {text}", "EXPLORE", "deflect suspicion onto a good seat")
        belief = public if view["role_id"] == "merlin" else Belief(view)
        suspect = max(others, key=lambda s: (belief.p_evil(s), -s))
        p_sus, p_team = belief.p_evil(suspect), belief.p_clean(team)
        if p_sus > 0.6:
            text = f"I suspect player_{suspect} from the record (p={p_sus:.2f}). Team {_team_text(team)}: "
            text += "ok." if p_team >= 0.5 else "too risky."
        else:
            text = f"No strong read yet. Team {_team_text(team)} seems {'ok' if p_team >= 0.4 else 'risky'}."
        return BotAction(f"say {text}", "EXPLORE", "share my read of the public record")

    def _assassinate(self, view: dict[str, Any]) -> BotAction:
        seat = view["seat"]
        evil = set(view["known_evil"]) | {seat}
        goods = [s for s in range(NUM_SEATS) if s not in evil]
        score = dict.fromkeys(goods, 0.0)
        team: list[int] = []
        for event in view["history"]:
            kind = event["kind"]
            if kind == "proposal":
                team = event["team"]
                if event["leader"] in score:
                    score[event["leader"]] += -1.0 if evil.intersection(team) else 1.0
            elif kind == "vote" and not event["auto"]:
                dirty = bool(evil.intersection(team))
                for s in goods:
                    approve = event["votes"][s] == "approve"
                    score[s] += (-1.0 if approve else 1.0) if dirty else (0.5 if approve else -0.5)
            elif kind == "message" and event["seat"] in score:
                named = {int(m) for m in _SEAT_MENTION.findall(event["text"])}
                score[event["seat"]] += 0.5 * len(named & evil)
        top = max(score.values())
        target = self._pick([s for s in goods if score[s] >= top - 1e-9])
        return BotAction(f"assassinate {target}", "ATTACK", "this seat avoided evil most consistently")


def play_episode(env: Any, bots: dict[str, Any], seed: int | None = None,
                 options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Play one game of the AEC `env` with one bot per agent; returns the winner, per-seat rewards, the
    view of every seat at the end and the number of steps."""
    env.reset(seed=seed, options=options)
    rewards = dict.fromkeys(env.possible_agents, 0.0)
    final_views: dict[str, Any] = {}
    steps = 0
    for agent in env.agent_iter():
        observation, reward, terminated, truncated, info = env.last()
        rewards[agent] += reward
        if terminated or truncated:
            final_views[agent] = info["view"]
            env.step(None)
            continue
        env.step(bots[agent].act(observation, info).action)
        steps += 1
    winner = next(iter(final_views.values()))["winner"] if final_views else None
    return {"winner": winner, "rewards": rewards, "views": final_views, "steps": steps}


def play_matchup(good_bot: type, evil_bot: type, games: int, seed0: int = 0,
                 **env_kwargs: Any) -> list[str]:
    """Winners of `games` seeded games (seeds `seed0..`) with `good_bot` on the good seats and `evil_bot` on
    the evil ones; the seat split is read from each seat's own view (its side), so bots stay blind."""
    from coplay_envs.avalon.env import AvalonEnv  # local: env imports nothing from here, keep it that way

    winners = []
    for game in range(games):
        env = AvalonEnv(**env_kwargs)
        env.reset(seed=seed0 + game)
        bots = {}
        for i, agent in enumerate(env.possible_agents):
            kind = good_bot if env.infos[agent]["view"]["side"] == "good" else evil_bot
            bots[agent] = kind(seed=(seed0 + game) * NUM_SEATS + i, agent=agent)
        winners.append(play_episode(env, bots, seed=seed0 + game)["winner"])
    return winners

