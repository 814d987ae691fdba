"""Who plays in `coplay eval`: the player, and the opponents of multi-seat games, from a short spec.

    expert | random   the games' bots
    base              the configured base model without adapters (no skills), through the configured engine
    model             a run's `act` and `retrieve` adapters at learner step K (default: the newest step on
                      disk), loaded from `adapters/<a>/v<n>/` into the engine, with the run's newest banks
    openai            the OpenAI-compatible endpoint of `rollout.opponents.openai_*` (same prompts, parsing)

Skills come from the banks of the players that have them (a run's `model`); every model seat of one
evaluation sees the same banks. The protocol is `coplay.eval`'s (seeds.eval, 16 episodes per single-player game, 10 per seat in Avalon and
Diplomacy, eval temperature); this module only builds the players and the engine, runs the plans in this
process and writes `eval/<name>.json` + `.md`. No ray; the engine backend is imported only when a model plays.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from coplay.config import CoplayConfig
from coplay.eval import EvalProtocol, eval_plans, evaluated, summarize_eval, write_eval
from coplay.iteration import MULTI_SEAT, model_seat
from coplay.rollout.model_episodes import RunnerContext, SeatPlayer, play_episodes
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
            record = next((folder / n for n in ("manifest.json", "version.json") if (folder / n).is_file()), None)
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
            raise ValueError(f"{run.root}: no {adapter} version was published at or before learner step {step}; "
                             f"published (step, version): {sorted(rows)}")
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
                          detail={"model": cfg.model.name_or_path, "adapters": None})
    if spec == "openai":
        from coplay.agent.openai_player import OpenAIEndpoint

        endpoint = OpenAIEndpoint.from_config(cfg.rollout.opponents)
        return EvalPlayer(spec, SeatPlayer("openai", seat, endpoint),
                          detail={"endpoint": endpoint.base_url, "endpoint_model": endpoint.model})
    if spec == "model":
        if run is None:
            raise ValueError("--policy model evaluates a run's adapters: give the run folder (coplay eval RUN_DIR)")
        step, versions = adapter_versions_at(run, step)
        seat = model_seat(cfg, versions, evaluation=True)
        adapters = {f"{a}@v{v}": run.adapter_dir(a, v) for a, v in versions.items()}
        banks = _newest_banks(run)
        return EvalPlayer(spec, SeatPlayer("model", seat), adapters, banks,
                          {"learner_step": step, "versions": versions,
                           "bank_versions": {k: b.version for k, b in banks.items()}})
    raise ValueError(f"player {spec!r}: expected one of {', '.join(PLAYERS)}")


def _skills_for(banks: dict[str, Any]) -> Any:
    from coplay.agent.bank_view import BankSkills
    from coplay.skills.schema import bank_key_for

    def skills(game: str, role: str) -> Any:
        bank = banks.get(bank_key_for(game, role=role))
        return BankSkills(bank) if bank is not None and bank.skills else None

    return skills


def run_eval(cfg: CoplayConfig, player: EvalPlayer, opponent: EvalPlayer | None, protocol: EvalProtocol,
             engine: Any = None) -> tuple[dict[str, Any], int]:
    """Play the protocol's episodes in this process; returns (results, trajectories evaluated)."""
    import coplay_envs

    kind = "self" if opponent is None else opponent.spec if opponent.spec in ("expert", "random") else "expert"
    plans = eval_plans(cfg, player.seat, replace(protocol, opponents=kind), player.spec)
    if opponent is not None and opponent.spec not in ("expert", "random"):
        for plan in plans:
            if plan.game in MULTI_SEAT:
                plan.default = opponent.seat
    banks = {**(opponent.banks if opponent else {}), **player.banks}
    ctx = RunnerContext(engine=engine, rules=coplay_envs.rules, skills_for=_skills_for(banks), run_seed=cfg.seeds.run)
    trajectories = evaluated(asyncio.run(play_episodes(ctx, plans, cfg.rollout.concurrent_episodes)), plans)
    return summarize_eval(trajectories), len(trajectories)


def _engine_for(cfg: CoplayConfig, players: list[EvalPlayer]) -> Any:
    from coplay.engines.adapters import adapter_bundle
    from coplay.engines.base import parse_engine_name
    from coplay.engines.factory import make_engine

    engine = make_engine(cfg.model, cfg.engine, seed=cfg.seeds.run)
    try:
        for p in players:
            for name, folder in p.adapters.items():
                adapter, version = parse_engine_name(name)
                files, sha256 = adapter_bundle(folder)
                engine.load_adapter(adapter, version, files, sha256)
    except BaseException:
        engine.close()  # the engine may hold processes (vLLM); the load error propagates
        raise
    return engine


def eval_command(args: Any) -> int:
    """`coplay eval [RUN_DIR] --policy P [--opponents O] ...` (see cli.py for the flags)."""
    from coplay.config import load_config

    run_dir, overrides = args.run_dir, list(args.overrides)
    if run_dir and "=" in run_dir and not Path(run_dir).is_dir():  # no run folder: argparse took an override
        run_dir, overrides = None, [run_dir, *overrides]
    run = RunDir.open(run_dir) if run_dir else None
    config = args.config or (str(run.config_path) if run else None)
    overrides += [f"games=[{args.games}]"] if args.games else []
    cfg = load_config(config, overrides)
    protocol = EvalProtocol(
        episodes_single=cfg.loop.eval_episodes_single if args.episodes is None else args.episodes,
        episodes_per_seat=cfg.loop.eval_episodes_per_seat if args.episodes_per_seat is None else args.episodes_per_seat,
        max_steps=args.max_steps)
    if protocol.episodes_single < 1 or protocol.episodes_per_seat < 1:
        raise ValueError(f"--episodes {protocol.episodes_single} / --episodes-per-seat {protocol.episodes_per_seat}: "
                         "expected at least 1")
    opponents = args.opponents or cfg.loop.eval_opponents
    if opponents not in OPPONENTS:
        raise ValueError(f"--opponents {opponents!r}: expected one of {', '.join(OPPONENTS)}")
    player = make_player(args.policy, cfg, run, args.step)
    opponent = None if opponents == "self" else make_player(opponents, cfg, run, args.step)
    needs_engine = player.needs_engine or (opponent is not None and opponent.needs_engine)
    started = time.perf_counter()
    engine = _engine_for(cfg, [p for p in (player, opponent) if p is not None]) if needs_engine else None
    try:
        results, n = run_eval(cfg, player, opponent, protocol, engine)
    finally:
        if engine is not None:
            engine.close()
    out = Path(args.out) if args.out else (run.eval if run else Path(cfg.run.out_dir) / "eval")
    name = args.name or f"{args.policy}{'-step' + str(player.detail['learner_step']) if args.policy == 'model' else ''}"
    meta = {"player": args.policy, "opponents": opponents, "games": list(cfg.games),
            "episodes_single": protocol.episodes_single, "episodes_per_seat": protocol.episodes_per_seat,
            "max_steps": protocol.max_steps, "seeds_eval_start": cfg.seeds.eval.start,
            "temperature": cfg.sampling.eval_temperature, "trajectories": n,
            "seconds": round(time.perf_counter() - started, 1), "run": str(run.root) if run else None,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **player.detail}
    if args.policy == "model":
        meta["iteration"] = player.detail["learner_step"]
    json_path, md_path = write_eval(out, name, results, meta)
    print(md_path.read_text(), end="")
    print(f"written {json_path} and {md_path}")
    return 0
