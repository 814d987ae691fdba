"""COS-PLAY's ablation (issue #17): does co-evolving the bank with the policy beat the variants that turn
parts off? Runs chosen `ablation.variant`s (docs/ablations.md) on chosen single-player games, each a real
`coplay.loop.train` from the same config, so every variant sees the same training and evaluation seeds and
the same evaluation protocol (`coplay.eval`: `eval.episodes` episodes on `seeds.eval`, at
`eval.temperature`; `eval.at_start` gives iteration 0, after the cold start). `base` trains nothing: the base
model without adapters and without skills is evaluated once on the same protocol (a flat line in the plot).

Writes under `--out` (default benchmarks/results/) one table, `coevolution[-quick].json` and `.md` (per game
and variant: mean final evaluation score, its 95% t-interval, the difference to `full` paired by start seed
(every variant plays the same evaluation seeds) and with a Welch 95% interval, as `coplay eval --compare`
computes it, and the differences to the variant's own cold start
(iteration 0) and to the random and expert bots paired by start seed), and one plot,
`coevolution[-quick].png` (evaluation score over iterations per variant, the bots as levels, one panel per
game). The bots (`coplay.eval.ruler`: random, expert and 2048's fixed-order heuristic) play each run's own
protocol; a game whose protocol check fails (the expert's 95% interval not entirely above the random bot's)
is labelled in the table, the plot and the summary lines as not a result. The JSON records the command,
commit, config sizes and seconds per run; run folders stay under `run.out_dir`.

    python -m benchmarks.coevolution --variants full,grpo_no_bank,sft_only --games 2048,tetris
    python -m benchmarks.coevolution --quick     # tiny model, 2 iterations, 2 variants: a smoke in ~1 minute

Config per game: `--config PATH` (with `games=[<game>]`), else launch/configs/coevolution-<game>.yaml; dotted
overrides after the options apply to every run (`eval.at_start=false` skips the cold start's evaluation).
`sft_final_bank` reads the bank of `--bank-from RUN_DIR`, or,
when `full` ran first in the same call, that run's final bank.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.learning import _commit, differences, run_main
from benchmarks.learning_evidence import probe_evidence, probe_markdown, probe_summary, time_split

VARIANT_ORDER = ("full", "sft_only", "sft_first_bank", "sft_final_bank", "grpo_no_bank", "grpo_first_bank",
                 "base")
QUICK_CONFIG = "launch/configs/tiny-2048.yaml"
QUICK = ["sft.episodes_per_game=2", "sft.max_steps=6", "sft.max_examples_per_adapter=8", "sft.epochs=1",
         "rollout.max_steps=3", "rollout.start_states=1", "rollout.group_size=2", "loop.iterations=2",
         "eval.every=2", "eval.episodes=2", "loop.checkpoint_every=1", "logging.console=false",
         "skill_bank.group_size=2"]


def run_config(config: str | None, game: str, quick: bool) -> str:
    if config:
        return config
    return QUICK_CONFIG if quick else f"launch/configs/coevolution-{game}.yaml"


def sizes(cfg: Any) -> dict[str, Any]:
    """What makes a run long: the figures a reader needs to compare runs."""
    return {"model": cfg.model.name, "iterations": cfg.loop.iterations,
            "start_states": cfg.rollout.start_states, "group_size": cfg.rollout.group_size,
            "max_steps": cfg.rollout.max_steps, "eval_max_steps": cfg.eval.max_steps or cfg.rollout.max_steps,
            "sft": cfg.sft.enabled, "sft_episodes": cfg.sft.episodes_per_game, "sft_epochs": cfg.sft.epochs,
            "eval_every": cfg.eval.every, "eval_episodes": cfg.eval.episodes,
            "eval_temperature": cfg.eval.temperature,
            "eval_seeds": [cfg.seeds.eval.start, cfg.seeds.eval.start + cfg.eval.episodes]}


def eval_curve(run_root: Path, game: str) -> list[dict[str, Any]]:
    """The run's evaluations per iteration (`eval/it<k>.json`; 0 = after the cold start)."""
    points = []
    for path in sorted((run_root / "eval").glob("it*.json")):
        body = json.loads(path.read_text())
        if game in body.get("results", {}):
            entry = body["results"][game]
            points.append({"iteration": int(body["meta"]["iteration"]), **entry["score"],
                           "per_seed": entry.get("per_seed")})
    return sorted(points, key=lambda p: p["iteration"])


def run_variant(config: str, game: str, variant: str, overrides: list[str]) -> dict[str, Any]:
    """One training run of `variant` (or, for `base`, one evaluation of the base model); its curve."""
    from coplay.config import ConfigError, load_config
    from coplay.driver.phases import run_totals
    from coplay.runs import RunDir

    # iteration 0 (the cold start) is evaluated unless an override says `eval.at_start=false`: an arm whose
    # cold start is the base model played greedily, already evaluated on the same seeds by another arm
    cfg = load_config(config, [f"games=[{game}]", "eval.at_start=true", *overrides,
                               f"ablation.variant={variant}", f"run.name=coevolution-{game}-{variant}"])
    if variant != "base" and not cfg.ablation.trains_grpo and not cfg.ablation.updates_bank:
        # nothing changes between iterations (no learner step, no bank update): one iteration evaluates the
        # same policy the longer runs would, for a fraction of the time
        cfg = cfg.with_values({"loop.iterations": 1, "eval.every": 1, "loop.checkpoint_every": 1})
    if not cfg.eval.every or cfg.loop.iterations % cfg.eval.every:
        raise ConfigError(f"eval.every={cfg.eval.every}: must divide loop.iterations={cfg.loop.iterations}, "
                          f"so the final iteration is evaluated")
    started, commit = time.time(), _commit()  # the code the run starts from (the file's is its writer's)
    if variant == "base":
        from coplay.eval.runner import evaluate_locally, open_engine

        engine = open_engine(cfg)
        try:
            results, _ = evaluate_locally(cfg, "model", engine=engine, versions={"act": 0, "retrieve": 0})
        finally:
            engine.close()
        score = results[game]["score"]
        curve = [{"iteration": k, **score, "per_seed": results[game]["per_seed"]}
                 for k in (0, cfg.loop.iterations)]
        run_dir = None
    else:
        from coplay.loop import train

        run_root = Path(train(cfg))
        curve, run_dir = eval_curve(run_root, game), str(run_root)
    result = {"variant": variant, "game": game, "config": config, "commit": commit, "sizes": sizes(cfg),
              "run_dir": run_dir,
              "seconds": round(time.time() - started, 1), "curve": curve, "final": curve[-1]}
    if run_dir is not None:
        result.update(bank_evidence(Path(run_dir)))
        result["phases"] = run_totals(RunDir.open(run_dir).read_metrics())  # coplay.driver.phases
        result["time_split"] = time_split(result["phases"])
        result["probe"] = probe_evidence(Path(run_dir), game)
    result.update(ruler_evidence(cfg, game, Path(run_dir) / "eval" if run_dir else None))
    return result


def ruler_evidence(cfg: Any, game: str, eval_dir: Path | None) -> dict[str, Any]:
    """The bots on the run's evaluation protocol (read from the run's `eval/bots-<bot>.json` where the loop
    wrote them) and the protocol check: `bots` {bot: score summary + per-seed scores}, `protocol_check`."""
    from coplay.eval.ruler import bot_results, protocol_check

    bots, _ = bot_results(cfg, [game], out_dir=eval_dir)
    return {"bots": {bot: {**res[game]["score"], "per_seed": res[game]["per_seed"]}
                     for bot, res in bots.items()},
            "protocol_check": protocol_check(bots).get(game)}


def bank_evidence(run_root: Path) -> dict[str, Any]:
    """What the bank did in a run: the `maintenance` block of every iteration's metrics line, the
    curator-approved operations in total, and the run's skill analysis (`coplay bank report --json`)."""
    from coplay.report.skill_analysis import load_skill_analysis
    from coplay.report.skill_views import analysis_json
    from coplay.runs import RunDir

    per_iteration = []
    for record in RunDir.open(run_root).read_metrics():
        if "maintenance" in record and "iteration" in record:
            per_iteration.append({"iteration": record["iteration"], **record["maintenance"]})
    approved = sum(sum(m.get("applied", {}).values()) for m in per_iteration)
    return {"maintenance": per_iteration, "approved_operations": approved,
            "skill_analysis": json.loads(analysis_json(load_skill_analysis(run_root)))}


# The evaluation after the cold start (iteration 0) of a GRPO variant is the policy of an SFT variant: the
# same teacher data, seeds and SFT, before any learner step or bank update.
COLD_START_OF = {"grpo_no_bank": "sft_only", "grpo_first_bank": "sft_first_bank", "full": "sft_first_bank"}


def paired(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, Any] | None:
    """after − before over the start seeds both evaluations played (None: fewer than 2 shared, or a point
    without per-seed scores)."""
    from coplay.eval.stats import paired_difference

    if not before or not after:
        return None
    d = paired_difference(before.get("per_seed") or {}, after.get("per_seed") or {})
    return d.as_dict() if d is not None else None


def bots_in_order(bots: dict[str, Any]) -> list[tuple[str, Any]]:
    """random, expert, heuristic (the results JSON stores its keys sorted; the table keeps one order)."""
    order = ("random", "expert", "heuristic")
    return sorted(bots.items(), key=lambda kv: (order.index(kv[0]) if kv[0] in order else len(order), kv[0]))


def game_check(runs: list[dict[str, Any]], game: str) -> dict[str, Any] | None:
    """The protocol check of a game's runs (they share one protocol; None: results from before the ruler)."""
    return next((r["protocol_check"] for r in runs if r["game"] == game and r.get("protocol_check")), None)


def table(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per game and variant: the final evaluation, its difference to `full` (paired by start seed, and Welch
    95%), to its own cold start (iteration 0) and to the bots (paired by start seed), and the game's protocol
    check. An SFT variant that did not run itself is read off the iteration-0 evaluation of a GRPO run that
    starts from its policy (`COLD_START_OF`), marked `from`. The bots follow as rows of their own (`bot`:
    true)."""
    rows = []

    def row(run: dict[str, Any], variant: str, point: dict[str, Any], source: str | None,
            cold: dict[str, Any] | None, bot: bool = False) -> None:
        full = next((r for r in runs if r["game"] == run["game"] and r["variant"] == "full"), None)
        versus = full is not None and variant != "full"
        diff = differences(point, full["final"]) if versus else None
        bots = run.get("bots") or {}
        rows.append({"game": run["game"], "variant": variant, "n": point["n"], "mean": point["mean"],
                     "ci95": [point["ci_low"], point["ci_high"]], "iteration": point.get("iteration"),
                     "minus_full": diff,
                     "paired_minus_full": paired(full["final"], point) if versus else None,
                     "seconds": run["seconds"] if source is None and not bot else None,
                     "from": source, "bot": bot,
                     "stopped_early": bool(run.get("stopped_early")) and source is None and not bot,
                     "paired_minus_cold_start": None if bot else paired(cold, point),
                     "paired_minus_bots": {} if bot else {b: paired(v, point) for b, v in bots.items()},
                     "protocol_check": game_check(runs, run["game"])})

    def cold_start(run: dict[str, Any]) -> dict[str, Any] | None:
        start = run["curve"][0] if run["curve"] and run["variant"] != "base" else None
        if start is None or start["iteration"] != 0 or run["final"]["iteration"] == 0:
            return None
        return start

    for run in runs:
        row(run, run["variant"], run["final"], None, cold_start(run))
    for run in runs:
        derived, start = COLD_START_OF.get(run["variant"]), run["curve"][0] if run["curve"] else None
        ran = {(r["game"], r["variant"]) for r in runs} | {(r["game"], r["variant"]) for r in rows}
        if derived and not run.get("sizes", {}).get("sft", True):
            # sft.enabled false: iteration 0 of a run without a bank is the base model on the run's prompt;
            # with the seed bank it is no variant of the table
            derived = "base" if derived == "sft_only" else None
        if derived and start is not None and start["iteration"] == 0 and (run["game"], derived) not in ran:
            row(run, derived, start, f"{run['variant']} at iteration 0", None)
    for game in dict.fromkeys(r["game"] for r in runs):
        source = next((r for r in runs if r["game"] == game and r.get("bots")), None)
        for bot, score in bots_in_order((source or {}).get("bots", {})):
            row(source, f"{bot} bot", score, None, None, bot=True)
    return rows


def _paired_cell(d: dict[str, Any] | None) -> str:
    return "-" if not d else f"{d['difference']:+.1f} [{d['ci_low']:+.1f}, {d['ci_high']:+.1f}]"


def _check_cell(check: dict[str, Any] | None) -> str:
    from coplay.eval.ruler import FAILED_LABEL

    if check is None:
        return "not checked"
    return "passed" if check["passed"] else f"**{FAILED_LABEL}**"


def summary_lines(rows: list[dict[str, Any]]) -> list[str]:
    """What the table says, per game: each variant's difference to `full` and to its cold start where the
    protocol check passed; otherwise only that the check failed (or was not made) and nothing is a result."""
    from coplay.eval.ruler import FAILED_LABEL

    lines = []
    for game in dict.fromkeys(r["game"] for r in rows):
        check = next((r["protocol_check"] for r in rows if r["game"] == game), None)
        if check is None:
            lines.append(f"{game}: protocol not checked (runs from before the ruler): no difference below is "
                         f"reported as a result")
            continue
        if not check["passed"]:
            lines.append(f"{game}: {FAILED_LABEL} ({check['reason']})")
            continue
        lines.append(f"{game}: protocol check passed ({check['reason']})")
        for r in (r for r in rows if r["game"] == game and not r["bot"]):
            parts = []
            if r.get("paired_minus_full"):  # the same evaluation seeds: the differences paired by seed
                parts.append(f"minus full {_paired_cell(r['paired_minus_full'])} (paired)")
            elif r["minus_full"] and r["minus_full"]["ci95"]:
                d = r["minus_full"]
                parts.append(f"minus full {d['difference']:+.1f} [{d['ci95'][0]:+.1f}, {d['ci95'][1]:+.1f}] "
                             f"(Welch)")
            if r["paired_minus_cold_start"]:
                parts.append(f"minus its cold start {_paired_cell(r['paired_minus_cold_start'])} (paired)")
            if (r["paired_minus_bots"] or {}).get("expert"):
                expert = r["paired_minus_bots"]["expert"]
                parts.append(f"minus the expert bot {_paired_cell(expert)} (paired)")
            if parts:
                label = f"{r['variant']} (stopped early, at iteration {r['iteration']})" \
                    if r.get("stopped_early") else r["variant"]
                lines.append(f"  {label}: " + "; ".join(parts))
    return lines


def markdown(rows: list[dict[str, Any]], command: str) -> str:
    lines = [f"Command: `{command}`", "", *(f"- {line.strip()}" for line in summary_lines(rows)
                                             if not line.startswith("  ")), "",
             "| game | variant | final eval score (mean) | 95% CI | n | minus full (paired) | minus full "
             "| Welch 95% CI | minus cold start (paired) | minus random bot (paired) "
             "| minus expert bot (paired) | seconds | protocol check |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        d = r["minus_full"]
        diff = f"{d['difference']:+.1f}" if d else "-"
        ci = f"[{d['ci95'][0]:+.1f}, {d['ci95'][1]:+.1f}]" if d and d["ci95"] else "-"
        variant = f"{r['variant']} ({r['from']})" if r.get("from") else r["variant"]
        if r.get("stopped_early"):
            variant += f" (stopped early: iteration {r['iteration']})"
        seconds = f"{r['seconds']:.0f}" if r.get("seconds") is not None else "-"
        vs = r.get("paired_minus_bots") or {}
        lines.append(f"| {r['game']} | {variant} | {r['mean']:.1f} | [{r['ci95'][0]:.1f}, "
                     f"{r['ci95'][1]:.1f}] | {r['n']} | {_paired_cell(r.get('paired_minus_full'))} | "
                     f"{diff} | {ci} | "
                     f"{_paired_cell(r.get('paired_minus_cold_start'))} | {_paired_cell(vs.get('random'))} | "
                     f"{_paired_cell(vs.get('expert'))} | {seconds} | "
                     f"{_check_cell(r.get('protocol_check'))} |")
    return "\n".join(lines) + "\n"


BOT_STYLE = {"random": ("grey", ":"), "expert": ("black", "-."), "heuristic": ("brown", (0, (1, 3)))}


def plot(path: Path, runs: list[dict[str, Any]], games: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(games), figsize=(6 * len(games), 4), squeeze=False)
    for ax, game in zip(axes[0], games, strict=True):
        for run in (r for r in runs if r["game"] == game):
            color = f"C{VARIANT_ORDER.index(run['variant'])}"
            xs = [p["iteration"] for p in run["curve"]]
            style = "--" if run["variant"] == "base" else "-"
            ax.plot(xs, [p["mean"] for p in run["curve"]], style, marker="o", color=color,
                    label=run["variant"])
            ax.fill_between(xs, [p["ci_low"] for p in run["curve"]], [p["ci_high"] for p in run["curve"]],
                            color=color, alpha=0.15)
        source = next((r for r in runs if r["game"] == game and r.get("bots")), None)
        for bot, score in bots_in_order((source or {}).get("bots", {})):
            color, line = BOT_STYLE.get(bot, ("grey", ":"))
            ax.axhline(score["mean"], color=color, linestyle=line, label=f"{bot} bot")
            ax.axhspan(score["ci_low"], score["ci_high"], color=color, alpha=0.08)
        check = game_check(runs, game)
        verdict = ("" if check is None else "" if check["passed"]
                   else "\nprotocol check FAILED: the bots do not separate; not a result")
        ax.set_title(game + verdict, **({"fontsize": 10, "color": "red"} if verdict else {}))
        ax.set_xlabel("iteration (0 = after the cold start)")
        ax.set_ylabel("eval score (mean, 95% t-interval)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_results(out: Path, stem: str, command: str, started: float, games: list[str], variants: list[str],
                  runs: list[dict[str, Any]], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The table (JSON, Markdown) and the plot of the runs so far: rewritten after every run, so a long call
    that stops early keeps what finished. `extra` keys go into the JSON as they are."""
    out.mkdir(parents=True, exist_ok=True)
    summary = {"command": command, "commit": _commit(), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
               "total_seconds": round(time.time() - started, 1), "games": games, "variants": variants,
               "complete": len(runs) == len(games) * len(variants), "table": table(runs), "runs": runs,
               **(extra or {})}
    summary["summary"] = summary_lines(summary["table"]) + probe_summary(runs)
    (out / f"{stem}.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    probe_lines = "\n".join(probe_markdown(runs))
    (out / f"{stem}.md").write_text(markdown(summary["table"], command) + probe_lines + "\n")
    plot(out / f"{stem}.png", runs, sorted({r["game"] for r in runs}, key=games.index))
    return summary


def backfill_ruler(run: dict[str, Any]) -> dict[str, Any]:
    """A run from before the ruler: the bots played now on its recorded protocol (its config with the
    evaluation episodes and horizon of its `sizes`; the eval horizon was then the training one), marked
    `ruler_backfilled`. Per-seed scores of its own evaluations were not stored, so no paired column."""
    from coplay.config import load_config

    sizes = run["sizes"]
    start = sizes["eval_seeds"][0]
    cfg = load_config(run["config"], [f"games=[{run['game']}]", f"eval.episodes={sizes['eval_episodes']}",
                                      f"eval.max_steps={sizes.get('eval_max_steps') or sizes['max_steps']}",
                                      f"seeds.eval.start={start}", "logging.console=false"])
    return {**run, **ruler_evidence(cfg, run["game"], None),
            "ruler_backfilled": f"bots played by --combine on {run['config']} with the run's sizes"}


def combine(paths: list[str], out: Path, stem: str, argv: list[str] | None) -> int:
    """One table and plot from the runs of several results files (each keeps its own command and commit
    under `sources`). Runs from before the ruler get their bots and protocol check played now
    (`backfill_ruler`)."""
    runs, sources = [], []
    for path in paths:
        body = json.loads(Path(path).read_text())
        runs += [r if "protocol_check" in r else backfill_ruler(r) for r in body["runs"]]
        sources.append({k: body.get(k) for k in ("command", "commit", "created", "total_seconds")} |
                       {"file": path})
    return table_of_runs(runs, out, stem, argv, {"sources": sources})


def table_of_runs(runs: list[dict[str, Any]], out: Path, stem: str, argv: list[str] | None,
                  extra: dict[str, Any]) -> int:
    """Write and print the table and plot of runs gathered without training (`--combine`, `--from-run`)."""
    games = list(dict.fromkeys(r["game"] for r in runs))
    variants = sorted({r["variant"] for r in runs}, key=VARIANT_ORDER.index)
    runs.sort(key=lambda r: (games.index(r["game"]), VARIANT_ORDER.index(r["variant"])))
    command = " ".join(["python -m benchmarks.coevolution", *(argv if argv is not None else sys.argv[1:])])
    extra = {"total_seconds": round(sum(r["seconds"] or 0.0 for r in runs), 1), **extra}
    summary = write_results(out, stem, command, time.time(), games, variants, runs, extra)
    print(markdown(summary["table"], command))
    print("\n".join(summary["summary"]))
    return 0


def from_run(run_root: Path) -> dict[str, Any]:
    """The results entry of a run folder an earlier call trained, read back without training: its own
    config, evaluations, phase timeline and bank evidence, and the bots played now on its protocol. A run
    stopped before its last iteration (interrupted, or cut to fit a session) keeps the evaluations it made:
    `stopped_early` says so, its curve ends at its last evaluation and `seconds` is its recorded wall time."""
    from coplay.config import load_config
    from coplay.driver.phases import run_totals
    from coplay.runs import RunDir

    config = run_root / "config.yaml"
    if not config.is_file():
        raise SystemExit(f"--from-run {run_root}: not a run folder (no config.yaml)")
    cfg = load_config(str(config), ["logging.console=false"])
    game = cfg.games[0]
    curve = eval_curve(run_root, game)
    if not curve:
        raise SystemExit(f"--from-run {run_root}: no evaluation of {game} under eval/ (stopped before one)")
    phases = run_totals(RunDir.open(run_root).read_metrics())
    last = curve[-1]["iteration"]
    return {"variant": cfg.ablation.variant, "game": game, "config": str(config), "commit": None,
            "sizes": sizes(cfg), "run_dir": str(run_root),
            "seconds": round(phases["wall_s"], 1) if phases else None, "curve": curve, "final": curve[-1],
            "stopped_early": last < cfg.loop.iterations, "last_evaluated_iteration": last,
            **bank_evidence(run_root), "phases": phases, "time_split": time_split(phases),
            "probe": probe_evidence(run_root, game), **ruler_evidence(cfg, game, run_root / "eval")}


def read_back(run_dirs: list[str], out: Path, stem: str, argv: list[str] | None) -> int:
    """`--from-run`: one table and plot from finished or stopped run folders (`from_run`)."""
    runs = [from_run(Path(d)) for d in run_dirs]
    return table_of_runs(runs, out, stem, argv, {"complete": not any(r["stopped_early"] for r in runs),
                                                 "stopped_early": [r["run_dir"] for r in runs
                                                                   if r["stopped_early"]]})


def parse_list(text: str, allowed: tuple[str, ...] | None, what: str) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in items if allowed is not None and x not in allowed]
    if bad or not items:
        raise SystemExit(f"--{what} {text!r}: expected a comma-separated list of {list(allowed or [])}")
    return items


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variants", default=None, help="default full,grpo_no_bank,sft_only "
                                                         "(--quick: full,grpo_no_bank)")
    parser.add_argument("--games", default=None, help="default 2048,tetris (--quick: 2048)")
    parser.add_argument("--config", default=None, help="base config for every game (default: per game "
                                                       "launch/configs/coevolution-<game>.yaml)")
    parser.add_argument("--bank-from", default=None, help="sft_final_bank: a finished run folder")
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--name", default=None, help="file stem of the table and plot (default coevolution, "
                                                     "or coevolution-quick)")
    parser.add_argument("--combine", nargs="+", default=None, metavar="RESULTS_JSON",
                        help="no runs: one table and plot (under --out, stem --name) from the runs of "
                             "earlier results files, e.g. variants run by separate calls")
    parser.add_argument("--from-run", nargs="+", default=None, metavar="RUN_DIR",
                        help="no training: the table and plot of run folders an earlier call trained "
                             "(finished, or stopped early: their curve ends at their last evaluation)")
    parser.add_argument("--quick", action="store_true", help="smoke: tiny model, 2 iterations, 2 variants")
    parser.add_argument("overrides", nargs="*", help="dotted config overrides for every run")
    args = parser.parse_args(argv)
    import coplay_envs
    from coplay.config import GAME_KEYS

    if args.combine:
        return combine(args.combine, Path(args.out), args.name or "coevolution", argv)
    if args.from_run:
        return read_back(args.from_run, Path(args.out), args.name or "coevolution", argv)
    default_variants = "full,grpo_no_bank" if args.quick else "full,grpo_no_bank,sft_only"
    variants = parse_list(args.variants or default_variants, VARIANT_ORDER, "variants")
    games = parse_list(args.games or ("2048" if args.quick else "2048,tetris"), GAME_KEYS, "games")
    multi = [g for g in games if coplay_envs.seats(g)]
    if multi:
        raise SystemExit(f"--games: {multi} are multi-seat; the ablation is over single-player games")
    variants = sorted(variants, key=VARIANT_ORDER.index)  # full first: sft_final_bank may read its bank
    overrides = [*(QUICK if args.quick else []), *args.overrides]
    command = " ".join(["python -m benchmarks.coevolution", *(argv if argv is not None else sys.argv[1:])])
    started, runs = time.time(), []
    out, stem = Path(args.out), args.name or ("coevolution-quick" if args.quick else "coevolution")
    for game in games:
        config = run_config(args.config, game, args.quick)
        for variant in variants:
            extra = []
            if variant == "sft_final_bank":
                full = next((r for r in runs if r["game"] == game and r["variant"] == "full"), None)
                bank_from = args.bank_from or (full["run_dir"] if full else None)
                if not bank_from:
                    raise SystemExit("sft_final_bank needs --bank-from RUN_DIR, or `full` in --variants")
                extra = [f"ablation.bank_from={bank_from}"]
            runs.append(run_variant(config, game, variant, [*overrides, *extra]))
            print(json.dumps({k: runs[-1][k] for k in ("game", "variant", "seconds", "final")}), flush=True)
            summary = write_results(out, stem, command, started, games, variants, runs)  # after every run
    print(markdown(summary["table"], command))
    print("\n".join(summary["summary"]))
    print(json.dumps({"table": str(out / f"{stem}.json"), "plot": str(out / f"{stem}.png"),
                      "total_seconds": summary["total_seconds"]}))
    return 0


if __name__ == "__main__":
    sys.exit(run_main("python -m benchmarks.coevolution", main))
