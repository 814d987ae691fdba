"""The phase timeline of a SmolLM2 `full` run before and after the CPU-cost work, side by side: the same
config run twice on this machine, once with every cost switch set back to its old path and once as it is.

The run is `make demo`'s (`launch/configs/demo-candy_crush-smollm2.yaml`: SmolLM2, cold-start SFT, 2
iterations of `full` with a bank update, evaluation and probe after the cold start and at the end). The
`before` arm adds `OLD_PATH`, one override per cost the work cut (each switch keeps its old path for this):
- `learner.frozen_trunk=false learner.share_prefix=false`: transformers' own forward through every layer and
  every sample's whole prompt (`coplay/learn/trunk.py` is the new path);
- `skill_bank.calls.concurrent=false`: the bank's model calls one blocking call at a time
  (`coplay/skills/concurrent_calls.py`);
- `engine.cpu_start=vllm`: vLLM's own engine start (`lean` runs the model worker inside the engine core);
- `rollout.prompt_format=full`: the act prompt that repeats the rules and lists the legal actions more than
  once (`compact` says each once).
The vLLM grouped LoRA ops (`engine.cpu_lora_ops`) came earlier and stay on in both arms.

Each arm is its own `coplay train` process (its own Ray instance and engine), run one after the other; one
run per arm, so each figure is a single sample of a whole run (the benchmark says so in its JSON). Per arm:
the whole run's seconds, the timeline's seconds and share per segment (`coplay.driver.phases.run_totals`),
the busy seconds of the components that overlap (rollouts, learner, bank calls per kind with tokens), the
learner's samples per second over its GRPO steps (in the run, beside the rollouts it overlaps), generated
tokens, and the evaluations beside the bots on the same protocol; then per segment the before/after ratio.
Both runs' reports draw their own timeline (`coplay report RUN`); this writes the comparison as JSON, a
Markdown table and a bar plot. `--add-rulers JSON` adds the bots to an older results file from its runs.

Run: ``python -m benchmarks.phase_timeline [--config C] [--name N] [key=value ...]``, or
``--runs BEFORE_DIR AFTER_DIR`` to compare two finished runs without running them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

COMMAND = "python -m benchmarks.phase_timeline"
DEFAULT_CONFIG = "launch/configs/demo-candy_crush-smollm2.yaml"
OLD_PATH = ("learner.frozen_trunk=false", "learner.share_prefix=false", "skill_bank.calls.concurrent=false",
            "engine.cpu_start=vllm", "rollout.prompt_format=full")
ARMS = ("before", "after")
WHAT = ("one run per arm of the same config, one after the other on the same machine: whole-run seconds and "
        "their split by phase; not a learning figure (the arms' prompts differ, so their policies do too)")


def learner_rate(records: list[dict[str, Any]], busy_learner: dict[str, Any]) -> dict[str, Any]:
    """Samples the GRPO steps trained (every adapter, `train` and `final_train`) over the learner's summed
    step seconds: the in-run learner rate, beside whatever the step overlapped."""
    samples = 0.0
    for record in records:
        for key in ("train", "final_train"):
            for figures in ((record.get(key) or {}).get("adapters") or {}).values():
                samples += float(figures.get("samples", 0.0))
    step_s = float(busy_learner.get("step_s", 0.0))
    return {"samples": samples, "step_s": round(step_s, 1),
            "samples_per_s": round(samples / step_s, 4) if step_s > 0 else None,
            "forward_s": round(float(busy_learner.get("forward_s", 0.0)), 1),
            "backward_s": round(float(busy_learner.get("backward_s", 0.0)), 1)}


def rulers(run_dir: Path) -> dict[str, Any]:
    """Per game the run evaluated: its evaluations beside the random and expert bots on the same protocol
    (read from the run's `eval/bots-*.json`), the protocol check, the last minus the first and minus each bot
    paired by seed, and the probes (`benchmarks.skill_sp.solver_evidence`). Context only: the arms' prompts
    differ, so this is not a comparison of policies."""
    from benchmarks.skill_sp import solver_evidence
    from coplay.config import load_config

    cfg = load_config(run_dir / "config.yaml")
    out = {game: solver_evidence(cfg, run_dir, game) for game in cfg.games}
    return {game: evidence for game, evidence in out.items() if evidence is not None}


def read_arm(run_dir: Path, seconds: float | None = None) -> dict[str, Any]:
    """One finished run's timeline figures (see the module docstring)."""
    from coplay.driver.phases import run_totals
    from coplay.runs import RunDir

    records = RunDir.open(run_dir).read_metrics()
    totals = run_totals(records)
    if totals is None:
        raise ValueError(f"{run_dir}: no metrics line has `phases` (a run from before the timeline)")
    busy = totals["busy"]
    calls = (busy.get("bank_update") or {}).get("calls") or {}
    tokens = sum(float(r.get("generated_tokens") or 0) for r in records)
    return {"run_dir": str(run_dir), "process_s": seconds, "wall_s": round(totals["wall_s"], 1),
            "seconds": {k: round(v, 1) for k, v in totals["seconds"].items()},
            "share": {k: round(v, 4) for k, v in totals["share"].items()},
            "busy": {"rollouts_s": round(float((busy.get("rollouts") or {}).get("seconds", 0.0)), 1),
                     "bank_update_s": round(float((busy.get("bank_update") or {}).get("seconds", 0.0)), 1),
                     "bank_calls": {kind: {k: c.get(k) for k in ("calls", "completions", "tokens_in",
                                                                  "tokens_out", "seconds")}
                                    for kind, c in calls.items()},
                     "engine_start_s": round(float((busy.get("startup") or {}).get("engines_s", 0.0)), 1),
                     "sft_s": round(float((busy.get("cold_start") or {}).get("sft_s", 0.0)), 1)},
            "learner": learner_rate(records, busy.get("learner") or {}),
            "generated_tokens": tokens, "rulers": rulers(run_dir)}


def compare(arms: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per segment (and for the whole run, the engine start, the SFT, the bank's busy seconds and the learner
    rate) the before/after ratio; None where the after figure is 0."""
    before, after = arms["before"], arms["after"]

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 3) if a is not None and b else None

    segments = sorted(set(before["seconds"]) | set(after["seconds"]),
                      key=lambda s: -(before["seconds"].get(s, 0.0) + after["seconds"].get(s, 0.0)))
    return {"wall": ratio(before["wall_s"], after["wall_s"]),
            "segments": {s: ratio(before["seconds"].get(s, 0.0), after["seconds"].get(s, 0.0))
                         for s in segments},
            "engine_start": ratio(before["busy"]["engine_start_s"], after["busy"]["engine_start_s"]),
            "sft": ratio(before["busy"]["sft_s"], after["busy"]["sft_s"]),
            "bank_update_busy": ratio(before["busy"]["bank_update_s"], after["busy"]["bank_update_s"]),
            "learner_samples_per_s": ratio(after["learner"]["samples_per_s"],
                                           before["learner"]["samples_per_s"])}


def markdown(result: dict[str, Any]) -> str:
    """The comparison as a table: a row per segment, seconds and share per arm, the ratio."""
    arms, ratios = result["arms"], result["ratios"]
    lines = [f"# Phase timeline before and after ({result['config']})", "", f"`{result['command']}`", "",
             result["what"], "",
             "| segment | before s | before share | after s | after share | before/after |",
             "|---|---:|---:|---:|---:|---:|"]
    for segment, r in ratios["segments"].items():
        b, a = arms["before"], arms["after"]
        lines.append(f"| {segment} | {b['seconds'].get(segment, 0.0):,.1f} | "
                     f"{b['share'].get(segment, 0.0):.1%} "
                     f"| {a['seconds'].get(segment, 0.0):,.1f} | {a['share'].get(segment, 0.0):.1%} | "
                     f"{'-' if r is None else f'{r:.2f}x'} |")
    lines.append(f"| **whole run** | {arms['before']['wall_s']:,.1f} | | {arms['after']['wall_s']:,.1f} | | "
                 f"{ratios['wall']}x |")
    lines += ["", "| figure | before | after |", "|---|---:|---:|"]
    for label, key in (("engine start (s)", "engine_start_s"), ("SFT (s)", "sft_s"),
                       ("rollouts, busy (s)", "rollouts_s"), ("bank update, busy (s)", "bank_update_s")):
        lines.append(f"| {label} | {arms['before']['busy'][key]} | {arms['after']['busy'][key]} |")
    for label, key in (("learner samples", "samples"), ("learner step seconds", "step_s"),
                       ("learner samples/s", "samples_per_s")):
        lines.append(f"| {label} | {arms['before']['learner'][key]} | {arms['after']['learner'][key]} |")
    lines.append(f"| generated tokens | {arms['before']['generated_tokens']:.0f} | "
                 f"{arms['after']['generated_tokens']:.0f} |")
    for arm in ARMS:
        for game, r in arms[arm].get("rulers", {}).items():
            first, last = r["curve"][0], r["curve"][-1]
            bots = ", ".join(f"{bot} {b['mean']:.1f}" for bot, b in r["bots"].items())
            check = "passed" if (r.get("protocol_check") or {}).get("passed") else "failed"
            lines.append(f"\n{arm}, {game}: evaluation {first['mean']:.1f} (iteration {first['iteration']}) "
                         f"-> "
                         f"{last['mean']:.1f} (iteration {last['iteration']}); bots on the same protocol: "
                         f"{bots}; protocol check {check}")
    return "\n".join(lines) + "\n"


def plot(path: Path, result: dict[str, Any]) -> None:
    """Two stacked horizontal bars (before, after), a segment per colour (the run report's colours)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from coplay.report.timeline import COLORS

    segments = list(result["ratios"]["segments"])
    fig, ax = plt.subplots(figsize=(9, 3.4))
    for row, arm in enumerate(ARMS):
        left = 0.0
        for segment in segments:
            width = result["arms"][arm]["seconds"].get(segment, 0.0)
            ax.barh(row, width, left=left, color=COLORS.get(segment, "#7f7f7f"),
                    label=segment if row == 0 else None)
            left += width
    ax.set_yticks(range(len(ARMS)), [f"{a} ({result['arms'][a]['wall_s']:,.0f} s)" for a in ARMS])
    ax.invert_yaxis()
    ax.set_xlabel("seconds of the run's wall time")
    ax.legend(fontsize=7, ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.42))
    ax.set_title("phase timeline of one SmolLM2 `full` run: old cost paths (before) and the defaults (after)",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def run_arm(config: str, arm: str, name: str, overrides: list[str]) -> tuple[Path, float]:
    """One `coplay train` process for `arm`; its run folder and seconds."""
    extra = list(OLD_PATH) if arm == "before" else []
    run_name = f"{name}-{arm}"
    cmd = [sys.executable, "-m", "coplay.cli", "train", "--config", config, *overrides, *extra,
           f"run.name={run_name}"]
    print(f"[phase_timeline] {arm}: {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
    started = time.perf_counter()
    subprocess.run(cmd, check=True)
    seconds = time.perf_counter() - started
    return max(Path("runs").glob(f"{run_name}-*"), key=lambda p: p.stat().st_mtime), round(seconds, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=DEFAULT_CONFIG)
    parser.add_argument("--name", default="phase-timeline-smollm2", help="stem of the results and run names")
    parser.add_argument("--runs", nargs=2, metavar=("BEFORE", "AFTER"), help="compare two finished runs")
    parser.add_argument("--out", default="benchmarks/results", help="folder for NAME.{json,md,png}")
    parser.add_argument("--add-rulers", metavar="JSON", help="add each arm's rulers (the bots beside its "
                        "evaluations) to a results file from its run folders, in place of the bare means")
    parser.add_argument("overrides", nargs="*", help="config overrides key=value, for both arms")
    args = parser.parse_args(argv)
    if args.add_rulers:
        path = Path(args.add_rulers)
        result = json.loads(path.read_text())
        for arm in result["arms"].values():
            arm.pop("evaluations", None)  # the means alone; `rulers` holds them beside the bots
            arm["rulers"] = rulers(Path(arm["run_dir"]))
        path.write_text(json.dumps(result, indent=1) + "\n")
        path.with_suffix(".md").write_text(markdown(result))
        return 0
    started = time.time()
    arms: dict[str, dict[str, Any]] = {}
    for arm, given in zip(ARMS, args.runs or (None, None), strict=True):
        run_dir, seconds = ((Path(given), None) if given
                            else run_arm(args.config, arm, args.name, args.overrides))
        arms[arm] = read_arm(run_dir, seconds)
    result = {"benchmark": "phase_timeline", "command": " ".join([COMMAND, *(argv or sys.argv[1:])]),
              "config": args.config, "old_path": list(OLD_PATH), "overrides": args.overrides, "what": WHAT,
              "runs_per_arm": 1, "python": platform.python_version(), "cpus": os.cpu_count(),
              "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)), "arms": arms}
    result["ratios"] = compare(arms)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.name}.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / f"{args.name}.md").write_text(markdown(result))
    plot(out / f"{args.name}.png", result)
    print(json.dumps({"wall": result["ratios"]["wall"], "arms": {a: arms[a]["wall_s"] for a in ARMS},
                      "learner_samples_per_s": result["ratios"]["learner_samples_per_s"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
