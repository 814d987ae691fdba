"""A realistic run folder for the report tests, built from real parts: 2048 expert-bot trajectories relabelled
as the policy's, `coplay.driver.metrics.iteration_record` for every metrics line (so the lines have exactly
the loop's shape), banks made by `coplay.skills.update_bank` and saved with `save_bank`, and evaluations
written by `coplay.eval.protocol.write_eval` from `summarize_eval` (2048 at two iterations, a random-bot
baseline, and Avalon with win rates). Each iteration's trajectories are written as a shard, their 2048 steps
marked with the skills the bank labels them with (what the skill analysis reads). Every line carries the
phase timeline (`coplay.driver.phases`), from laps as the loop takes them.
"""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

from coplay.config import CoplayConfig, LeagueConfig, SkillBankConfig
from coplay.driver.league import League
from coplay.driver.metrics import iteration_record, reward_parts
from coplay.driver.phases import Laps, phase_record, start_busy
from coplay.driver.records import CollectStats, IterationData
from coplay.eval.protocol import summarize_eval, write_eval
from coplay.rollout.bot_episodes import play_bot_episodes
from coplay.runs import RunDir
from coplay.skills import Bank, update_bank
from coplay.skills.schema import save_bank
from coplay.skills.update import segment_with_bank
from coplay.types import BankUpdate, Sample, Shard, TrainStep, Trajectory, write_shard

ITERATIONS = 4
ADAPTERS = ("act", "retrieve", "segment", "contract", "curator")


def _samples(rng: random.Random, iteration: int, n: int) -> list[Sample]:
    out = []
    for i in range(n):
        adapter = ADAPTERS[i % len(ADAPTERS)]
        out.append(Sample(adapter=adapter, adapter_version=iteration, prompt_ids=[1, 2, 3],
                          completion_ids=[4, 5], logprobs=[-0.5, -0.7], group_id=f"g{i % 3}",
                          reward=rng.gauss(0.1 * iteration, 0.5)))
    return out


def _as_policy(trajs: list[Trajectory], iteration: int, rng: random.Random) -> list[Trajectory]:
    """Expert trajectories standing in for the policy's (`policy='model'`), scores rising with the
    iteration."""
    return [replace(t, policy="model", iteration=iteration, score=t.score * (0.6 + 0.1 * iteration),
                    samples=_samples(rng, iteration, 10)) for t in trajs]


def _run_skills(trajs: list[Trajectory], bank: Bank, cfg: SkillBankConfig) -> None:
    """Mark the steps as the decision agent records them: each step inside a segment the bank labels with a
    skill runs that skill, and its last step ends it with success."""
    for traj in trajs:
        for seg in segment_with_bank(bank, traj, cfg):
            if seg.label in bank.skills:
                for step in traj.steps[seg.start:seg.end]:
                    step.skill_id = seg.label
                traj.steps[seg.end - 1].skill_event = "success"


def _train(iteration: int, rng: random.Random) -> TrainStep:
    adapters = {a: {"loss": rng.uniform(-0.1, 0.3), "pg_loss": rng.uniform(-0.1, 0.2),
                    "kl": 0.001 * iteration,
                    "clip_fraction": rng.uniform(0, 0.2), "ratio_mean": 1.0 + rng.uniform(-0.01, 0.01),
                    "grad_norm": rng.uniform(0.1, 2.0), "samples": 40} for a in ADAPTERS}
    return TrainStep(learner_step=iteration - 1, adapters=adapters, trained_tokens=5000 + 100 * iteration,
                     published={a: iteration for a in ADAPTERS}, seconds=2.0 + rng.random(),
                     reward_parts=reward_parts(_samples(rng, iteration - 1, 10)),
                     timings={"batch_s": 0.1, "forward_s": 0.6, "backward_s": 0.9, "optimizer_s": 0.1,
                              "step_s": 1.7, "export_s": 0.2, "publish_s": 0.3, "measure_s": 0.4})


def _laps(iteration: int) -> Laps:
    """The driver's laps of one iteration, as the loop takes them (evaluations and checkpoints every other
    iteration)."""
    seconds = {"publish_sync": 0.5 + 0.1 * iteration, "rollouts": 30.0 + iteration, "learner": 3.0,
               "bank_update": 0.4 * iteration, "curriculum": 0.0, "evaluation": 4.0 * (iteration % 2 == 0),
               "checkpoint": 1.5 * (iteration % 2 == 1)}
    return Laps(sum(seconds.values()) + 0.2, seconds)


def _league_games(league: League, iteration: int) -> list[Trajectory]:
    """Real Avalon games of the random bot relabelled as a line-up: the policy at version iteration-1 in
    two seats, the expert label in one, random in two (ratings move, nothing is claimed about strength);
    returns the games' trajectories."""
    games = play_bot_episodes("avalon", "random", [10 * iteration + i for i in range(3)])
    labels = {"player_0": "model", "player_1": "model", "player_2": "expert"}
    mine = ("player_0", "player_1")
    played = [replace(t, policy=labels.get(t.seat, "random"), episode_id=f"avalon-s{t.seed}",
                      adapter_versions={"act": iteration - 1} if t.seat in mine else {}) for t in games]
    league.play(played)
    return played


def build_run(root: Path, games_dir_name: str = "synthetic") -> RunDir:
    rng = random.Random(7)
    cfg = CoplayConfig()
    run = RunDir.create(root, games_dir_name, cfg.to_yaml(), when=0)
    bank_cfg = SkillBankConfig()
    bank = Bank("2048")
    league = League(LeagueConfig(), run.root / "league.json")
    versions = {a: 0 for a in ADAPTERS}
    sft = {a: {"examples": 64, "batches": 16, "epochs": 2, "first_loss": 9.5 - i / 10,
               "last_loss": 0.4 + i / 10}
           for i, a in enumerate(ADAPTERS)}  # the shape `coplay.learn` reports per adapter
    start = Laps(140.0, {"startup_ray": 4.0, "startup_learner": 25.0, "cold_start_teacher": 95.0,
                         "startup_engines": 3.0, "evaluation": 12.0})
    run.append_metrics({"iteration": 0, "cold_start": {"sft": sft, "sft_seconds": 61.0,
                                                       "seed_bank_trajectories": 4},
                        "versions": versions, "bank_versions": {"2048": 0},
                        "phases": phase_record(start, start_busy([48.0], 61.0),
                                               [("cold_start_teacher", "cold_start_sft", 61.0)])})
    for k in range(1, ITERATIONS + 1):
        experts = play_bot_episodes("2048", "expert", [100 * k + i for i in range(4)], max_steps=40)
        bank, bank_samples, bank_report = update_bank(bank, experts, None, bank_cfg, k)
        save_bank(run, bank)
        trajectories = _as_policy(experts, k, rng)
        steps = sum(len(t.steps) for t in trajectories)
        stats = CollectStats(steps=steps, invalid_actions=max(0, 12 - 3 * k), parse_errors=max(0, 6 - 2 * k),
                             generated_tokens=900 * steps, generation_seconds=30.0 + k, wall_seconds=35.0 + k)
        train = _train(k, rng) if k > 1 else None
        versions = {a: max(0, k - 2) for a in ADAPTERS}
        data = IterationData(k, trajectories, [], {"2048": bank.version - 1})
        trajectories += [t for t in _league_games(league, k) if t.policy == "model"]
        _run_skills([t for t in trajectories if t.game == "2048"], bank, bank_cfg)
        write_shard(run.shard_path(k, 0), Shard(f"it{k}", k, 0, trajectories))
        calls = {"segment": {"calls": 2, "prompts": 4, "completions": 8, "tokens_in": 3000 + k,
                             "tokens_out": 200, "seconds": 4.0},
                 "contract": {"calls": 1, "prompts": 3, "completions": 6, "tokens_in": 2500,
                              "tokens_out": 900, "seconds": 6.0}}
        bank_update = BankUpdate(reports=[bank_report], seconds=12.0 + k, calls=calls if k > 1 else {})
        record = iteration_record(k, data, stats, bank_update, train, versions, 40.0 + 2 * k, {},
                                  league=league.table(), phases=_laps(k))
        run.append_metrics(record)
    for k in (2, 4):
        evaluated = _as_policy(play_bot_episodes("2048", "expert", [1_000_000 + i for i in range(6)], 40),
                               k, rng)
        write_eval(run.eval, f"model-it{k}", summarize_eval(evaluated), {"player": "model", "iteration": k})
    baseline = play_bot_episodes("2048", "random", [1_000_000 + i for i in range(6)], 40)
    avalon = [t for t in play_bot_episodes("avalon", "random", [1_000_000 + i for i in range(4)])
              if t.seat == "player_0"]
    write_eval(run.eval, "random", summarize_eval(baseline + avalon), {"player": "random"})
    return run
