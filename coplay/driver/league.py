"""The league: an OpenSkill rating per game for every pool member, so a run shows whether the policy gets
stronger than its past versions and the fixed baselines.

Members: `act@v<n>` (a policy version: the learner's seat, a `current` opponent and a `frozen` opponent at
that version are the same member), `base` (the base model without adapters), `expert`, `random`, `openai`
(the endpoint). A new policy version starts
from the newest older version's rating (as UnstableBaselines' model pool does with checkpoints), so the
current policy's rating carries across learner steps.

A game is one episode: its seats are grouped into teams by side (`coplay_envs.side`: Avalon good / evil,
Diplomacy one team per power) and ranked by their score (Avalon the ±1 outcome; Diplomacy the centres the
seat ends with). An episode whose teams all score the same carries no ranking (an Avalon game cut off by
`rollout.max_steps` before a side won) and is counted as `unranked`, never rated. A member that holds
several seats of one game (full self-play) moves by the mean of its seats' updates.

Updated from every self-play iteration and every evaluation in a run; persisted atomically as
`league.json` in the run folder (and in each checkpoint, so `--resume` restores it exactly). With
`rollout.selfplay.league.sampling=pfsp` the opponent pool's draw weights are multiplied by
f(P(learner beats the member)) (prioritised fictitious self-play, AlphaStar): `hard` (1 - p)^power puts the
draws on the members the learner does not beat yet. Pure Python (openskill): no ray, no torch.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coplay.config import LeagueConfig
from coplay.files import write_json_atomic
from coplay.types import Trajectory

LEAGUE_FORMAT = "coplay-league/1"
LEAGUE_FILE = "league.json"


@dataclass
class GameResult:
    """One finished game for the league: per seat the member that played it, its side and its score."""

    game: str
    seats: dict[str, tuple[str, str, float]] = field(default_factory=dict)  # seat -> (member, side, score)


def member_of(traj: Trajectory) -> str:
    """The pool member that played a trajectory's seat."""
    if traj.policy in ("model", "current") or traj.policy.startswith("frozen@"):
        version = traj.adapter_versions.get("act")
        if version is None and traj.policy.startswith("frozen@"):
            version = int(traj.policy.rsplit("@v", 1)[1])
        return f"act@v{version}" if version is not None else "base"  # no adapter: the base model
    return traj.policy


def game_results(trajectories: Iterable[Trajectory]) -> list[GameResult]:
    """One result per multi-seat episode: the trajectories sharing an `episode_id`, as the runners write
    them (single-player games have no opponents to rate against)."""
    import coplay_envs

    by_episode: dict[str, list[Trajectory]] = defaultdict(list)
    for traj in trajectories:
        if coplay_envs.seats(traj.game):
            by_episode[traj.episode_id].append(traj)
    out = []
    for episode_id in sorted(by_episode):
        trajs = by_episode[episode_id]
        game = trajs[0].game
        out.append(GameResult(game, {t.seat: (member_of(t), str(coplay_envs.side(game, t.seat, t.role)),
                                              float(t.score)) for t in trajs}))
    return out


class League:
    """Ratings per game and member; `play` rates games, `priority` is the PFSP hook of the opponent pool."""

    def __init__(self, cfg: LeagueConfig, path: Path | None = None) -> None:
        from openskill import models

        self.cfg, self.path = cfg, path
        self.model = getattr(models, cfg.model)()
        self.ratings: dict[str, dict[str, list[float]]] = {}  # game -> member -> [mu, sigma]
        self.games: dict[str, dict[str, int]] = {}  # game -> member -> rated games
        self.counts = {"rated": 0, "unranked": 0}

    # ------------------------------------------------------------------ ratings
    def rating(self, game: str, member: str) -> list[float]:
        """[mu, sigma] of a member (created on first use: a policy version from its predecessor)."""
        table = self.ratings.setdefault(game, {})
        if member not in table:
            table[member] = self._initial(table, member)
            self.games.setdefault(game, {})[member] = 0
        return table[member]

    def _initial(self, table: dict[str, list[float]], member: str) -> list[float]:
        if member.startswith("act@v"):
            version = int(member[5:])
            older = [int(m[5:]) for m in table if m.startswith("act@v") and int(m[5:]) < version]
            if older:
                return list(table[f"act@v{max(older)}"])
        fresh = self.model.rating()
        return [float(fresh.mu), float(fresh.sigma)]

    def play(self, trajectories: Iterable[Trajectory]) -> int:
        """Rate every multi-seat episode of `trajectories` (none when the league is off); returns how many
        were rated."""
        if not self.cfg.enabled:
            return 0
        rated = sum(self.rate(result) for result in game_results(trajectories))
        self.save()
        return rated

    def rate(self, result: GameResult) -> bool:
        """Rate one game (teams by side, ranked by mean score); False when it carries no ranking."""
        teams: dict[str, list[str]] = defaultdict(list)
        scores: dict[str, list[float]] = defaultdict(list)
        for seat in sorted(result.seats):
            member, side, score = result.seats[seat]
            teams[side].append(member)
            scores[side].append(score)
        sides = sorted(teams)
        means = [sum(scores[s]) / len(scores[s]) for s in sides]
        if len(sides) < 2 or max(means) == min(means):
            self.counts["unranked"] += 1
            return False
        before = {m: self.rating(result.game, m) for s in sides for m in teams[s]}
        team_ratings = [[self.model.rating(*before[m]) for m in teams[s]] for s in sides]
        ranks = [sum(1 for other in means if other > mean) for mean in means]  # 0 = best; ties share
        rated = self.model.rate(team_ratings, ranks=ranks)
        moves: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for s, new_team in zip(sides, rated, strict=True):
            for m, new in zip(teams[s], new_team, strict=True):
                moves[m].append((float(new.mu) - before[m][0], float(new.sigma)))
        for m, changes in moves.items():
            mu = before[m][0] + sum(d for d, _ in changes) / len(changes)
            sigma = sum(sg for _, sg in changes) / len(changes)
            self.ratings[result.game][m] = [mu, sigma]
            self.games[result.game][m] += 1
        self.counts["rated"] += 1
        return True

    def win_probability(self, game: str, member: str, other: str) -> float:
        """P(`member` ranks above `other` in a two-team game), from the ratings (an unrated member counts at
        its initial rating and is not added to the table)."""
        table = self.ratings.get(game, {})
        a, b = (table.get(m) or self._initial(table, m) for m in (member, other))
        return float(self.model.predict_win([[self.model.rating(*a)], [self.model.rating(*b)]])[0])

    # ------------------------------------------------------------------ PFSP
    def priority(self, game: str, learner_version: int) -> Any:
        """The opponent pool's weight multiplier (kind, frozen version) -> f(P(learner beats it)), or None
        when the pool samples by its fixed weights."""
        if self.cfg.sampling != "pfsp":
            return None
        learner = f"act@v{learner_version}"

        def weight(kind: str, version: int | None) -> float:
            member = {"current": learner, "frozen": f"act@v{version}"}.get(kind, kind)
            p = self.win_probability(game, learner, member)
            f = (1.0 - p) ** self.cfg.pfsp_power if self.cfg.pfsp == "hard" else p * (1.0 - p)
            return max(f, 1e-6)  # never zero: every configured kind stays reachable

        return weight

    # ------------------------------------------------------------------ views and persistence
    def table(self) -> dict[str, dict[str, dict[str, float]]]:
        """Per game, members by conservative skill (ordinal mu - 3 sigma), best first."""
        out = {}
        for game, members in sorted(self.ratings.items()):
            rows = sorted(members.items(), key=lambda kv: -(kv[1][0] - 3 * kv[1][1]))
            out[game] = {m: {"mu": mu, "sigma": sg, "ordinal": mu - 3 * sg, "games": self.games[game][m]}
                         for m, (mu, sg) in rows}
        return out

    def to_json(self) -> dict[str, Any]:
        return {"format": LEAGUE_FORMAT, "model": self.cfg.model, "ratings": self.ratings,
                "games": self.games, "counts": self.counts}

    def load_json(self, data: dict[str, Any], where: str = "league") -> League:
        if data.get("format") != LEAGUE_FORMAT or data.get("model") != self.cfg.model:
            raise ValueError(f"{where}: format {data.get('format')!r} with model {data.get('model')!r}; "
                             f"expected {LEAGUE_FORMAT!r} with rollout.selfplay.league.model "
                             f"{self.cfg.model!r}")
        self.ratings = {g: {m: [float(v[0]), float(v[1])] for m, v in ms.items()}
                        for g, ms in data["ratings"].items()}
        self.games = {g: {m: int(n) for m, n in ms.items()} for g, ms in data["games"].items()}
        self.counts = {k: int(v) for k, v in data["counts"].items()}
        return self

    def save(self) -> None:
        if self.path is not None:
            write_json_atomic(self.path, self.to_json())


def markdown_league(table: dict[str, dict[str, dict[str, float]]]) -> str:
    """The league as Markdown tables (one per game), for `coplay eval` and the report."""
    lines = []
    for game, members in table.items():
        lines += ["", f"## {game} league (OpenSkill)", "", "| member | mu | sigma | ordinal | games |",
                  "|---|---|---|---|---|"]
        lines += [f"| {m} | {r['mu']:.2f} | {r['sigma']:.2f} | {r['ordinal']:.2f} | {r['games']} |"
                  for m, r in members.items()]
    return "\n".join(lines) + "\n" if lines else ""
