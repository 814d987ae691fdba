"""Step 0 of a run (docs/rewards.md, cold start): publish the fresh adapters, seed the skill banks
deterministically from expert trajectories, then optionally SFT every adapter on teacher data: `act` from the
expert bots (or an OpenAI-compatible endpoint answering the same prompts), `retrieve` labelled by the
deterministic bank's segmentation of the expert episodes, and `segment` / `contract` / `curator` from the
deterministic bank decisions recorded while seeding; the `act` examples balanced over the teacher's actions
(`sft.act_balance`, `coplay.learn.act_balance`). `ablation.variant` (`coplay.config.ablation`) turns
parts off: no SFT (`base`), no skills in the teacher prompts (`sft_only`, `grpo_no_bank`), no bank-adapter
examples when the bank is frozen, or a finished run's bank instead of the seed bank (`sft_final_bank`)."""

from __future__ import annotations

import sys
import time
from typing import Any

from coplay.agent.openai_player import OpenAIEndpoint
from coplay.config import ADAPTER_NAMES, CoplayConfig
from coplay.driver.progress import phase
from coplay.engines.base import SamplingParams
from coplay.learn.act_balance import balance_act_examples
from coplay.learn.teacher import ChatExample, bank_labels, expert_examples, openai_act_examples
from coplay.rollout.bot_episodes import play_bot_episodes
from coplay.skills.schema import Bank


def teacher_seeds(cfg: CoplayConfig) -> list[int]:
    """Teacher episodes use the last seeds of `seeds.train` (never `seeds.eval`)."""
    n = cfg.sft.episodes_per_game
    stop = cfg.seeds.train.stop
    return list(range(max(cfg.seeds.train.start, stop - n), stop))


def openai_teacher(cfg: CoplayConfig, game: str,
                   examples: list[ChatExample]) -> tuple[list[ChatExample], dict[str, int]]:
    """`sft.teacher=openai`: the endpoint answers the `act` prompts of `examples` (greedy, within the `act`
    token budget); unusable answers are dropped and counted. No usable answer at all is an error, not an
    SFT on nothing."""
    sampling = SamplingParams(temperature=0.0, max_tokens=cfg.sampling.max_tokens["act"])
    answered, counts = openai_act_examples(game, examples, OpenAIEndpoint.from_config(cfg.sft.endpoint),
                                           sampling, cfg.sft.endpoint.concurrency)
    if counts["prompts"] and not counts["kept"]:
        raise RuntimeError(f"sft.teacher=openai: {cfg.sft.endpoint.base_url} (model "
                           f"{cfg.sft.endpoint.model}) gave no usable answer for the {game} prompts "
                           f"({counts}); check the endpoint, or use sft.teacher=bots")
    return answered, counts


def cap_per_adapter(examples: list[ChatExample], limit: int | dict[str, int]) -> list[ChatExample]:
    """At most `limit` (per adapter when a mapping) examples per adapter, spread evenly over each adapter's
    list (keeps early and late game positions alike)."""
    out: list[ChatExample] = []
    for adapter in ADAPTER_NAMES:
        mine = [e for e in examples if e.adapter == adapter]
        cap = limit.get(adapter, len(mine)) if isinstance(limit, dict) else limit
        stride = max(1.0, len(mine) / max(1, cap))
        out += [mine[int(i * stride)] for i in range(min(cap, len(mine)))]
    return out


def teacher_examples(cfg: CoplayConfig, game: str, seed: int, labels: Any = None) -> list[ChatExample]:
    """The expert's `act` (and, with the bank's `labels`, `retrieve`) examples of one teacher episode, on the
    prompts the run serves: the game as `game.<game>.env_kwargs` configures it (a Candy Crush of 6 moves
    that lists what each swap clears says so in its teacher prompts too), `rollout.prompt_format`,
    `rollout.history_len`, and a skill section only where the variant plays with a bank."""
    import coplay_envs

    return expert_examples(game, [seed], coplay_envs.rules(game), cfg.rollout.history_len, cfg.sft.max_steps,
                           labels, cfg.rollout.top_k_skills, skill_section=cfg.ablation.uses_bank,
                           prompt_format=cfg.rollout.prompt_format,
                           env_kwargs=dict(cfg.game[game].env_kwargs))


def final_banks(cfg: CoplayConfig, seeded: dict[str, int]) -> dict[str, Bank]:
    """`ablation.variant=sft_final_bank`: the newest bank of each key of `ablation.bank_from`, renumbered to
    follow this run's seed version (a version is never published twice), iteration 0. {} for the other
    variants. A file that is not a bank raises `BankError` naming it."""
    out = {}
    for key, path in cfg.ablation.final_bank_files(cfg.games).items():
        bank = Bank.from_bytes(path.read_bytes(), source=str(path))
        bank.version, bank.iteration = seeded.get(key, 0) + 1, 0
        out[key] = bank
    return out


def cold_start(system: Any, cfg: CoplayConfig) -> tuple[dict[str, int], dict[str, int], dict[str, Any]]:
    """Returns (adapter versions of learner step 0, initial bank versions, report). `ablation.variant`
    decides whether SFT runs, whether its `act` prompts show skills, and which bank the run starts with."""
    ablation = cfg.ablation
    report: dict[str, Any] = {"ablation": ablation.variant}
    versions = system.publish_adapters(list(cfg.active_adapters), learner_step=0)
    seeds = teacher_seeds(cfg)
    with phase("cold start: expert episodes and seed banks", total=len(cfg.games) * len(seeds),
               unit="episodes") as bar:
        expert = []
        for game in cfg.games:
            for seed in seeds:
                # the game at its own settings, not `env_kwargs`: skills are mined from the game's dynamics,
                # which a short configured episode (Candy Crush's 6 moves) is too short to show; with it the
                # demo's seed bank came out empty
                expert += play_bot_episodes(game, "expert", [seed], cfg.sft.max_steps)
                bar.advance()
        banks = system.seed_banks(expert)
        adopted = final_banks(cfg, banks)
        if adopted:
            banks = {**banks, **system.publish_banks(adopted)}
            report["bank_from"] = {key: str(p) for key, p in ablation.final_bank_files(cfg.games).items()}
    report["seed_bank_trajectories"] = len(expert)
    if cfg.sft.enabled and ablation.runs_sft:
        labels = bank_labels(system.banks_for(banks), cfg.skill_bank) if ablation.uses_bank else None
        examples: list[ChatExample] = []
        teacher_counts: dict[str, dict[str, int]] = {}
        with phase("cold start: teacher data", total=len(cfg.games) * len(seeds), unit="episodes") as bar:
            for game in cfg.games:
                game_examples = []
                for seed in seeds:
                    game_examples += teacher_examples(cfg, game, seed, labels)
                    bar.advance()
                if cfg.sft.teacher == "openai":
                    game_examples, teacher_counts[game] = openai_teacher(cfg, game, game_examples)
                examples += game_examples
        if cfg.sft.act_balance.enabled:  # spread over the teacher's actions, so no prior to collapse onto
            examples, report["act_balance"] = balance_act_examples(
                examples, cfg.sft.max_examples()["act"], cfg.sft.act_balance.max_action_share, cfg.seeds.run)
        bank_examples = system.bank_teacher_examples() if ablation.updates_bank else []
        examples = cap_per_adapter(examples + bank_examples, cfg.sft.max_examples())
        started = time.perf_counter()
        epochs = f"{cfg.sft.epochs} epoch" + ("s" if cfg.sft.epochs != 1 else "")
        with phase(f"cold start: SFT of {len(examples)} examples, {epochs}",
                   unit="batches") as bar:
            report["sft"] = system.learner.sft(examples, cfg.sft.epochs, cfg.sft.lr, cfg.sft.min_batches(),
                                               progress=bar)
        report["sft_seconds"] = time.perf_counter() - started
        for adapter, trained in report["sft"].items():
            if trained.get("over_max_tokens"):
                budget = cfg.sampling.max_tokens[adapter]
                print(f"coplay: {trained['over_max_tokens']} of {trained['examples']} {adapter} teacher "
                      f"answers are longer than sampling.max_tokens.{adapter}={budget}; the engines cut such "
                      f"answers off, so raise it", file=sys.stderr)
        if teacher_counts:
            report["sft"]["openai_teacher"] = teacher_counts
        versions.update(system.publish_adapters(sorted({e.adapter for e in examples}), learner_step=0))
    return versions, banks, report
