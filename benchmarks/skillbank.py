"""Skill-bank seconds per shard as the shard grows (10, 100, 1000 steps): the cost must be no worse than
linear in steps.

Shards are expert-bot trajectories (2048 and Tetris; an episode is at most 200 moves, so a 1000-step shard is
five episodes). Each size is measured twice per game: `cold` (an empty bank: everything is NEW and gets
materialized) and `warm` (a bank built from a separate 1600-step shard: segmentation scores every skill,
maintenance has skills to merge, split, refine), and `warm_scripted_model` (the warm bank with a caller that
answers instantly: the bank's own cost of the segment / curator / contract rounds, model time excluded, which
is the engines' business). Median seconds over `--repeats` runs of `update_bank`, sizes interleaved. The
baseline is the smallest-but-one size measured in the same run: `per_step_ratio` =
(seconds / step at size N) / (seconds / step at 100 steps); linear cost gives ~1, quadratic gives N / 100.

Run: ``python -m benchmarks.skillbank [--repeats 5] [--sizes 10,100,1000]``. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from typing import Any

from coplay.config import SkillBankConfig
from coplay.skills import Bank, FunctionCaller, update_bank
from coplay.types import Trajectory

COMMAND = "python -m benchmarks.skillbank"
GAMES = ("2048", "tetris")
HORIZON = 200
BASELINE_STEPS = 100
MODES = ("cold", "warm", "warm_scripted_model")


def expert_shard(game: str, steps: int, first_seed: int) -> list[Trajectory]:
    """Expert trajectories holding `steps` steps in all (episodes of at most `HORIZON` moves)."""
    from coplay.rollout.bot_episodes import play_bot_episodes

    out: list[Trajectory] = []
    seed = first_seed
    while sum(len(t.steps) for t in out) < steps:
        missing = steps - sum(len(t.steps) for t in out)
        out += play_bot_episodes(game, "expert", [seed], max_steps=min(HORIZON, missing))
        seed += 1
    return out


def scripted_caller() -> FunctionCaller:
    """Instant, fixed answers (rank, approve, a valid protocol): the bank's own cost of the model rounds
    (prompts, parsing, counterfactual bank quality per proposal) without any model time."""
    protocol = ('{"summary": "s", "plan": ["a", "b"], "preconditions": "true", "success": "false", '
                '"abort": "false", "effects": []}')
    answers = {"segment": "RANK: NEW", "curator": "VERDICT: APPROVE", "contract": protocol}
    return FunctionCaller(lambda adapter, prompts, n: [[answers[adapter]] * n for _ in prompts])


def measure(game: str, sizes: list[int], repeats: int, cfg: SkillBankConfig) -> dict[str, Any]:
    warm_bank, _, _ = update_bank(Bank(game), expert_shard(game, 1600, 9_000), None, cfg, iteration=1)
    shards = {n: expert_shard(game, n, 1_000 + n) for n in sizes}
    modes = (("cold", None), ("warm", None), ("warm_scripted_model", scripted_caller()))
    times: dict[str, dict[int, list[float]]] = {mode: {n: [] for n in sizes} for mode, _ in modes}
    for _ in range(repeats):
        for n in sizes:
            for mode, caller in modes:
                bank = Bank(game) if mode == "cold" else warm_bank
                start = time.perf_counter()
                update_bank(bank, shards[n], caller, cfg, iteration=2)
                times[mode][n].append(time.perf_counter() - start)
    result: dict[str, Any] = {"warm_bank_skills": len(warm_bank.skills)}
    for mode, by_size in times.items():
        med = {n: statistics.median(v) for n, v in by_size.items()}
        base = med.get(BASELINE_STEPS)
        result[mode] = {
            str(n): {"seconds": round(med[n], 5), "ms_per_step": round(1000 * med[n] / n, 4),
                     "per_step_ratio": round((med[n] / n) / (base / BASELINE_STEPS), 3) if base else None,
                     "steps": sum(len(t.steps) for t in shards[n]), "trajectories": len(shards[n])}
            for n in sizes
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sizes", default="10,100,1000")
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    cfg = SkillBankConfig()
    report = {"benchmark": "skillbank", "command": f"{COMMAND} --repeats {args.repeats} --sizes {args.sizes}",
              "python": platform.python_version(), "repeats": args.repeats, "baseline_steps": BASELINE_STEPS,
              "games": {g: measure(g, sizes, args.repeats, cfg) for g in GAMES}}
    # Linearity is judged at and above the baseline size; below it a fixed per-update cost (copying the
    # bank, maintenance over the skills' stored evidence) dominates and is reported as such.
    report["worst_per_step_ratio"] = max(
        (v["per_step_ratio"] for g in report["games"].values() for mode in MODES
         for n, v in g[mode].items() if int(n) >= BASELINE_STEPS and v["per_step_ratio"] is not None),
        default=None)
    report["fixed_cost_seconds"] = {g: {mode: r[mode][str(min(sizes))]["seconds"] for mode in MODES}
                                    for g, r in report["games"].items()}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
