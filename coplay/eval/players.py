"""Who plays in `coplay eval`: the player, and the opponents of multi-seat games, from a short spec.

    expert | random   the games' bots
    base              the configured base model without adapters (no skills), through the configured engine
    run:RUN_DIR[@K]   a run's `act` and `retrieve` adapters at learner step K (default: the newest step on
                      disk), loaded from `adapters/<a>/v<n>/` into the engine, with the run's newest banks
    openai            the OpenAI-compatible endpoint of `rollout.opponents.endpoint` (same prompts, parsing)

Skills come from the banks of the players that have them (a run's `model`); every model seat of one
evaluation sees the same banks. The protocol is the config's `eval` section (seeds.eval, 16 episodes per
single-player game, 10 per seat in Avalon and Diplomacy, eval temperature); this module builds the players
(the vocabulary is `coplay.eval.policies`), plays through `coplay.eval.runner` in this process and writes
`eval/<name>.json` + `.md`, with the ruler's bots on the same protocol beside it (`coplay.eval.ruler`:
`bots-<bot>.json`, the protocol check and the paired differences in the meta). No ray.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import coplay_envs
from coplay.config import CoplayConfig
from coplay.driver.league import LEAGUE_FILE, League
from coplay.driver.plans import model_seat
from coplay.eval.policies import Policy, check_step, eval_file_stem, unused_stem
from coplay.eval.protocol import eval_plans, evaluated, summarize_eval, write_eval
from coplay.eval.ruler import protocol_meta, ruler_meta
from coplay.eval.runner import open_engine, play_plans
from coplay.rollout.model_episodes import SeatPlayer
from coplay.runs import RunDir

PLAYERS = ("expert", "random", "base", "model", "openai")
OPPONENTS = ("expert", "random", "self", "base", "openai")


@dataclass
class EvalPlayer:
    """A seat player plus what the engine must serve for it: adapter folders by engine name, and banks."""

    spec: str
    seat: SeatPlayer
    adapters: dict[str, Path] = field(default_factory=dict)  # "act@v3" -> adapters/act/v3
    banks: dict[str, Any] = field(default_factory=dict)  # bank key -> Bank
    detail: dict[str, Any] = field(default_factory=dict)  # what goes into the eval file's meta

    @property
    def needs_engine(self) -> bool:
        return self.seat.kind in ("model", "frozen")


def adapter_versions_at(run: RunDir, step: int | None) -> tuple[int, dict[str, int]]:
    """The newest version of `act` and `retrieve` published at or before learner step `step` (default: the
    newest step on disk), from each version folder's `manifest.json` (the artifact store's copy) or
    `version.json` (the learner's export); returns (step, versions)."""
    published: dict[str, list[tuple[int, int]]] = {}
    for adapter in ("act", "retrieve"):
        for folder in sorted((run.root / "adapters" / adapter).glob("v*")):
            record = next((folder / n for n in ("manifest.json", "version.json")
                           if (folder / n).is_file()), None)
            if record is None:
                continue
            data = json.loads(record.read_text())
            published.setdefault(adapter, []).append((int(data["learner_step"]), int(data["version"])))
    missing = [a for a in ("act", "retrieve") if a not in published]
    if missing:
        raise FileNotFoundError(f"{run.root / 'adapters'}: no published versions of {missing} "
                                "(adapters/<adapter>/v<n>/manifest.json)")
    if step is None:
        step = max(s for rows in published.values() for s, _ in rows)
    versions = {}
    for adapter, rows in published.items():
        eligible = [v for s, v in rows if s <= step]
        if not eligible:
            raise ValueError(f"{run.root}: no {adapter} version was published at or before learner step "
                             f"{step}; published (step, version): {sorted(rows)}")
        versions[adapter] = max(eligible)
    return step, versions


def _newest_banks(run: RunDir) -> dict[str, Any]:
    from coplay.skills.schema import bank_keys, load_bank

    return {key: load_bank(run, key) for key in bank_keys(run)}


def make_player(spec: str, cfg: CoplayConfig, run: RunDir | None, step: int | None) -> EvalPlayer:
    """The player for a spec (see the module docstring)."""
    if spec in ("expert", "random"):
        return EvalPlayer(spec, SeatPlayer(spec))
    seat = model_seat(cfg, {"act": 0, "retrieve": 0}, evaluation=True)
    if spec == "base":
        return EvalPlayer(spec, SeatPlayer("model", replace(seat, act=None, retrieve=None)),
                          detail={"model": cfg.model.name, "adapters": None})
    if spec == "openai":
        from coplay.agent.openai_player import OpenAIEndpoint

        endpoint = OpenAIEndpoint.from_config(cfg.rollout.opponents.endpoint)
        return EvalPlayer(spec, SeatPlayer("openai", seat, endpoint),
                          detail={"endpoint": endpoint.base_url, "endpoint_model": endpoint.model})
    if spec == "model":
        if run is None:
            raise ValueError("a run's adapters need its folder: --policy run:RUN_DIR[@STEP]")
        step, versions = adapter_versions_at(run, step)
        seat = model_seat(cfg, versions, evaluation=True)
        adapters = {f"{a}@v{v}": run.adapter_dir(a, v) for a, v in versions.items()}
        banks = _newest_banks(run)
        return EvalPlayer(spec, SeatPlayer("model", seat), adapters, banks,
                          {"learner_step": step, "versions": versions,
                           "bank_versions": {k: b.version for k, b in banks.items()}})
    raise ValueError(f"player {spec!r}: expected one of {', '.join(PLAYERS)}")


def run_players(cfg: CoplayConfig, player: EvalPlayer, opponent: EvalPlayer | None,
                engine: Any = None, league: League | None = None) -> tuple[dict[str, Any], int]:
    """Play the protocol's episodes (`cfg.eval`) in this process; returns (results, trajectories
    evaluated). Multi-seat games also rate the `league`'s members."""
    kind = ("self" if opponent is None
            else opponent.spec if opponent.spec in ("expert", "random") else "expert")
    plans = eval_plans(cfg, player.seat, player.spec, cfg.eval.model_copy(update={"opponents": kind}))
    if opponent is not None and opponent.spec not in ("expert", "random"):
        for plan in plans:
            if coplay_envs.seats(plan.game):
                plan.default = opponent.seat
    banks = {**(opponent.banks if opponent else {}), **player.banks}
    played = play_plans(cfg, plans, engine, banks, f"evaluate {player.spec}")
    if league is not None:
        league.play(played)
    trajectories = evaluated(played, plans)
    return summarize_eval(trajectories), len(trajectories)


def run_evaluation(cfg: CoplayConfig, policy: Policy, opponents: str | None, out: Path | None = None,
                   name: str | None = None) -> tuple[Path, Path]:
    """`coplay eval`: evaluate `policy` against `opponents` (default `eval.opponents`) on the protocol of
    `cfg.eval`; writes `<name>.json` and `.md` under `out` (default the run's `eval/` for a run policy, else
    `<run.out_dir>/eval`) and returns their paths. Files are named by policy, step, games, opponents and
    seeds (`eval_file_stem`) and never overwritten."""
    opponents = opponents or cfg.eval.opponents
    if opponents not in OPPONENTS:
        raise ValueError(f"--opponents {opponents!r}: expected one of {', '.join(OPPONENTS)}")
    run = RunDir.open(policy.run_dir) if policy.run_dir is not None else None
    if run is not None:
        check_step(run.root, policy.step)
    player = make_player("model" if policy.kind == "run" else policy.kind, cfg, run, policy.step)
    opponent = None if opponents == "self" else make_player(opponents, cfg, run, policy.step)
    seated = [p for p in (player, opponent) if p is not None]
    started = time.perf_counter()
    engine = open_engine(cfg, {k: v for p in seated for k, v in p.adapters.items()}) \
        if any(p.needs_engine for p in seated) else None
    league = run_league(cfg, run)
    try:
        results, n = run_players(cfg, player, opponent, engine, league)
    finally:
        if engine is not None:
            engine.close()
    out = out or (run.eval if run else Path(cfg.run.out_dir) / "eval")
    label = f"run-step{player.detail['learner_step']}" if policy.kind == "run" else policy.kind
    # single-player games only: nobody else sits at the table, so no opponents in the name or the meta
    at_table = opponents if any(coplay_envs.seats(g) for g in cfg.games) else None
    stem = name or eval_file_stem(label, list(cfg.games), at_table, cfg.seeds.eval.start, cfg.eval.episodes,
                                  cfg.eval.episodes_per_seat)
    meta = {"player": label, "policy": policy.spec, "opponents": at_table,
            **protocol_meta(cfg, list(cfg.games)),  # seeds, episodes, horizon, env_kwargs
            "temperature": cfg.eval.temperature, "trajectories": n,
            "seconds": round(time.perf_counter() - started, 1), "run": str(run.root) if run else None,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **player.detail}
    if policy.kind == "run":
        meta["iteration"] = player.detail["learner_step"]
    # the bots on the same protocol, written beside it as bots-<bot>.json, and the protocol check
    meta.update(ruler_meta(cfg, results, out))
    return write_eval(out, unused_stem(out, stem), results, meta, league.table())


def run_league(cfg: CoplayConfig, run: RunDir | None) -> League:
    """The league `coplay eval` rates its games in: the run's `league.json` where there is one (its ratings
    are the starting point; the run's file is never rewritten), else a fresh one."""
    league = League(cfg.rollout.selfplay.league)
    path = run.root / LEAGUE_FILE if run else None
    if path is not None and path.is_file():
        try:
            league.load_json(json.loads(path.read_text()), str(path))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: not a readable league ({exc}); move it away to rate from scratch") \
                from None
    return league
