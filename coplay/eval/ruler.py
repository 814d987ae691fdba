"""The ruler: the games' bots played on an evaluation's own protocol, so every score that is used as evidence
sits next to scores whose difference is known, and the protocol is checked before a comparison is reported.

- `bot_results` plays the random and expert bots (and a game's cheap heuristic where it has one: on 2048
  `FixedOrderBot`, the first legal of left, down, right, up; on Candy Crush `GreedyClearBot`, the most
  candies cleared at once) on the protocol's seeds, episodes and horizon in this process
  (`coplay.eval.runner`; bots are cheap), and with a folder writes each as `bots-<bot>.json` whose meta
  names the protocol (reused when the protocol matches, never overwritten when it does not);
- `protocol_check` passes for a game when the expert's 95% t-interval lies entirely above the random bot's:
  a protocol on which the strongest and the weakest player cannot be told apart cannot tell two learners
  apart either, and its comparisons are labelled `FAILED_LABEL`, never reported as results;
- `vs_bots` pairs an evaluation with each bot seed by seed (`coplay.eval.stats.paired_difference`);
- `ruler_meta` is all of it as one block for an evaluation file's meta; `ruler_markdown` shows it.
Single-player games only (multi-seat games are scored by win rates against opponents, not by this ruler).
Never imports ray, torch or an engine: no model plays here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from coplay.config import CoplayConfig, EvalConfig
from coplay.eval.stats import paired_difference
from coplay.types import Step, Trajectory

RULER_BOTS = ("random", "expert")
# game -> (a bot class, `Bot(seed=...)`; what it plays)
HEURISTICS = {"2048": ("coplay_envs.game2048.bots:FixedOrderBot", "first legal of left, down, right, up"),
              "candy_crush": ("coplay_envs.candy.bots:GreedyClearBot", "most candies cleared at once")}
RULE = "passes when the expert bot's 95% t-interval lies entirely above the random bot's"
FAILED_LABEL = "protocol check FAILED: the bots do not separate on this protocol; not a result"


def ruler_games(cfg: CoplayConfig, games: list[str] | None = None) -> list[str]:
    """The single-player games among `games` (default the config's)."""
    import coplay_envs

    return [g for g in (games if games is not None else cfg.games) if not coplay_envs.seats(g)]


def bots_for(games: list[str]) -> list[str]:
    """Who the ruler plays on these games: random, expert, and heuristic where one of them has one."""
    return [*RULER_BOTS, *(["heuristic"] if any(g in HEURISTICS for g in games) else [])]


def protocol_of(cfg: CoplayConfig, games: list[str], protocol: EvalConfig | None = None) -> dict[str, Any]:
    """What makes two evaluations comparable: games, start seeds, episodes, horizon (`max_steps`; None: each
    game's own end) and each game's env_kwargs (Candy Crush's `max_moves` is part of the game). `seeds` are
    the single-player games' start seeds, `seeds_per_seat` those each seat of a multi-seat game plays (each
    only where such a game is evaluated). The keys `coplay eval --compare` checks (`episodes_single`,
    `episodes_per_seat`, `seeds_eval_start`, `max_steps`, `env_kwargs`) are among them."""
    import coplay_envs

    p = protocol or cfg.eval
    start = cfg.seeds.eval.start
    body: dict[str, Any] = {"games": list(games), "episodes_single": p.episodes,
                            "episodes_per_seat": p.episodes_per_seat, "seeds_eval_start": start,
                            "max_steps": p.max_steps or cfg.rollout.max_steps,
                            "env_kwargs": {g: dict(cfg.game[g].env_kwargs) for g in games}}
    if any(not coplay_envs.seats(g) for g in games):
        body["seeds"] = [start + i for i in range(p.episodes)]
    if any(coplay_envs.seats(g) for g in games):
        body["seeds_per_seat"] = [start + i for i in range(p.episodes_per_seat)]
    return json.loads(json.dumps(body))  # as it reads back from a file (tuples become lists)


PROTOCOL_FIELDS = ("games", "episodes_single", "episodes_per_seat", "seeds_eval_start", "seeds",
                   "seeds_per_seat", "max_steps")


def protocol_meta(cfg: CoplayConfig, games: list[str], protocol: EvalConfig | None = None) -> dict[str, Any]:
    """What every evaluation file's meta records, whoever wrote it (`coplay eval`, the loop's evaluations,
    the ruler's bots): the whole protocol as `protocol`, and its seeds, episodes and horizon at the top level
    too, where a reader of the file looks first."""
    spec = protocol_of(cfg, games, protocol)
    return {"protocol": spec, **{k: spec[k] for k in PROTOCOL_FIELDS if k in spec}}


def play_heuristic(cfg: CoplayConfig, game: str, protocol: EvalConfig | None = None) -> list[Trajectory]:
    """`HEURISTICS[game]` on the protocol's seeds and horizon: the same env, reset seed and step cap as the
    bots' evaluation episodes (the registry's `make_bot` knows only expert and random: it is driven here)."""
    from coplay_envs import make_env
    from coplay_envs.registry import resolve

    p = protocol or cfg.eval
    max_steps = p.max_steps or cfg.rollout.max_steps
    bot_class = resolve(HEURISTICS[game][0])
    trajectories = []
    for i in range(p.episodes):
        seed = cfg.seeds.eval.start + i
        env, bot = make_env(game, **dict(cfg.game[game].env_kwargs)), bot_class(seed=seed)
        traj = Trajectory(episode_id=f"eval-heuristic-{game}-s{seed}", game=game, seat="player_0",
                          role="player", seed=seed, policy="heuristic")
        try:
            obs, info = env.reset(seed=seed)
            done = False
            while not done and (max_steps is None or len(traj.steps) < max_steps):
                action = bot.act(obs, info).action
                step = Step(t=len(traj.steps), observation=str(obs), action=action, reward=0.0,
                            score=float(info.get("score", 0.0)))
                obs, reward, terminated, truncated, info = env.step(action)
                step.reward, step.score = float(reward), float(info.get("score", step.score))
                traj.steps.append(step)
                done = bool(terminated or truncated)
                traj.terminated, traj.truncated = bool(terminated), bool(truncated)
            traj.truncated = traj.truncated or not done
            traj.score = float(info.get("score", 0.0))
        finally:
            env.close()
        trajectories.append(traj)
    return trajectories


def play_bot(cfg: CoplayConfig, bot: str, games: list[str],
             protocol: EvalConfig | None = None) -> dict[str, Any]:
    """One bot on `games` under the protocol; results per game as `summarize_eval` writes them."""
    from coplay.eval.protocol import eval_plans, evaluated, summarize_eval
    from coplay.eval.runner import play_plans
    from coplay.rollout.model_episodes import SeatPlayer

    if bot == "heuristic":
        return summarize_eval([t for g in games if g in HEURISTICS for t in play_heuristic(cfg, g, protocol)])
    if bot not in RULER_BOTS:
        raise ValueError(f"ruler bot {bot!r}: expected one of {', '.join((*RULER_BOTS, 'heuristic'))}")
    plans = [p for p in eval_plans(cfg, SeatPlayer(bot), f"bot-{bot}", protocol) if p.game in games]
    return summarize_eval(evaluated(play_plans(cfg, plans), plans))


def _bot_files(out_dir: Path, bot: str) -> list[Path]:
    return sorted([*out_dir.glob(f"bots-{bot}.json"), *out_dir.glob(f"bots-{bot}-*.json")])


def _matching_file(out_dir: Path, bot: str, protocol: dict[str, Any]) -> tuple[Path, dict[str, Any]] | None:
    """A `bots-<bot>*.json` written on exactly this protocol, with its results."""
    for path in _bot_files(out_dir, bot):
        try:
            body = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue  # an unreadable file is not this protocol's; a new one is written beside it
        if isinstance(body, dict) and body.get("meta", {}).get("protocol") == protocol:
            return path, body["results"]
    return None


def bot_results(cfg: CoplayConfig, games: list[str] | None = None, protocol: EvalConfig | None = None,
                out_dir: Path | None = None) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """The ruler's bots on the single-player `games` (default the config's) under `protocol` (default
    `cfg.eval`): ({bot: results per game}, {bot: file name}). With `out_dir`, a `bots-<bot>*.json` of the
    same protocol is read instead of replayed, and a new one is written as `bots-<bot>.json` (or
    `bots-<bot>-2.json`, ... beside files of other protocols)."""
    from coplay.eval.policies import unused_stem
    from coplay.eval.protocol import write_eval

    games = ruler_games(cfg, games)
    if not games:
        return {}, {}
    spec = protocol_of(cfg, games, protocol)
    results, files = {}, {}
    for bot in bots_for(games):
        found = _matching_file(out_dir, bot, spec) if out_dir is not None else None
        if found is not None:
            files[bot], results[bot] = found[0].name, found[1]
            continue
        results[bot] = play_bot(cfg, bot, games, protocol)
        if out_dir is not None:
            plays = "; ".join(f"{g}: {HEURISTICS[g][1]}" for g in games if g in HEURISTICS)
            label = f"{bot} bot" + (f" ({plays})" if bot == "heuristic" else "")
            meta = {"label": label, "player": bot, "ruler": True, **protocol_meta(cfg, games, protocol)}
            path, _ = write_eval(out_dir, unused_stem(out_dir, f"bots-{bot}"), results[bot], meta)
            files[bot] = path.name
    return results, files


def _figure(score: dict[str, Any]) -> dict[str, Any]:
    return {"n": score["n"], "mean": score["mean"], "ci95": [score["ci_low"], score["ci_high"]]}


def protocol_check(bots: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per game both bots played: passed (the expert's 95% t-interval entirely above the random bot's), the
    reason in words, and each bot's n, mean and interval."""
    out = {}
    for game in sorted(set(bots.get("random", {})) & set(bots.get("expert", {}))):
        figures = {bot: _figure(bots[bot][game]["score"]) for bot in bots if game in bots[bot]}
        r, x = figures["random"], figures["expert"]
        passed = x["ci95"][0] > r["ci95"][1]
        where = "lies entirely above" if passed else "does not lie entirely above"
        reason = (f"expert {x['mean']:.1f} [{x['ci95'][0]:.1f}, {x['ci95'][1]:.1f}] {where} random "
                  f"{r['mean']:.1f} [{r['ci95'][0]:.1f}, {r['ci95'][1]:.1f}] (95% t-intervals, n = {x['n']})")
        out[game] = {"passed": passed, "reason": reason, **figures}
    return out


def vs_bots(results: dict[str, Any], bots: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per game and bot: the evaluated player minus the bot, paired over their shared start seeds (None
    where they share fewer than 2, e.g. a file written before per-seed scores)."""
    out: dict[str, dict[str, Any]] = {}
    for game, entry in results.items():
        for bot, bot_res in bots.items():
            if game in bot_res:
                paired = paired_difference(bot_res[game].get("per_seed", {}), entry.get("per_seed", {}))
                out.setdefault(game, {})[bot] = paired.as_dict() if paired is not None else None
    return out


def ruler_meta(cfg: CoplayConfig, results: dict[str, Any] | None = None, out_dir: Path | None = None,
               protocol: EvalConfig | None = None) -> dict[str, Any]:
    """The block an evaluation file's meta carries: `protocol_check` (rule, protocol, passed, per game),
    the bots' files and, given the evaluated `results`, `vs_bots` (paired by seed). {} when `eval.ruler` is
    off or no game is single-player."""
    if not cfg.eval.ruler:
        return {}
    games = ruler_games(cfg, sorted(results) if results is not None else None)
    bots, files = bot_results(cfg, games, protocol, out_dir)
    if not bots:
        return {}
    checks = protocol_check(bots)
    block: dict[str, Any] = {"protocol_check": {"rule": RULE, "protocol": protocol_of(cfg, games, protocol),
                                                "passed": all(c["passed"] for c in checks.values()),
                                                "games": checks},
                             "bot_files": files}
    if results is not None:
        block["vs_bots"] = vs_bots(results, bots)
    return block


def failed_games(meta: dict[str, Any]) -> list[str]:
    """The games whose protocol check, as recorded in an evaluation's meta, failed."""
    games = (meta.get("protocol_check") or {}).get("games") or {}
    return sorted(g for g, c in games.items() if isinstance(c, dict) and c.get("passed") is False)


def _horizon(max_steps: int | None) -> str:
    return f"{max_steps} steps" if max_steps else "the game's own"


def _ci(values: list[float] | None) -> str:
    return "-" if not values else f"[{values[0]:.1f}, {values[1]:.1f}]"


def ruler_markdown(meta: dict[str, Any]) -> str:
    """The protocol check and the paired differences to the bots as Markdown ("" without them)."""
    check = meta.get("protocol_check")
    if not isinstance(check, dict) or not check.get("games"):
        return ""
    spec = check.get("protocol", {})
    lines = ["", "## Protocol check: the bots on the same seeds and horizon", "",
             f"{len(spec.get('seeds', []))} seeds from {spec.get('seeds_eval_start')}, horizon "
             f"{_horizon(spec.get('max_steps'))}; the check {check.get('rule', RULE)}.", "",
             "| game | random | expert | heuristic | check |", "|---|---|---|---|---|"]
    for game, c in sorted(check["games"].items()):
        cells = [f"{c[b]['mean']:.1f} {_ci(c[b]['ci95'])}" if b in c else "-"
                 for b in ("random", "expert", "heuristic")]
        verdict = "passed" if c["passed"] else f"**{FAILED_LABEL}**"
        lines.append(f"| {game} | {' | '.join(cells)} | {verdict} |")
    paired = meta.get("vs_bots") or {}
    if paired:
        lines += ["", "## Against the bots, paired by start seed (player − bot)", "",
                  "| game | bot | shared seeds | player − bot | 95% CI (t) | 95% CI (bootstrap) | note |",
                  "|---|---|---|---|---|---|---|"]
        failed = set(failed_games(meta))
        for game, rows in sorted(paired.items()):
            note = FAILED_LABEL if game in failed else ""
            for bot, d in rows.items():
                if d is None:
                    lines.append(f"| {game} | {bot} | 0 | - | - | - | no shared seeds |")
                    continue
                lines.append(f"| {game} | {bot} | {d['n']} | {d['difference']:+.1f} | "
                             f"{_ci([d['ci_low'], d['ci_high']])} | {_ci([d['boot_low'], d['boot_high']])} | "
                             f"{note} |")
    return "\n".join(lines) + "\n"
