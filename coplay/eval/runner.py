"""One in-process runner for `coplay eval`, `coplay play` and the benchmarks: an engine serving given
adapter versions, and episode plans played in this process by the same episode runners the rollout workers
use (`coplay.rollout.model_episodes`), with skills from given banks. No ray; the engine backend is imported
only when a model plays.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from coplay.config import CoplayConfig, EvalConfig
from coplay.driver.progress import phase
from coplay.eval.protocol import eval_plans, evaluated, player_seat, summarize_eval
from coplay.rollout.env_hosts import EnvHosts
from coplay.rollout.model_episodes import EpisodePlan, RunnerContext, play_episodes
from coplay.types import Step, Trajectory


def open_engine(cfg: CoplayConfig, adapters: Mapping[str, Path] | None = None) -> Any:
    """The configured engine, serving the adapter version folders given by engine name (`act@v3` ->
    `adapters/act/v3`), each checked against its manifest. The engine is closed again if a load fails."""
    from coplay.artifacts import read_adapter_version
    from coplay.engines.base import parse_engine_name
    from coplay.engines.factory import make_engine

    engine = make_engine(cfg.model, cfg.engine, seed=cfg.seeds.run)
    try:
        for name, folder in (adapters or {}).items():
            adapter, version = parse_engine_name(name)
            bundle, _ = read_adapter_version(folder)
            engine.load_adapter(adapter, version, bundle.files, bundle.sha256)
    except BaseException:
        engine.close()  # the engine may hold processes (vLLM); the load error propagates
        raise
    return engine


def skills_from(banks: Mapping[str, Any] | None) -> Callable[[str, str], Any]:
    """The runners' `skills_for(game, role)` over banks by bank key (no bank, or an empty one: no skills)."""
    from coplay.agent.bank_view import BankSkills
    from coplay.skills.schema import bank_key_for

    def skills(game: str, role: str) -> Any:
        bank = (banks or {}).get(bank_key_for(game, role=role))
        return BankSkills(bank) if bank is not None and bank.skills else None

    return skills


def play_plans(cfg: CoplayConfig, plans: list[EpisodePlan], engine: Any = None,
               banks: Mapping[str, Any] | None = None, description: str | None = None, *,
               on_step: Callable[[Trajectory, Step], None] | None = None,
               on_episode: Callable[[list[Trajectory]], None] | None = None,
               concurrency: int | None = None) -> list[Trajectory]:
    """Play the plans in this process (bots need no engine; model seats need one serving their versions);
    with `description`, a progress bar of the episodes under that name. `on_step` / `on_episode` see each
    move and each finished episode as they happen (`RunnerContext`); `concurrency` (default
    `rollout.concurrent_episodes`) caps the episodes in flight (1: one episode's moves at a time)."""
    import coplay_envs

    hosts = EnvHosts(cfg.rollout.env_processes) if cfg.rollout.env_processes else None
    ctx = RunnerContext(engine=engine, rules=coplay_envs.rules, skills_for=skills_from(banks),
                        run_seed=cfg.seeds.run, env_threads=cfg.rollout.env_threads, env_hosts=hosts,
                        on_step=on_step, on_episode=on_episode)
    concurrency = concurrency or cfg.rollout.concurrent_episodes
    try:
        if description is None:
            return asyncio.run(play_episodes(ctx, plans, concurrency))
        with phase(description, len(plans), "episodes") as bar:
            return asyncio.run(play_episodes(ctx, plans, concurrency, bar.advance))
    finally:
        if hosts is not None:
            hosts.close()


def evaluate_locally(cfg: CoplayConfig, player: str, protocol: EvalConfig | None = None, engine: Any = None,
                     versions: dict[str, int] | None = None) -> tuple[dict[str, Any], list[Trajectory]]:
    """The evaluation protocol in this process for `expert`, `random` or `model` (at adapter `versions`,
    which `engine` serves); returns (summary per game, the evaluated trajectories)."""
    plans = eval_plans(cfg, player_seat(cfg, player, versions), player, protocol)
    trajectories = evaluated(play_plans(cfg, plans, engine), plans)
    return summarize_eval(trajectories), trajectories
