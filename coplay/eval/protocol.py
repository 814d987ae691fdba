"""The evaluation protocol (COS-PLAY's): players on `seeds.eval`, summarized with CIs.

- single-player games: `episodes` (16) episodes, one per eval seed;
- Avalon: the player sits at each of the 5 seats for `episodes_per_seat` (10) seeds (roles are shuffled by
  seed, so every role is covered), the other seats are opponents; win rates per side and per role;
- Diplomacy: the player plays each of the 7 powers for `episodes_per_seat` seeds; supply centres per power.
A player is `expert` / `random` (the games' bots) or `model` (engine names of `act` and `retrieve`, sampled at
`eval.temperature`, 0.3 by default). The protocol's settings are the config's `eval` section (`EvalConfig`).
Results: mean, 95% CI (t and bootstrap), median, min, max, and each episode's score by start seed (`per_seed`,
for paired comparisons); JSON and Markdown under the run's `eval/`. No ray:
the loop runs the same plans on its workers (`coplay.driver.evaluation`), `coplay eval` in this process
(`coplay.eval.runner`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from coplay.config import CoplayConfig, EvalConfig
from coplay.driver.plans import model_seat
from coplay.eval.stats import summarize, wilson_interval
from coplay.files import write_bytes_atomic, write_json_atomic
from coplay.rollout.model_episodes import EpisodePlan, SeatPlayer
from coplay.types import Trajectory


def player_seat(cfg: CoplayConfig, player: str, versions: dict[str, int] | None) -> SeatPlayer:
    if player in ("expert", "random"):
        return SeatPlayer(player)
    if player != "model" or versions is None:
        raise ValueError(f"player {player!r}: expected expert, random or model (with adapter versions)")
    return SeatPlayer("model", model_seat(cfg, versions, evaluation=True))


def eval_plans(cfg: CoplayConfig, player: SeatPlayer, label: str,
               protocol: EvalConfig | None = None) -> list[EpisodePlan]:
    """The protocol's episodes (`protocol`, default `cfg.eval`) for every game of the config, on `seeds.eval`.
    `eval.max_steps` unset: episodes are as long as the run's (`rollout.max_steps`). `label` names the
    episodes only: their sampling seeds depend on the game, seat and start seed, not on it, so evaluations at
    different iterations (or of different checkpoints) draw the same random numbers (exactly the same moves
    for the same weights where the engine's logits do not depend on batching, as on `hf`)."""
    protocol = protocol or cfg.eval
    max_steps = protocol.max_steps or cfg.rollout.max_steps
    import coplay_envs

    plans = []
    opponent = player if protocol.opponents == "self" else SeatPlayer(protocol.opponents)
    for game in cfg.games:
        env_kwargs = dict(cfg.game[game].env_kwargs)
        seats = coplay_envs.seats(game)
        if not seats:
            for i in range(protocol.episodes):
                seed = cfg.seeds.eval.start + i
                key = f"{game}-s{seed}"
                plans.append(EpisodePlan(game, seed, f"eval-{label}-{key}", player, {}, env_kwargs, max_steps,
                                         sample_key=f"eval-{key}"))
            continue
        for seat in seats:
            for i in range(protocol.episodes_per_seat):
                seed = cfg.seeds.eval.start + i
                key = f"{game}-{seat}-s{seed}"
                plans.append(EpisodePlan(game, seed, f"eval-{label}-{key}", opponent, {seat: player},
                                         env_kwargs, max_steps, sample_key=f"eval-{key}"))
    return plans


def evaluated(trajectories: list[Trajectory], plans: list[EpisodePlan]) -> list[Trajectory]:
    """The evaluated player's own trajectories (its seat in multi-seat games)."""
    seat_of = {p.episode_id: next(iter(p.players), "player_0") for p in plans}
    return [t for t in trajectories if t.seat == seat_of.get(t.episode_id, t.seat)]


def _won(traj: Trajectory) -> bool:
    return sum(s.reward for s in traj.steps) > 0


def seed_key(traj: Trajectory, multi_seat: bool) -> str:
    """What pairs an episode with the same episode of another evaluation: its start seed (`"1000000"`), and in
    multi-seat games the evaluated seat too (`"1000000:player_2"`)."""
    return f"{traj.seed}:{traj.seat}" if multi_seat else str(traj.seed)


def call_counts(trajectories: list[Trajectory]) -> dict[str, dict[str, int]]:
    """Per adapter, the model calls the trajectories' decisions took and their prompt and completion tokens
    ({} for bots). An evaluation's seconds depend on them: a decision is an `act` call, plus a `retrieve`
    call at every move where no skill is active and every `rollout.retrieve_every` moves, so two
    evaluations of the same seeds can take different calls."""
    out: dict[str, dict[str, int]] = {}
    for sample in (s for t in trajectories for s in t.samples):
        row = out.setdefault(sample.adapter, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0})
        row["calls"] += 1
        row["prompt_tokens"] += len(sample.prompt_ids)
        row["completion_tokens"] += len(sample.completion_ids)
    return dict(sorted(out.items()))


def summarize_eval(trajectories: list[Trajectory]) -> dict[str, Any]:
    """Per game: score summary and each episode's score by start seed (`per_seed`, `seed_key`), so two
    evaluations on the same seeds can be compared seed by seed (`coplay.eval.stats.paired_difference`);
    the model calls its decisions took (`calls`, model seats only); Avalon: win rates per side and role
    (Wilson 95%); Diplomacy: per power."""
    import coplay_envs

    out: dict[str, Any] = {}
    for game in sorted({t.game for t in trajectories}):
        trajs = [t for t in trajectories if t.game == game]
        multi = bool(coplay_envs.seats(game))
        entry: dict[str, Any] = {"episodes": len(trajs),
                                 "score": summarize([t.score for t in trajs]).as_dict(),
                                 "per_seed": {seed_key(t, multi): t.score
                                              for t in sorted(trajs, key=lambda t: (t.seed, t.seat))}}
        if calls := call_counts(trajs):
            entry["calls"] = calls
        if game == "avalon":
            groups: dict[str, list[bool]] = {}
            for t in trajs:
                side = coplay_envs.side(game, t.seat, t.role.lower())
                groups.setdefault(f"side:{side}", []).append(_won(t))
                groups.setdefault(f"role:{t.role.lower()}", []).append(_won(t))
            groups["all"] = [_won(t) for t in trajs]
            entry["win_rate"] = {k: {"rate": sum(v) / len(v), "n": len(v),
                                     "ci95": list(wilson_interval(sum(v), len(v)))}
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
                     f"[{s['boot_low']:.2f}, {s['boot_high']:.2f}] | {s['median']:g} | {s['min']:g} | "
                     f"{s['max']:g} |")
    for game, entry in results.items():
        if "win_rate" in entry:
            lines += ["", f"## {game} win rates", "", "| group | n | rate | 95% CI (Wilson) |",
                      "|---|---|---|---|"]
            for key, w in entry["win_rate"].items():
                lines.append(f"| {key} | {w['n']} | {w['rate']:.2f} | "
                             f"[{w['ci95'][0]:.2f}, {w['ci95'][1]:.2f}] |")
        if "per_power" in entry:
            lines += ["", f"## {game} per power (the learner's seat)", "",
                      "| power | n | mean score | 95% CI (t) |", "|---|---|---|---|"]
            for power, s in entry["per_power"].items():
                lines.append(f"| {power} | {s['n']} | {s['mean']:.2f} | "
                             f"[{s['ci_low']:.2f}, {s['ci_high']:.2f}] |")
    return "\n".join(lines) + "\n"


def protocol_markdown(meta: dict[str, Any]) -> str:
    """The protocol an evaluation's meta records (`coplay.eval.ruler.protocol_meta`) as one Markdown line,
    so the `.md` file says what its `.json` says about seeds and horizon ("" for a meta without one)."""
    spec = meta.get("protocol")
    if not isinstance(spec, dict):
        return ""
    parts = [f"games {', '.join(spec.get('games', []))}"]
    for key, what in (("seeds", "episodes per game"), ("seeds_per_seat", "episodes per seat")):
        seeds = spec.get(key) or []
        if seeds:
            parts.append(f"seeds {seeds[0]}-{seeds[-1]} ({len(seeds)} {what})")
    horizon = spec.get("max_steps")
    parts.append(f"horizon {horizon} steps" if horizon else "horizon: each game's own end")
    settings = {g: kw for g, kw in (spec.get("env_kwargs") or {}).items() if kw}
    if settings:
        parts.append(f"env_kwargs {settings}")
    return "\nProtocol: " + "; ".join(parts) + ".\n"


def write_eval(out_dir: Path, name: str, results: dict[str, Any], meta: dict[str, Any],
               league: dict[str, Any] | None = None) -> tuple[Path, Path]:
    """`<name>.json` and `<name>.md` under `out_dir`; with `league` (`League.table()`) its tables too; a meta
    with the ruler's block (`coplay.eval.ruler.ruler_meta`) adds the protocol check and the paired
    differences to the bots."""
    from coplay.driver.league import markdown_league
    from coplay.eval.ruler import ruler_markdown

    body = {"meta": meta, "results": results, **({"league": league} if league else {})}
    json_path = write_json_atomic(out_dir / f"{name}.json", body)
    text = (markdown_table(results, f"Evaluation: {name}") + protocol_markdown(meta) + ruler_markdown(meta)
            + (markdown_league(league) if league else ""))
    md_path = write_bytes_atomic(out_dir / f"{name}.md", text.encode())
    return json_path, md_path
