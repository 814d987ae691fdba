"""Step 0 of a run: publish the fresh adapters, optionally SFT `act` on expert teacher data, and seed the
skill banks deterministically from expert trajectories (DESIGN.md §5, cold start)."""

from __future__ import annotations

from typing import Any

from coplay.config import ADAPTER_NAMES, CoplayConfig
from coplay.learn.teacher import expert_act_examples
from coplay.rollout.bot_episodes import play_bot_episodes


def teacher_seeds(cfg: CoplayConfig) -> list[int]:
    """Teacher episodes use the last seeds of `seeds.train` (never `seeds.eval`)."""
    n = cfg.sft.episodes_per_game
    stop = cfg.seeds.train.stop
    return list(range(max(cfg.seeds.train.start, stop - n), stop))


def cold_start(system: Any, cfg: CoplayConfig) -> tuple[dict[str, int], dict[str, int], dict[str, Any]]:
    """Returns (adapter versions of learner step 0, initial bank versions, report)."""
    import coplay_envs

    report: dict[str, Any] = {}
    versions = system.publish(list(ADAPTER_NAMES), learner_step=0)
    seeds = teacher_seeds(cfg)
    if cfg.sft.enabled and cfg.sft.teacher == "bots":
        examples = []
        for game in cfg.games:
            examples += expert_act_examples(game, seeds, coplay_envs.rules(game), cfg.rollout.history_len,
                                            max_steps=cfg.rollout.max_steps)
        report["sft"] = system.learner.sft(examples, cfg.sft.epochs, cfg.sft.lr)
        report["sft"]["examples"] = len(examples)
        versions.update(system.publish(["act"], learner_step=0))
    elif cfg.sft.enabled:
        raise ValueError("sft.teacher=openai needs the `api` extra and an endpoint; use sft.teacher=bots")
    expert = [t for game in cfg.games
              for t in play_bot_episodes(game, "expert", seeds[: max(4, len(seeds) // 4)], cfg.rollout.max_steps)]
    banks = system.seed_banks(expert)
    report["seed_bank_trajectories"] = len(expert)
    return versions, banks, report
