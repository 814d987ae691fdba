"""One skill-bank update's seconds on a real model, the old sequential model calls against the concurrent ones
(`skill_bank.calls`, coplay/skills/concurrent_calls.py; issue 35 item 3), measured side by side in one run.

The update is the one a `full` run makes at iteration 2: the seed bank the cold start builds (the expert bot's
`sft.episodes_per_game` teacher episodes of `sft.max_steps` moves, `seed_bank`), updated with a shard of
`rollout.start_states x rollout.group_size` trajectories of `rollout.max_steps` moves (the expert bot on
distinct seeds: fixed, and with no duplicate segments that would flatter the cache), under the config's
`skill_bank`, `sampling` and engine settings. Each repeat takes a fresh shard (seeds 100 r apart) and runs
both paths on it, in alternating order, each with a fresh answer cache and, where the engine allows, its
prefix cache emptied first (so neither path reads the other's prefill). A warm-up update (not counted) runs
first: engine, grammar and adapter set-up are not a bank update's cost.

- `old`: `calls.concurrent=false`, the SkillBankActor's old caller: one blocking call per round, seeds by
  call order.
- `new`: `calls.concurrent=true` (with `calls.prefetch`), the actor's `ConcurrentCaller` over an in-process
  backend that submits each call to a thread, as the actor's ray futures do.
Both call the RolloutWorker's own `complete` (prompt fitting, seeds, completions) on one in-process engine:
a run's single rollout worker, without Ray around it. Reported: median seconds per path and their ratio,
per adapter the calls, prompts, tokens in and out and seconds waited, what the cache and prefetch did, and the
bank each path built (size, held-out quality, operations applied and rejected, samples per adapter); with
`--greedy-check`, one more pair at temperature 0, where answers depend on the prompt alone, so the two paths
must build the same bank.

`--iteration-share N` measures instead what a run sees: one real `full` run of N iterations per path (no
episode evaluation, no probe), and per iteration with a bank update the bank update's share of its wall time
from the phase timeline (the driver waits for the bank after the rollouts and the learner step it overlaps).

Run: ``nice -n 19 python -m benchmarks.bank_calls [--repeats 3] [--greedy-check] [--config C] [--out F]
[key=value ...]`` (default config launch/configs/coevolution-2048.yaml, SmolLM2 on the vLLM CPU build);
``python -m benchmarks.bank_calls --iteration-share 2``. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import platform
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from coplay.config import CoplayConfig, load_config
from coplay.skills import Bank, FunctionCaller, update_bank
from coplay.skills.concurrent_calls import ConcurrentCaller
from coplay.types import Trajectory

COMMAND = "python -m benchmarks.bank_calls"
DEFAULT_CONFIG = "launch/configs/coevolution-2048.yaml"
ITERATION = 2
ENGINE_NAMES: dict[str, str | None] = {"segment": None, "contract": None, "curator": None}  # base model


def seed_bank(cfg: CoplayConfig) -> Bank:
    """The cold start's seed bank: expert teacher episodes on the last seeds of `seeds.train`."""
    from coplay.driver.cold_start import teacher_seeds
    from coplay.rollout.bot_episodes import play_bot_episodes
    from coplay.skills.teacher import seed_bank as build

    game = cfg.games[0]
    expert = [t for seed in teacher_seeds(cfg) for t in play_bot_episodes(game, "expert", [seed],
                                                                           cfg.sft.max_steps)]
    bank, _ = build(Bank(game), expert, cfg.skill_bank, 0, cfg.sft.bank_example_groups)
    return bank


def shard(cfg: CoplayConfig, repeat: int) -> list[Trajectory]:
    """A fixed shard the size of an iteration's: distinct seeds (no duplicate trajectories)."""
    from coplay.rollout.bot_episodes import play_bot_episodes

    size = cfg.rollout.start_states * cfg.rollout.group_size
    first = cfg.seeds.train.start + 100 * repeat
    return play_bot_episodes(cfg.games[0], "expert", list(range(first, first + size)), cfg.rollout.max_steps)


class LocalWorker:
    """The RolloutWorker's `complete` on an in-process engine (the worker's own method, unchanged)."""

    def __init__(self, engine: Any, cfg: CoplayConfig) -> None:
        from coplay.actors.rollout_worker import RolloutWorkerImpl

        self.impl = RolloutWorkerImpl.__new__(RolloutWorkerImpl)  # no store, no sync: only `complete`
        self.impl.engine, self.impl.cfg = engine, cfg

    def complete(self, *args: Any) -> list[list[Any]]:
        return self.impl.complete(*args)


def old_caller(worker: LocalWorker, cfg: CoplayConfig, temperature: float) -> FunctionCaller:
    """The SkillBankActor's old caller (`_sequential_caller`): blocking calls, seeds by call order."""
    calls = {"n": 0}

    def generate(adapter: str, prompts: list[Any], n: int, max_tokens: int,
                 regex: str | None = None) -> list[list[Any]]:
        seed = cfg.seeds.run * 1_000_003 + ITERATION * 10_007 + calls["n"]
        calls["n"] += 1
        return worker.complete(ENGINE_NAMES.get(adapter), prompts, n, max_tokens, temperature, seed, regex)

    return FunctionCaller(generate, pass_max_tokens=True, pass_regex=True)


class ThreadBackend:
    """`Backend` of the concurrent caller: each submit runs `complete` on a thread (the actor's calls are
    ray futures to a threaded worker); the engine batches whatever is in flight."""

    def __init__(self, worker: LocalWorker, temperature: float, pool: concurrent.futures.Executor) -> None:
        self.worker, self.temperature, self.pool = worker, temperature, pool

    def submit(self, adapter: str, prompts: list[Any], seeds: list[int], n: int, max_tokens: int,
               regex: str | None) -> concurrent.futures.Future:
        return self.pool.submit(self.worker.complete, ENGINE_NAMES.get(adapter), prompts, n, max_tokens,
                                self.temperature, seeds, regex)

    def wait(self, handle: concurrent.futures.Future) -> list[list[Any]]:
        return handle.result()

    def ready(self, handle: concurrent.futures.Future) -> bool:
        return handle.done()


def reset_prefix_cache(engine: Any) -> bool:
    """Empty vLLM's prefix cache where the engine exposes it (so a path never reads the other's prefill)."""
    llm = getattr(engine, "_llm", None)
    if llm is None or not hasattr(llm, "reset_prefix_cache") or not hasattr(engine, "_call"):
        return False
    engine._call(llm.reset_prefix_cache())
    return True


def outcome(bank: Bank, samples: list[Any], report: dict[str, Any]) -> dict[str, Any]:
    """What each path built: the bank's size and held-out quality, operations, samples per adapter."""
    ops = report.get("operations", [])
    return {"size": len(bank.skills), "quality": bank.metrics.get("quality"),
            "applied": dict(Counter(r["op"] for r in ops if r.get("applied"))),
            "rejected": dict(Counter(r["op"] for r in ops if not r.get("applied"))),
            "samples": dict(Counter(s.adapter for s in samples)),
            "segment_relabels": report.get("segment_relabels", 0),
            "contract_accepted": report.get("contract_accepted", 0),
            "bank_sha": bank_digest(bank)}


def bank_digest(bank: Bank) -> str:
    import hashlib

    return hashlib.sha256(json.dumps(bank.to_json(), sort_keys=True).encode()).hexdigest()[:12]


def run_path(path: str, bank: Bank, trajs: list[Trajectory], cfg: CoplayConfig, engine: Any,
             worker: LocalWorker, pool: concurrent.futures.Executor, temperature: float) -> dict[str, Any]:
    reset = reset_prefix_cache(engine)
    bank_cfg = cfg.skill_bank.with_values({"calls.concurrent": path == "new"})
    caller: FunctionCaller | ConcurrentCaller
    if path == "new":
        calls = bank_cfg.calls
        caller = ConcurrentCaller(ThreadBackend(worker, temperature, pool), ENGINE_NAMES, cfg.seeds.run,
                                  cache_size=calls.cache_size, chunk_prompts=calls.chunk_prompts)
    else:
        caller = old_caller(worker, cfg, temperature)
    started = time.perf_counter()
    new_bank, samples, report = update_bank(bank, trajs, caller, bank_cfg, ITERATION,
                                            max_tokens=cfg.sampling.max_tokens)
    seconds = time.perf_counter() - started
    return {"seconds": round(seconds, 3), "prefix_cache_reset": reset, "calls": caller.usage_json(),
            "bank": outcome(new_bank, samples, report)}


ITERATION_SHARE_WHAT = ("seconds and shares of each iteration's wall time by phase, per bank call path; the "
                        "runs evaluate nothing (eval.every=0, probe.every=0), so this file holds no policy "
                        "score and is not a learning figure")


def iteration_share(config: str, overrides: list[str], iterations: int) -> dict[str, Any]:
    """`--iteration-share`: a real `full` run per path (`coplay train`, `calls.concurrent` false then true,
    no episode evaluation and no probe: they are not iteration time), and from each run's metrics the
    phase timeline of its iterations >= 2 (the first with a bank update): the bank update's seconds (the
    driver's wait for it after the rollouts and the learner step) and share of the iteration's wall time,
    and what the bank actor itself spent (busy seconds, calls per kind)."""
    import subprocess

    out: dict[str, Any] = {}
    for path in ("old", "new"):
        name = f"bank-calls-{path}"
        cmd = [sys.executable, "-m", "coplay.cli", "train", "--config", config, "ablation.variant=full",
               f"loop.iterations={iterations}", "eval.every=0", "eval.at_start=false", "probe.every=0",
               f"skill_bank.calls.concurrent={'true' if path == 'new' else 'false'}", f"run.name={name}",
               *overrides]
        started = time.perf_counter()
        subprocess.run(cmd, check=True)
        seconds = time.perf_counter() - started
        run_dir = max(Path("runs").glob(f"{name}-*"), key=lambda p: p.stat().st_mtime)
        lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line]
        iters = []
        for line in lines:
            phases = line.get("phases", {})
            if line.get("iteration", 0) >= 2 and "bank_update" in phases.get("seconds", {}):
                busy = phases.get("busy", {}).get("bank_update", {})
                iters.append({"iteration": line["iteration"], "wall_s": round(phases["wall_s"], 1),
                              "bank_update_s": round(phases["seconds"]["bank_update"], 1),
                              "bank_update_share": round(phases["share"]["bank_update"], 4),
                              "shares": {k: round(v, 4) for k, v in phases["share"].items()},
                              "bank_actor_s": round(busy.get("seconds", 0.0), 1),
                              "bank_calls": busy.get("calls", {})})
        out[path] = {"run_dir": str(run_dir), "command": " ".join(cmd[1:]), "seconds": round(seconds, 1),
                     "iterations": iters}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=DEFAULT_CONFIG)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--greedy-check", action="store_true", help="one more pair at temperature 0")
    parser.add_argument("--out", default="", help="also write the JSON here")
    parser.add_argument("--iteration-share", type=int, default=0, metavar="ITERATIONS",
                        help="instead: a real full run of ITERATIONS (>= 2) per path, bank-update share of "
                             "each iteration's wall time from the phase timeline")
    parser.add_argument("overrides", nargs="*", help="config overrides key=value")
    args = parser.parse_args()
    if args.iteration_share:
        result = {"benchmark": "bank_calls_iteration_share", "command": " ".join([COMMAND, *sys.argv[1:]]),
                  "config": args.config, "cpus": os.cpu_count(), "what": ITERATION_SHARE_WHAT,
                  "paths": iteration_share(args.config, args.overrides, args.iteration_share)}
        text = json.dumps(result, indent=1, default=str)
        if args.out:
            Path(args.out).write_text(text + "\n")
        print(text)
        return
    cfg = load_config(args.config, ["ablation.variant=full", *args.overrides])
    from coplay.engines.factory import make_engine

    t0 = time.perf_counter()
    bank = seed_bank(cfg)
    shards = [shard(cfg, r) for r in range(args.repeats + 1)]
    setup_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    engine = make_engine(cfg.model, cfg.engine, seed=cfg.seeds.run)
    engine_s = time.perf_counter() - t0
    worker, temperature = LocalWorker(engine, cfg), cfg.sampling.temperature
    runs: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            warmup = run_path("old", bank, shards[-1], cfg, engine, worker, pool, temperature)
            for r in range(args.repeats):
                for path in (("old", "new") if r % 2 == 0 else ("new", "old")):
                    runs[path].append(run_path(path, bank, shards[r], cfg, engine, worker, pool, temperature))
                    print(f"repeat {r} {path}: {runs[path][-1]['seconds']} s", file=sys.stderr, flush=True)
            greedy = ({p: run_path(p, bank, shards[0], cfg, engine, worker, pool, 0.0)
                       for p in ("old", "new")} if args.greedy_check else None)
    finally:
        engine.close()
    med = {p: statistics.median(r["seconds"] for r in rs) for p, rs in runs.items()}
    result: dict[str, Any] = {
        "benchmark": "bank_calls",
        "command": " ".join([COMMAND, *sys.argv[1:]]),
        "config": args.config, "model": cfg.model.name, "engine": cfg.engine.backend,
        "engine_dtype": cfg.engine.dtype, "temperature": temperature, "group_size": cfg.skill_bank.group_size,
        "max_tokens": dict(cfg.sampling.max_tokens), "shard_trajectories": len(shards[0]),
        "shard_steps": sum(len(t.steps) for t in shards[0]), "seed_bank_skills": len(bank.skills),
        "repeats": args.repeats, "python": platform.python_version(), "cpus": os.cpu_count(),
        "setup_s": round(setup_s, 1), "engine_start_s": round(engine_s, 1), "warmup_s": warmup["seconds"],
        "median_seconds": {p: round(v, 3) for p, v in med.items()},
        "old_over_new": round(med["old"] / med["new"], 3) if med["new"] else None,
        "per_repeat_ratio_median": round(statistics.median(
            o["seconds"] / n["seconds"] for o, n in zip(runs["old"], runs["new"], strict=True)), 3),
        "runs": runs,
        "headline": {"old_s": round(med["old"], 2), "new_s": round(med["new"], 2),
                     "old_over_new": round(med["old"] / med["new"], 3) if med["new"] else None},
    }
    if greedy is not None:
        result["greedy_check"] = {**greedy, "same_bank": greedy["old"]["bank"] == greedy["new"]["bank"]}
    text = json.dumps(result, indent=1, default=str)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
