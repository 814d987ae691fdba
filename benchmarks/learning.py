"""Learning evidence (issue #10): does co-evolution improve on cold-start SFT, and on random play?

One run of `launch/configs/cpu-2048-learning.yaml` (a real `coplay.loop.train`: local Ray, vLLM CPU engine,
DeepSpeed ZeRO-2, skill bank served by the same engine), then baselines on the same evaluation protocol:

- `SFT only`: the cold-start adapters (learner step 0), evaluated by the loop as iteration 0
  (`eval.at_start`), with the initial banks;
- `random` and `expert` (2048: also the fixed-order heuristic): the game's bots on the same `seeds.eval` and
  horizon (`coplay.eval.ruler`: the run's `eval/bots-<bot>.json`), with the protocol check; where it fails
  (the expert's 95% interval not entirely above the random bot's) the differences are printed as not a result.

Every evaluation is the protocol of `coplay.eval` (16 episodes per single-player game, one per eval seed, the
same seeds for every player; model players sample at `eval.temperature`). Seeds are fixed in the
config before the run. Writes, under `--out` (default `benchmarks/results/`):
`learning-<game>.json` (the curve, baselines, Welch 95% intervals of last-vs-SFT and last-vs-random, the
per-iteration rollout figures, the command and commit), `learning-<game>.png` (score over iterations with CI
bands, baselines as bands) and `learning-<game>-report.html` (the run's `coplay report`). The run folder stays
under `run.out_dir`. Run: ``python -m benchmarks.learning [--config PATH] [dotted.overrides ...]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

DEFAULT_CONFIG = "launch/configs/cpu-2048-learning.yaml"


def _commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip()


def baselines(cfg: Any, run_root: Path) -> dict[str, dict[str, Any]]:
    """The ruler's bots on the loop's evaluation protocol (`eval/bots-<bot>.json`, written by the loop's
    evaluation or here; the report draws them as levels), plus the SFT-only point (iteration 0), written as
    `eval/baseline-sft-only.json` without an iteration."""
    from coplay.eval.protocol import write_eval
    from coplay.eval.ruler import bot_results

    bots, _ = bot_results(cfg, out_dir=run_root / "eval")
    out: dict[str, dict[str, Any]] = dict(bots)
    sft = json.loads((run_root / "eval" / "it00000.json").read_text())
    write_eval(run_root / "eval", "baseline-sft-only", sft["results"],
               {**{k: v for k, v in sft["meta"].items() if k != "iteration"},
                "label": "SFT only (learner step 0)"})
    out["sft_only"] = sft["results"]
    return out


def curve(data: Any, game: str) -> list[dict[str, Any]]:
    """The model's evaluations per iteration (0 = SFT only): the run's `eval/it*.json`, as the report reads
    them."""
    return sorted(({"iteration": ev.iteration, **ev.results[game]["score"]} for ev in data.evals
                   if ev.iteration is not None and game in ev.results), key=lambda row: row["iteration"])


def rollout_rows(data: Any, game: str) -> list[dict[str, Any]]:
    """Per iteration, what training saw: rollout score, invalid-action rate, act reward, seconds."""
    return [{"iteration": r["iteration"], "rollout_score": r["scores"][game],
             "invalid_action_rate": r.get("invalid_rate"),
             "parse_error_rate": r.get("parse_error_rate"),
             "act_reward": r.get("reward_parts", {}).get("act"),
             "seconds": r.get("timings", {}).get("iteration_s")}
            for r in data.iterations if game in r.get("scores", {})]


def differences(last: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """last − other with the Welch 95% interval of `coplay eval --compare` (from the two score summaries)."""
    from coplay.eval.compare import compare_results

    row = compare_results({"g": {"score": other}}, {"g": {"score": last}})[0]
    return {"difference": row.difference, "ci95": list(row.difference_ci) if row.difference_ci else None,
            "excludes_zero": row.difference_excludes_zero}


def plot(path: Path, game: str, points: list[dict[str, Any]], levels: dict[str, dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    xs = [p["iteration"] for p in points]
    ax.plot(xs, [p["mean"] for p in points], marker="o", color="C0", label="co-evolution (eval, T=0.3)")
    ax.fill_between(xs, [p["ci_low"] for p in points], [p["ci_high"] for p in points], color="C0", alpha=0.2)
    for color, (name, score) in zip(("C1", "C2", "C3", "C4"), levels.items(), strict=False):
        ax.axhline(score["mean"], color=color, linestyle="--", label=name)
        ax.axhspan(score["ci_low"], score["ci_high"], color=color, alpha=0.1)
    ax.set_xlabel("iteration (0 = after cold-start SFT)")
    ax.set_ylabel(f"{game} score (mean, 95% t-interval)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default=DEFAULT_CONFIG)
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("overrides", nargs="*", help="dotted config overrides")
    args = parser.parse_args(argv)

    import coplay_envs
    from coplay.config import load_config
    from coplay.driver.phases import run_totals
    from coplay.loop import train
    from coplay.report.data import load_run
    from coplay.report.html import write_report

    cfg = load_config(args.config, [*args.overrides, "eval.at_start=true"])
    if len(cfg.games) != 1 or coplay_envs.seats(cfg.games[0]) or not cfg.eval.every:
        raise SystemExit("benchmarks.learning needs one single-player game and eval.every >= 1")
    game = cfg.games[0]
    started = time.time()
    run_root = Path(train(cfg))
    train_seconds = time.time() - started
    base = baselines(cfg, run_root)
    report = write_report(run_root)
    data = load_run(run_root)
    points = curve(data, game)
    last = points[-1]
    levels = {"SFT only (iteration 0)": base["sft_only"][game]["score"],
              **{f"{bot} bot": base[bot][game]["score"] for bot in ("random", "expert", "heuristic")
                 if bot in base}}
    from coplay.eval.ruler import FAILED_LABEL, protocol_check

    check = protocol_check({b: base[b] for b in ("random", "expert")}).get(game)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = {
        "command": " ".join(["python -m benchmarks.learning", *(["--config", args.config]), *args.overrides]),
        "commit": _commit(), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "run_dir": str(run_root),
        "train_seconds": round(train_seconds, 1), "total_seconds": round(time.time() - started, 1),
        "game": game, "eval": {"episodes": cfg.eval.episodes,
                               "max_steps": cfg.eval.max_steps or cfg.rollout.max_steps,
                               "temperature": cfg.eval.temperature,
                               "seeds": [cfg.seeds.eval.start, cfg.seeds.eval.start + cfg.eval.episodes]},
        "curve": points, "baselines": levels,
        "last_minus_sft_only": differences(last, levels["SFT only (iteration 0)"]),
        "last_minus_random": differences(last, levels["random bot"]),
        "protocol_check": check,
        "rollouts": rollout_rows(data, game), "cold_start": (data.cold_start or {}).get("cold_start"),
        "phases": run_totals(data.timeline),  # the run's phase timeline (coplay.driver.phases)
        "config": cfg.model_dump(mode="json"),
    }
    (out / f"learning-{game}.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    plot(out / f"learning-{game}.png", game, points, levels)
    shutil.copyfile(report, out / f"learning-{game}-report.html")
    print(f"| iteration | {game} score (eval) | 95% CI |\n|---|---|---|")
    for p in points:
        print(f"| {p['iteration']} | {p['mean']:.1f} | [{p['ci_low']:.1f}, {p['ci_high']:.1f}] |")
    for name, s in levels.items():
        print(f"| {name} | {s['mean']:.1f} | [{s['ci_low']:.1f}, {s['ci_high']:.1f}] |")
    if check is not None and not check["passed"]:
        print(f"{game}: {FAILED_LABEL} ({check['reason']})")
    for key in (("last_minus_sft_only", "last_minus_random") if check is None or check["passed"] else ()):
        d = summary[key]
        interval = f"[{d['ci95'][0]:+.1f}, {d['ci95'][1]:+.1f}]" if d["ci95"] else "(n < 2)"
        print(f"{key}: {d['difference']:+.1f} {interval}")
    print(f"written {out / f'learning-{game}.json'}, .png and -report.html; run folder {run_root}; "
          f"{summary['total_seconds']:.0f} s")
    return 0


def run_main(command: str, main: Callable[[], int]) -> int:
    """`main` as `coplay train` runs (`coplay.cli._guarded`): Ctrl-C and SIGTERM end it within a bounded time
    with one line naming the folder to resume and exit code 130, no traceback; otherwise `main`'s code."""
    from coplay.cli import _guarded

    code = 0

    def start() -> None:
        nonlocal code
        code = main()

    return _guarded(command, start, announce=False) or code


if __name__ == "__main__":
    sys.exit(run_main("python -m benchmarks.learning", main))
