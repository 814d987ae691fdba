"""End-to-end benchmark: the headline trained tokens/s per GPU (per CPU slot on CPU), one iteration's wall
time split into sync, generation, env, training, bank and idle, the share of bank work hidden behind rollouts,
and the overlap speedup of staleness 1 over staleness 0 (benchmarks/README.md, docs/architecture.md).

Workload: the same small co-evolution run twice in this process, first with `loop.staleness=1` (bank update
and learner step overlap the rollouts), then with `loop.staleness=0` (synchronous; the bank update still
overlaps the rollouts): 2048, the tiny model, the vLLM CPU engine (vLLM on GPU), DeepSpeed ZeRO-2, one
rollout worker and one learner rank, same seeds (`WORKLOAD` below; the JSON repeats it). Each run is a real
`coplay.loop.train` (its own local Ray cluster, cold-start SFT, then `--iterations` iterations); the figures
come from its `metrics.jsonl`. Evaluation is off and checkpoints fall outside the timed iterations.
Side cases (`--cases`, `CASES` below), each one more staleness-1 run of the same workload: two rollout
workers with fewer GRPO groups than workers (the group is split) and with more (whole groups round robin),
each worker's rollout seconds and episode seats shown (none may idle); and Mario, its emulator stepping in
the worker's event loop against on env threads (`rollout.env_threads`) and in env host processes
(`rollout.env_processes`), the env share (seconds inside env calls over rollout seconds) beside the
iteration time. With env threads or processes the env calls overlap generation, so the split puts no rollout
time on env (`env_overlapped`).

Measured iterations: k >= 2 (iteration 1 has no bank update and, with staleness 1, no learner step). With N
iterations both runs have N - 1 measured iterations and N - 1 learner steps inside them (staleness 1 trains
its last iteration's samples after the loop; that final step is outside W, as is everything before
iteration 1: Ray and engine start-up, model loading, cold-start SFT).

Per measured iteration, from `timings` (seconds), with s the staleness and n_w the rollout workers:
    rollouts        = generation_s                 (the slowest worker's rollout time, env included)
    env             = min(env_s / n_w, rollouts)   (time inside env reset/step per worker; exact for n_w = 1)
    generation      = rollouts - env               (engine time and the runner's own work)
    training        = train_s                      if s = 0 (after the rollouts)
                      max(0, train_s - rollouts)   if s >= 1 (the part not hidden behind the rollouts)
    bank            = bank_wait_s                  (the bank update's part the loop waited for after rollouts)
    sync            = sync_s
    idle            = max(0, iteration_s - (sync + rollouts + training + bank))
                      (driver work outside these clocks: launching, shard writing and decoding, rewards and
                      advantages for the learner batch, metrics; with s >= 1 and training longer than the
                      rollouts, also the learner batch preparation before the step)
    hidden training = train_s - training;  hidden bank = max(0, bank_s - bank_wait_s)
The six parts add up to iteration_s (idle is clamped at 0 against clock noise). The JSON's split is the mean
over the measured iterations, so it adds up to W / (N - 1).

Per run: T = sum of `train.trained_tokens`, W = sum of `timings.iteration_s`, generated = sum of
`generated_tokens` (rollout completions only; bank calls are not counted), all over the measured iterations;
G = rollout workers + learner ranks on CPU (CPU slots), on GPU the GPUs they hold, ceil(n_w * gpus per worker
+ ranks * gpus per rank) (a shared GPU counts once);
    trained tokens/s per slot = T / (W * G);  generated tokens/s per slot = generated / (W * G)
    hidden bank share = 1 - sum(bank_wait_s) / sum(bank_s);
    hidden training share = 1 - sum(training) / sum(train_s)
Across runs: overlap speedup = median iteration_s (s = 0) / median iteration_s (s = 1), over the measured
iterations (`overlap_speedup_total` = W(s = 0) / W(s = 1)). Its ideal on this machine is what a perfect
overlap of rollouts and training would give: median iteration_s (s = 0) / max(median rollouts, median
training), both of the s = 0 run (rollouts = generation + env); `overlap_share_of_ideal` = speedup / ideal.

Caveats: an iteration with faults (a rollout worker or bank update re-run, listed in `iterations_with_faults`)
times the re-run, not the lost work. The bank actor's model calls run on the rollout workers' engines, so
hidden bank work still slows the rollouts it hides behind; on a shared machine other processes' load moves
every figure (the JSON records the load average before and after, and each run's 1-minute load average at its
start and end); the two runs follow each other, so a load that changes between them biases the overlap
speedup.

Output: one JSON object on stdout (last line; `headline` for `coplay bench`) and a stacked-bar PNG.
Run: ``python -m benchmarks.e2e [--quick] [--iterations N] [--plot PATH] [--out-dir DIR] [--keep]``
Imports ray, vllm and deepspeed only through `coplay.loop` (lazily, in `run_workload`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

COMMAND = "python -m benchmarks.e2e"
DEFAULT_PLOT = Path("benchmarks/results/e2e-split.png")
QUICK_ITERATIONS = 3  # iteration 1 is warm-up; 2 measured iterations still give a median
DEFAULT_ITERATIONS = 6
STALENESS_ORDER = (1, 0)
PARTS = ("sync", "generation", "env", "training", "bank", "idle")
PART_COLOURS = {"sync": "#8c8c8c", "generation": "#4c72b0", "env": "#55a868", "training": "#c44e52",
                "bank": "#dd8452", "idle": "#e5e5e5"}

# The workload, explicit: the same for both runs except loop.staleness and run.name.
WORKLOAD = [
    "games=[2048]", "rollout.workers=1", "rollout.start_states=2", "rollout.group_size=4",
    "rollout.max_steps=6",
    "rollout.concurrent_episodes=8", "rollout.retrieve_every=2",
    "sampling.max_tokens={act: 24, retrieve: 8, segment: 24, contract: 96, curator: 16}",
    "sampling.temperature=0.7",
    "engine.max_model_len=2048", "engine.max_num_seqs=16", "engine.enforce_eager=true",
    "engine.dtype=float32",
    "sft.episodes_per_game=16", "sft.max_steps=40", "sft.max_examples_per_adapter=64", "sft.epochs=4",
    "sft.lr=1e-2",
    "learner.backend=deepspeed", "learner.zero_stage=2", "learner.ranks=1", "learner.lr=1e-3",
    "learner.micro_batch_size=8", "skill_bank.group_size=4", "eval.every=0", "loop.checkpoint_every=1000",
    "cluster.num_cpus=2", "logging.console=false",
]
# Side cases, each one more staleness-1 run of WORKLOAD with these overrides (8 episodes, like the main runs):
# two rollout workers with fewer groups than workers (one group of 8: split across both) and with more (four
# groups of 2: whole groups, round robin); Mario with its emulator stepping in the worker's event loop, on
# env threads and in env host processes. Two workers and a learner rank make three CPU slots on the same
# two cores.
CASES = {
    "workers_2_one_group": ["rollout.workers=2", "rollout.start_states=1", "rollout.group_size=8",
                            "cluster.num_cpus=3"],
    "workers_2_four_groups": ["rollout.workers=2", "rollout.start_states=4", "rollout.group_size=2",
                              "cluster.num_cpus=3"],
    "mario_env_in_worker": ["games=[mario]", "rollout.env_threads=0"],
    "mario_env_threads": ["games=[mario]", "rollout.env_threads=4"],
    "mario_env_processes": ["games=[mario]", "rollout.env_processes=2"],
}


# ---------------------------------------------------------------------------------------------- computations
def measured_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The iteration records that count: those with timings and iteration >= 2, in iteration order."""
    rows = [r for r in records if "timings" in r and int(r.get("iteration", 0)) >= 2]
    return sorted(rows, key=lambda r: int(r["iteration"]))


def iteration_split(timings: dict[str, float], staleness: int, workers: int,
                    env_overlapped: bool = False) -> dict[str, float]:
    """One iteration's wall time split into PARTS (they add up to iteration_s), plus the hidden work. With
    `env_overlapped` (env threads or processes) env calls run beside generation, so none of the rollouts is
    put on env."""
    rollouts = float(timings.get("generation_s", 0.0))
    env = 0.0 if env_overlapped else min(float(timings.get("env_s", 0.0)) / max(1, workers), rollouts)
    train_s = float(timings.get("train_s", 0.0))
    training = train_s if staleness == 0 else max(0.0, train_s - rollouts)
    bank_s, bank_wait = float(timings.get("bank_s", 0.0)), float(timings.get("bank_wait_s", 0.0))
    sync = float(timings.get("sync_s", 0.0))
    wall = float(timings["iteration_s"])
    idle = max(0.0, wall - (sync + rollouts + training + bank_wait))
    return {"sync": sync, "generation": rollouts - env, "env": env, "training": training, "bank": bank_wait,
            "idle": idle, "iteration": wall, "hidden_training": train_s - training,
            "hidden_bank": max(0.0, bank_s - bank_wait)}


def slot_count(workers: int, ranks: int, gpu: bool, worker_gpus: float | None = None,
               rank_gpus: float | None = None) -> int:
    """G: CPU slots (workers + ranks) on CPU; on GPU the GPUs held, a GPU shared by a worker and a rank
    once."""
    if not gpu:
        return workers + ranks
    held = (workers * (1.0 if worker_gpus is None else worker_gpus)
            + ranks * (1.0 if rank_gpus is None else rank_gpus))
    return max(1, math.ceil(held - 1e-9))


def _share_hidden(exposed: float, total: float) -> float | None:
    return None if total <= 0 else 1.0 - exposed / total


def summarize_run(records: list[dict[str, Any]], staleness: int, workers: int, slots: int,
                  env_overlapped: bool = False) -> dict[str, Any]:
    """The figures of one run (see the module docstring) from its metrics records."""
    rows = measured_records(records)
    if not rows:
        raise ValueError(f"staleness {staleness}: no measured iterations (records with timings and "
                         f"iteration >= 2); run at least 2 iterations")
    splits = [iteration_split(r["timings"], staleness, workers, env_overlapped) for r in rows]
    wall = sum(s["iteration"] for s in splits)
    trained = sum(int(r.get("train", {}).get("trained_tokens", 0)) for r in rows)
    generated = sum(int(r.get("generated_tokens", 0)) for r in rows)
    bank_total = sum(float(r["timings"].get("bank_s", 0.0)) for r in rows)
    train_total = sum(float(r["timings"].get("train_s", 0.0)) for r in rows)
    mean = {p: sum(s[p] for s in splits) / len(splits) for p in (*PARTS, "hidden_training", "hidden_bank")}
    return {
        "staleness": staleness,
        "measured_iterations": [int(r["iteration"]) for r in rows],
        "iteration_s": [round(s["iteration"], 4) for s in splits],
        "iteration_s_median": statistics.median(s["iteration"] for s in splits),
        "rollouts_s_median": statistics.median(s["generation"] + s["env"] for s in splits),
        "training_s_median": statistics.median(s["training"] + s["hidden_training"] for s in splits),
        "split_mean_s": {p: round(v, 6) for p, v in mean.items()},
        "split_per_iteration_s": [{p: round(s[p], 4) for p in (*PARTS, "hidden_training", "hidden_bank")}
                                  for s in splits],
        "wall_s": wall, "trained_tokens": trained, "generated_tokens": generated, "slots": slots,
        "trained_tokens_per_s_per_slot": trained / (wall * slots) if wall > 0 else 0.0,
        "generated_tokens_per_s_per_slot": generated / (wall * slots) if wall > 0 else 0.0,
        "bank_s": bank_total, "hidden_bank_share": _share_hidden(sum(s["bank"] for s in splits), bank_total),
        "train_s": train_total,
        "hidden_training_share": _share_hidden(sum(s["training"] for s in splits), train_total),
        "iterations_with_faults": [int(r["iteration"]) for r in rows if r.get("faults")],
    }


def case_row(records: list[dict[str, Any]]) -> dict[str, Any]:
    """What a side case adds to its run's summary: the env share, seconds inside env calls over rollout
    seconds (with env threads or processes the calls overlap generation and each other, so it can pass 1 and
    is not a part of the wall time); and per worker the mean rollout seconds and episode seats over the
    measured iterations (a worker with 0 seats in any of them idled)."""
    rows = measured_records(records)
    per_worker = [r.get("workers", {}) for r in rows]
    width = max((len(w.get("episodes", [])) for w in per_worker), default=0)

    def mean_of(key: str, i: int) -> float:
        return statistics.fmean(float(w[key][i]) if i < len(w.get(key, [])) else 0.0 for w in per_worker)

    env_s = sum(float(r["timings"].get("env_s", 0.0)) for r in rows)
    rollouts_s = sum(float(r["timings"].get("generation_s", 0.0)) for r in rows)
    return {"env_s_mean": env_s / len(rows), "env_share": env_s / rollouts_s if rollouts_s > 0 else 0.0,
            "worker_rollout_s_mean": [round(mean_of("rollout_s", i), 4) for i in range(width)],
            "worker_episodes_mean": [mean_of("episodes", i) for i in range(width)],
            "idle_worker_iterations": sum(1 for w in per_worker for n in w.get("episodes", []) if n == 0)}


def overlap_speedup(synchronous: dict[str, Any], overlapped: dict[str, Any]) -> dict[str, float]:
    """Median iteration wall at staleness 0 over the same at staleness 1, the ratio of the total walls, and
    the speedup as a share of the ideal one (the module docstring)."""
    speedup = synchronous["iteration_s_median"] / overlapped["iteration_s_median"]
    longest = max(synchronous["rollouts_s_median"], synchronous["training_s_median"])
    ideal = synchronous["iteration_s_median"] / longest if longest > 0 else float("nan")
    return {"overlap_speedup": speedup, "overlap_speedup_total": synchronous["wall_s"] / overlapped["wall_s"],
            "overlap_speedup_ideal": ideal, "overlap_share_of_ideal": speedup / ideal}


# ---------------------------------------------------------------------------------------------- plot
def plot_split(runs: dict[str, dict[str, Any]], path: Path, title: str) -> Path:
    """Stacked bars: the mean measured iteration of each run split into PARTS; hidden work noted above."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(runs)
    fig, ax = plt.subplots(figsize=(max(6.4, 1.6 * len(names) + 2.0), 4.8), dpi=120)
    bottoms = [0.0] * len(names)
    for part in PARTS:
        heights = [runs[n]["split_mean_s"][part] for n in names]
        ax.bar(names, heights, bottom=bottoms, label=part, color=PART_COLOURS[part], width=0.55,
               edgecolor="white")
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    for i, n in enumerate(names):
        split = runs[n]["split_mean_s"]
        ax.annotate(f"{bottoms[i]:.2f} s\nhidden: train {split['hidden_training']:.2f} s,\n"
                    f"bank {split['hidden_bank']:.2f} s",
                    (i, bottoms[i]), ha="center", va="bottom", fontsize=8, xytext=(0, 3),
                    textcoords="offset points")
    ax.set_ylabel("seconds per iteration (mean over measured iterations)")
    ax.set_ylim(0, max(bottoms) * 1.25 if max(bottoms) > 0 else 1.0)
    ax.set_title(title, fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


# ---------------------------------------------------------------------------------------------- running
def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


def run_workload(staleness: int, iterations: int, out_dir: Path, cache_dir: str | None,
                 case: str | None = None) -> tuple[Any, Path, float]:
    """One real loop run (WORKLOAD, then a side case's overrides); returns its config, run folder and total
    wall seconds (start-up included)."""
    from coplay.config import load_config
    from coplay.loop import train

    overrides = WORKLOAD + CASES.get(case or "", []) + [
        f"run.out_dir={out_dir}", f"run.name=e2e-{case or f's{staleness}'}", f"loop.iterations={iterations}",
        f"loop.staleness={staleness}"]
    if cache_dir:
        overrides.append(f"model.tiny.cache_dir={cache_dir}")
    cfg = load_config(overrides=overrides)
    started = time.perf_counter()
    run_dir = train(cfg)
    return cfg, Path(run_dir), time.perf_counter() - started


def measure(staleness: int, case: str | None, iterations: int, out_dir: Path, args: argparse.Namespace,
            gpu: bool) -> dict[str, Any]:
    """One run and its summary (a side case's also with `case_row`)."""
    from coplay.driver.phases import run_totals

    load_at_start = os.getloadavg()[0]
    cfg, run_dir, seconds = run_workload(staleness, iterations, out_dir, args.cache_dir, case)
    slots = slot_count(cfg.rollout.workers, cfg.learner.ranks, gpu, cfg.cluster.rollout_worker_gpus,
                       cfg.cluster.learner_rank_gpus)
    records = read_metrics(run_dir)
    summary = summarize_run(records, staleness, cfg.rollout.workers, slots,
                            cfg.rollout.env_threads > 0 or cfg.rollout.env_processes > 0)
    if case:
        summary.update(case_row(records))
    summary["run_seconds_total"] = seconds
    summary["phases"] = run_totals(records)  # the phase timeline (coplay.driver.phases), start-up included
    summary["loadavg_1min_start_end"] = [round(load_at_start, 2), round(os.getloadavg()[0], 2)]
    summary["run_dir"] = str(run_dir) if args.keep else None
    print(f"[e2e] {case or f'staleness {staleness}'}: {seconds:.0f} s, "
          f"median iteration {summary['iteration_s_median']:.2f} s", file=sys.stderr, flush=True)
    return summary


def _gpu_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ITERATIONS} iterations per run")
    parser.add_argument("--iterations", type=int, default=None,
                        help=f"iterations per run (default {DEFAULT_ITERATIONS}; at least 2)")
    parser.add_argument("--plot", type=Path, default=DEFAULT_PLOT, help="stacked-bar PNG path")
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="run folders (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the run folders")
    parser.add_argument("--cache-dir", default=None, help="tiny model cache (default: coplay's own)")
    parser.add_argument("--cases", default=None,
                        help=f"side cases after the two main runs, comma-separated: {', '.join(CASES)} "
                             "(default all, and none with --quick: each is one more run of about 2 minutes, "
                             "which took a quick suite from 4 to 17 minutes; 'none' for none)")
    args = parser.parse_args(argv)
    if args.cases is None:
        args.cases = "none" if args.quick else ",".join(CASES)
    cases = [] if args.cases in ("", "none") else args.cases.split(",")
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        parser.error(f"unknown case(s) {unknown}; known: {', '.join(CASES)}")
    iterations = args.iterations or (QUICK_ITERATIONS if args.quick else DEFAULT_ITERATIONS)
    if iterations < 2:
        parser.error("--iterations must be at least 2 (iteration 1 is not measured)")
    out_dir = args.out_dir or Path(tempfile.mkdtemp(prefix="coplay-e2e-"))
    gpu = _gpu_available()
    load_before = os.getloadavg()
    started = time.perf_counter()
    runs: dict[str, dict[str, Any]] = {}
    side: dict[str, dict[str, Any]] = {}
    try:
        for staleness in STALENESS_ORDER:
            runs[f"staleness_{staleness}"] = measure(staleness, None, iterations, out_dir, args, gpu)
        for case in cases:
            side[case] = measure(1, case, iterations, out_dir, args, gpu)
    finally:
        if not args.keep:
            shutil.rmtree(out_dir, ignore_errors=True)
    overlapped, synchronous = runs["staleness_1"], runs["staleness_0"]
    speedup = overlap_speedup(synchronous, overlapped)
    slot_name = "gpu" if gpu else "cpu_slot"
    bars = {"staleness 1\n(overlapped)": overlapped, "staleness 0\n(synchronous)": synchronous,
            **{textwrap.fill(case.replace("_", " "), 12): row for case, row in side.items()}}
    plot = plot_split(bars,
                      args.plot, f"coplay e2e: one iteration, {iterations - 1} measured "
                                 f"(overlap speedup {speedup['overlap_speedup']:.2f}x)")
    command = (COMMAND + (" --quick" if args.quick else "")
               + (f" --iterations {args.iterations}" if args.iterations else "")
               + (f" --cases {args.cases}" if args.cases != ",".join(CASES) else ""))
    result = {
        "benchmark": "e2e", "command": command, "quick": args.quick, "iterations": iterations,
        "device": "gpu" if gpu else "cpu", "slot": slot_name, "slots": overlapped["slots"],
        "workload": {"overrides": WORKLOAD, "staleness_runs": list(STALENESS_ORDER),
                     "measured_iterations": overlapped["measured_iterations"]},
        "runs": runs, **speedup,
        "cases": {case: {"overrides": CASES[case], **row} for case, row in side.items()},
        "plot": str(plot), "seconds": time.perf_counter() - started,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "loadavg_before": [round(x, 2) for x in load_before],
                    "loadavg_after": [round(x, 2) for x in os.getloadavg()]},
        "headline": {
            f"trained_tok_s_per_{slot_name}": round(overlapped["trained_tokens_per_s_per_slot"], 3),
            f"generated_tok_s_per_{slot_name}": round(overlapped["generated_tokens_per_s_per_slot"], 3),
            "iteration_s": round(overlapped["iteration_s_median"], 3),
            "overlap_speedup": round(speedup["overlap_speedup"], 3),
            "overlap_share_of_ideal": round(speedup["overlap_share_of_ideal"], 3),
        },
    }
    if overlapped["hidden_bank_share"] is not None:
        result["headline"]["hidden_bank_share"] = round(overlapped["hidden_bank_share"], 3)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
