"""The evaluation protocol (COS-PLAY's): players on `seeds.eval`, summarized with CIs.

- single-player games: `episodes_single` (16) episodes, one per eval seed;
- Avalon: the player sits at each of the 5 seats for `episodes_per_seat` (10) seeds (roles are shuffled by
  seed, so every role is covered), the other seats are opponents; win rates per side and per role;
- Diplomacy: the player plays each of the 7 powers for `episodes_per_seat` seeds; supply centres per power.
A player is `expert` / `random` (the games' bots) or `model` (engine names of `act` and `retrieve`, sampled at
`sampling.eval_temperature`, 0.3 by default). Results: mean, 95% CI (t and bootstrap), median, min, max;
JSON and Markdown under the run's `eval/`. No ray: the loop runs the same plans on its workers.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coplay.atomic import write_bytes_atomic, write_json_atomic
from coplay.config import CoplayConfig
from coplay.iteration import MULTI_SEAT, model_seat
from coplay.rollout.model_episodes import EpisodePlan, RunnerContext, SeatPlayer, play_episodes
from coplay.stats import summarize, wilson_interval
from coplay.types import Trajectory

AVALON_EVIL_ROLES = ("minion", "assassin")


@dataclass(frozen=True)
class EvalProtocol:
    episodes_single: int = 16
    episodes_per_seat: int = 10
    opponents: str = "expert"  # who fills the other seats of multi-seat games: expert | random | self
    max_steps: int | None = None


def player_seat(cfg: CoplayConfig, player: str, versions: dict[str, int] | None) -> SeatPlayer:
    if player in ("expert", "random"):
        return SeatPlayer(player)
    if player != "model" or versions is None:
        raise ValueError(f"player {player!r}: expected expert, random or model (with adapter versions)")
    return SeatPlayer("model", model_seat(cfg, versions, evaluation=True))


def eval_plans(cfg: CoplayConfig, player: SeatPlayer, protocol: EvalProtocol, label: str) -> list[EpisodePlan]:
    """The protocol's episodes for every game of the config, on `seeds.eval`."""
    plans = []
    opponent = player if protocol.opponents == "self" else SeatPlayer(protocol.opponents)
    for game in cfg.games:
        env_kwargs = dict(cfg.game[game].env_kwargs)
        seats = MULTI_SEAT.get(game)
        if seats is None:
            for i in range(protocol.episodes_single):
                seed = cfg.seeds.eval.start + i
                plans.append(EpisodePlan(game, seed, f"eval-{label}-{game}-s{seed}", player, {}, env_kwargs,
                                         protocol.max_steps))
            continue
        for seat in seats:
            for i in range(protocol.episodes_per_seat):
                seed = cfg.seeds.eval.start + i
                plans.append(EpisodePlan(game, seed, f"eval-{label}-{game}-{seat}-s{seed}", opponent, {seat: player},
                                         env_kwargs, protocol.max_steps))
    return plans


def evaluated(trajectories: list[Trajectory], plans: list[EpisodePlan]) -> list[Trajectory]:
    """The evaluated player's own trajectories (its seat in multi-seat games)."""
    seat_of = {p.episode_id: next(iter(p.players), "player_0") for p in plans}
    return [t for t in trajectories if t.seat == seat_of.get(t.episode_id, t.seat)]


def _won(traj: Trajectory) -> bool:
    return sum(s.reward for s in traj.steps) > 0


def summarize_eval(trajectories: list[Trajectory]) -> dict[str, Any]:
    """Per game: score summary; Avalon: win rates per side and role (Wilson 95%); Diplomacy: per power."""
    out: dict[str, Any] = {}
    for game in sorted({t.game for t in trajectories}):
        trajs = [t for t in trajectories if t.game == game]
        entry: dict[str, Any] = {"episodes": len(trajs), "score": summarize([t.score for t in trajs]).as_dict()}
        if game == "avalon":
            groups: dict[str, list[bool]] = {}
            for t in trajs:
                side = "evil" if t.role.lower() in AVALON_EVIL_ROLES else "good"
                groups.setdefault(f"side:{side}", []).append(_won(t))
                groups.setdefault(f"role:{t.role.lower()}", []).append(_won(t))
            groups["all"] = [_won(t) for t in trajs]
            entry["win_rate"] = {k: {"rate": sum(v) / len(v), "n": len(v), "ci95": list(wilson_interval(sum(v), len(v)))}
                                 for k, v in sorted(groups.items())}
        if game == "diplomacy":
            powers: dict[str, list[float]] = {}
            for t in trajs:
                powers.setdefault(t.seat, []).append(t.score)
            entry["per_power"] = {p: summarize(v).as_dict() for p, v in sorted(powers.items())}
        out[game] = entry
    return out


def markdown_table(results: dict[str, Any], title: str) -> str:
    lines = [f"# {title}", "", "| game | n | mean | 95% CI (t) | 95% CI (bootstrap) | median | min | max |",
             "|---|---|---|---|---|---|---|---|"]
    for game, entry in results.items():
        s = entry["score"]
        lines.append(f"| {game} | {s['n']} | {s['mean']:.2f} | [{s['ci_low']:.2f}, {s['ci_high']:.2f}] | "
                     f"[{s['boot_low']:.2f}, {s['boot_high']:.2f}] | {s['median']:g} | {s['min']:g} | {s['max']:g} |")
    for game, entry in results.items():
        if "win_rate" in entry:
            lines += ["", f"## {game} win rates", "", "| group | n | rate | 95% CI (Wilson) |", "|---|---|---|---|"]
            for key, w in entry["win_rate"].items():
                lines.append(f"| {key} | {w['n']} | {w['rate']:.2f} | [{w['ci95'][0]:.2f}, {w['ci95'][1]:.2f}] |")
    return "\n".join(lines) + "\n"


def write_eval(out_dir: Path, name: str, results: dict[str, Any], meta: dict[str, Any]) -> tuple[Path, Path]:
    """`<name>.json` and `<name>.md` under `out_dir`."""
    json_path = write_json_atomic(out_dir / f"{name}.json", {"meta": meta, "results": results})
    md_path = write_bytes_atomic(out_dir / f"{name}.md", markdown_table(results, f"Evaluation: {name}").encode())
    return json_path, md_path


def run_local(cfg: CoplayConfig, player: str, protocol: EvalProtocol, engine: Any = None,
              versions: dict[str, int] | None = None) -> tuple[dict[str, Any], list[Trajectory]]:
    """Evaluate in this process (bots need no engine; `model` needs one serving the named versions)."""
    import coplay_envs

    seat = player_seat(cfg, player, versions)
    plans = eval_plans(cfg, seat, protocol, player)
    ctx = RunnerContext(engine=engine, rules=coplay_envs.rules, skills_for=lambda g, r: None, run_seed=cfg.seeds.run)
    trajectories = evaluated(asyncio.run(play_episodes(ctx, plans, cfg.rollout.concurrent_episodes)), plans)
    return summarize_eval(trajectories), trajectories
