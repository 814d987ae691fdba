"""What a learning table needs beside the episode evaluation (`benchmarks.coevolution`, issue 36): the
per-decision probe of a run's first and last probed adapters next to the bots on the same positions, their
paired change, and the run's wall time split into training and measuring.

Why: an episode evaluation of 32 seeds says whether the policy plays better; the probe says whether its single
decisions got closer to the game's lookahead, on fixed positions that do not depend on where its own play
led, so the two can disagree and both are reported. And on 2 cores an evaluation of 32 seeds costs minutes,
so "a run of at most 45 minutes" is only comparable between runs when the minutes spent training (cold
start, rollouts, learner) are told apart from those spent measuring (evaluations and probes), from the run's
phase timeline (`coplay.driver.phases`).

`python -m benchmarks.learning_evidence --arm NAME=RESULTS.json ... --name STEM` compares learning runs of
one game on one protocol (e.g. same-state against episode groups): each arm against its cold start, and every
arm against the first, paired over the evaluation seeds and over the probe positions.

Reads run folders only (`eval/probe-it<k>.json`, the phase totals); imports coplay's statistics, never ray
or torch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# Phase-timeline segments that measure rather than train: `evaluation` holds the episode evaluations, the
# probes and each learner step's served-policy update measure (`probe.kl_prompts`).
MEASURING = ("evaluation",)


def time_split(phases: dict[str, Any] | None) -> dict[str, float] | None:
    """{wall_s, measuring_s, training_s} from a run's phase totals (`run_totals`); None without them."""
    if not phases:
        return None
    measuring = sum(phases["seconds"].get(name, 0.0) for name in MEASURING)
    return {"wall_s": round(phases["wall_s"], 1), "measuring_s": round(measuring, 1),
            "training_s": round(phases["wall_s"] - measuring, 1)}


def _regret(score: dict[str, Any]) -> dict[str, Any]:
    r = score.get("regret") or {}
    return {"mean": score["mean_regret"], "ci95": [r.get("ci_low"), r.get("ci_high")], "n": score["n"],
            "best_share": score.get("best_share"), "invalid_share": score.get("invalid_share")}


def probe_evidence(run_root: Path, game: str) -> dict[str, Any] | None:
    """The run's first and last probes of `game`: the model's mean regret at each (95% t), the bots' on the
    same positions, whether the bots separate, the last minus the first paired over the positions, and each
    probe's action spread. None when the run probed nothing."""
    from coplay.driver.probe import read_probes, regret_change

    points = [p for p in read_probes(run_root) if game in p.get("results", {})]
    if not points:
        return None
    first, last = points[0], points[-1]
    entry = last["results"][game]
    out: dict[str, Any] = {
        "first_iteration": first["meta"]["iteration"], "last_iteration": last["meta"]["iteration"],
        "first": _regret(first["results"][game]["model"]), "last": _regret(entry["model"]),
        "bots": {bot: _regret(entry[bot]) for bot in ("random", "expert") if bot in entry},
        "bots_separate": bool(entry.get("bots_separate")),
        "action_spread": {str(p["meta"]["iteration"]): p["results"][game].get("action_spread")
                          for p in points},
        "paired_last_minus_first": None,
    }
    if first is not last:
        d = regret_change(first, last, game)
        out["paired_last_minus_first"] = d.as_dict() if d is not None else None
    return out


def _cell(r: dict[str, Any]) -> str:
    low, high = r["ci95"]
    return f"{r['mean']:.2f} [{low:.2f}, {high:.2f}]" if low is not None else f"{r['mean']:.2f}"


def probe_markdown(runs: list[dict[str, Any]]) -> list[str]:
    """The probe table (one row per run) and the time split, as Markdown lines; [] when no run probed."""
    rows = [r for r in runs if r.get("probe")]
    lines: list[str] = []
    if rows:
        lines += ["", "Per-decision probe (mean regret against the game's lookahead, lower is better; "
                      "the same fixed positions for every row):", "",
                  "| game | variant | positions | first probe (iteration) | last probe (iteration) "
                  "| last minus first (paired) | random bot | expert bot | bots separate |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for run in rows:
            p = run["probe"]
            d = p["paired_last_minus_first"]
            change = f"{d['difference']:+.2f} [{d['ci_low']:+.2f}, {d['ci_high']:+.2f}]" if d else "-"
            bots = p["bots"]
            lines.append(f"| {run['game']} | {run['variant']} | {p['last']['n']} | {_cell(p['first'])} "
                         f"({p['first_iteration']}) | {_cell(p['last'])} ({p['last_iteration']}) "
                         f"| {change} | "
                         f"{_cell(bots['random']) if 'random' in bots else '-'} | "
                         f"{_cell(bots['expert']) if 'expert' in bots else '-'} | "
                         f"{'yes' if p['bots_separate'] else '**no: not a result**'} |")
    timed = [r for r in runs if r.get("time_split")]
    if timed:
        lines += ["", "Wall time (phase timeline): training = start-up, cold start, rollouts, learner, bank; "
                      "measuring = episode evaluations, probes and the learner steps' served-policy "
                      "measure.", "",
                  "| game | variant | wall s | training s | measuring s |", "|---|---|---|---|---|"]
        for run in timed:
            t = run["time_split"]
            lines.append(f"| {run['game']} | {run['variant']} | {t['wall_s']:.0f} | {t['training_s']:.0f} | "
                         f"{t['measuring_s']:.0f} |")
    return lines


def probe_summary(runs: list[dict[str, Any]]) -> list[str]:
    """One line per probed run: did the probe regret fall (paired), or do the bots not separate there."""
    from coplay.eval.stats import PairedDifference, gain_verdict

    lines = []
    for run in (r for r in runs if r.get("probe")):
        p = run["probe"]
        head = f"  {run['variant']} probe on {run['game']}"
        if not p["bots_separate"]:
            lines.append(f"{head}: the bots' regret intervals overlap: not a result")
        elif p["paired_last_minus_first"]:
            d = PairedDifference(**{k: v for k, v in p["paired_last_minus_first"].items()
                                    if k != "excludes_zero"})
            lines.append(f"{head}: iteration {p['last_iteration']} minus iteration {p['first_iteration']} "
                         f"{d.difference:+.2f} [{d.ci_low:+.2f}, {d.ci_high:+.2f}] regret (paired over {d.n} "
                         f"positions); {gain_verdict(d, higher_is_better=False, what='regret')}")
    return lines


def _probe_regrets(run_dir: str | None, game: str) -> tuple[dict[int, float], dict[int, float]] | None:
    """Per-position regrets of the run's first and last probe on `game` (its files read once)."""
    from coplay.driver.probe import read_probes

    points = [p for p in read_probes(Path(run_dir)) if game in p.get("results", {})] if run_dir else []
    if not points:
        return None
    first, last = (dict(enumerate(p["results"][game]["model"]["regrets"])) for p in (points[0], points[-1]))
    return first, last


def compare_arms(arms: dict[str, dict[str, Any]], shared_cold_start: bool = False) -> dict[str, Any]:
    """Several learning runs of one game on one protocol (name -> their `benchmarks.coevolution` results
    entry): per arm its final evaluation and probe minus its cold start (paired), its minutes; and every
    later arm minus the first, paired over the evaluation seeds and over the probe positions, at the cold
    start and at the end, so "which learned more in the same minutes" has an interval and a difference that
    was there before any learner step (another observation text, another SFT) is told apart from one GRPO
    made. Arms must share the evaluation seeds and the probe. With `shared_cold_start` (arms whose cold start
    is one policy played greedily on the same seeds, e.g. the base model: the same game on every seed), an
    arm that skipped its own cold-start evaluation (`eval.at_start=false`) is paired against the first
    arm's, and its row names it (`cold_start_from`)."""
    from benchmarks.coevolution import paired
    from coplay.eval.stats import paired_difference

    first_name, first = next(iter(arms.items()))
    game = first["game"]

    def cold_start(run: dict[str, Any]) -> dict[str, Any] | None:
        return run["curve"][0] if run["curve"] and run["curve"][0]["iteration"] == 0 else None

    rows = {}
    for name, run in arms.items():
        if run["game"] != game:
            raise SystemExit(f"arm {name}: game {run['game']}, not {game}")
        cold, cold_from = cold_start(run), None
        if cold is None and shared_cold_start and cold_start(first) is not None and name != first_name:
            cold, cold_from = cold_start(first), first_name
        rows[name] = {"run_dir": run.get("run_dir"), "final": {k: run["final"][k] for k in ("mean", "ci_low",
                                                                                        "ci_high", "n")},
                      "final_iteration": run["final"]["iteration"], "cold_start_from": cold_from,
                      "eval_minus_cold_start": paired(cold, run["final"]),
                      "probe_minus_cold_start": (run.get("probe") or {}).get("paired_last_minus_first"),
                      "time_split": run.get("time_split"), "sizes": run.get("sizes")}

    regrets = {name: _probe_regrets(run.get("run_dir"), game) for name, run in arms.items()}

    def probe_change(name: str, which: int) -> dict[str, Any] | None:
        a, b = regrets[first_name], regrets[name]
        d = paired_difference(a[which], b[which]) if a and b else None
        return d.as_dict() if d else None

    versus = {}
    for name, run in list(arms.items())[1:]:
        versus[f"{name} minus {first_name}"] = {
            "eval": paired(first["final"], run["final"]), "probe_regret": probe_change(name, -1),
            "cold_start_eval": paired(cold_start(first), cold_start(run)),
            "cold_start_probe_regret": probe_change(name, 0)}
    return {"game": game, "arms": rows, "versus_first": versus,
            "protocol_check": first.get("protocol_check"), "bots": first.get("bots")}


def compare_markdown(result: dict[str, Any], command: str) -> str:
    """The comparison as Markdown: one row per arm, then every arm against the first."""
    def cell(d: dict[str, Any] | None) -> str:
        return "-" if not d else f"{d['difference']:+.2f} [{d['ci_low']:+.2f}, {d['ci_high']:+.2f}]"

    passed = (result.get("protocol_check") or {}).get("passed")
    lines = [f"Command: `{command}`", "", f"Game: {result['game']}; protocol check: "
             f"{'passed' if passed else 'NOT passed: not a result'}", "",
             "| arm | final eval [95% t] (iteration) | eval minus cold start (paired) "
             "| probe regret minus cold start (paired) | training s | measuring s |",
             "|---|---|---|---|---|---|"]
    for name, row in result["arms"].items():
        f, t = row["final"], row["time_split"] or {}
        borrowed = f" (cold start of {row['cold_start_from']})" if row.get("cold_start_from") else ""
        lines.append(f"| {name} | {f['mean']:.1f} [{f['ci_low']:.1f}, {f['ci_high']:.1f}] "
                     f"({row['final_iteration']}) | {cell(row['eval_minus_cold_start'])}{borrowed} | "
                     f"{cell(row['probe_minus_cold_start'])} | {t.get('training_s', '-')} | "
                     f"{t.get('measuring_s', '-')} |")
    lines += ["", "| comparison | cold-start eval (paired over seeds) | cold-start probe regret (paired over "
                  "positions) | final eval | final probe regret |", "|---|---|---|---|---|"]
    for name, d in result["versus_first"].items():
        cold = f"{cell(d.get('cold_start_eval'))} | {cell(d.get('cold_start_probe_regret'))}"
        lines.append(f"| {name} | {cold} | {cell(d['eval'])} | {cell(d['probe_regret'])} |")
    for bot, score in sorted((result.get("bots") or {}).items()):
        lines.append(f"\n{bot} bot on the same seeds: {score['mean']:.1f} [{score['ci_low']:.1f}, "
                     f"{score['ci_high']:.1f}]")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """`python -m benchmarks.learning_evidence --arm NAME=RESULTS.json ... --name STEM`: compare_arms on the
    runs of `benchmarks.coevolution` results files (the first run of each), written as STEM.json and .md."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--arm", action="append", required=True, metavar="NAME=RESULTS_JSON")
    parser.add_argument("--name", required=True)
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--shared-cold-start", action="store_true",
                        help="an arm without its own cold-start evaluation (eval.at_start=false) is paired "
                             "against the first arm's: only for one policy played greedily on the same seeds")
    args = parser.parse_args(argv)
    arms = {}
    for spec in args.arm:
        name, _, path = spec.partition("=")
        arms[name] = json.loads(Path(path).read_text())["runs"][0]
    result = compare_arms(arms, shared_cold_start=args.shared_cold_start)
    command = "python -m benchmarks.learning_evidence " + " ".join(sys.argv[1:] if argv is None else argv)
    result["command"] = command
    out = Path(args.out)
    (out / f"{args.name}.json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    text = compare_markdown(result, command)
    (out / f"{args.name}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
