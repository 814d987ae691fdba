"""Finished runs' checkpoints beside the base model they started from, re-evaluated on one protocol and paired
(issue 36): each policy's episodes on the evaluation seeds and its one decision at each probe position.

Why: a run evaluates its policy as it goes, at `eval.temperature` (0.3 by default), and only when
`eval.every` says; its last learner step is never evaluated (the loop serves it one iteration late). On Candy
Crush's 32 seeds at 6 moves, two in-run evaluations of the same base model at temperature 0.3 that differed
only in their sampling seeds differed by +4.8 [-1.7, +11.3]: as much as the gains being measured. Here the
checkpoints are evaluated afterwards, by default greedily (`eval.temperature=0`): a policy's game on a seed is
then one deterministic game, so a paired difference between two policies measures how they play, not how the
dice fell. The random, heuristic and expert bots are on the same seeds and horizon (the ruler), and a game
whose bots do not separate is labelled as not a result.

    python -m benchmarks.reevaluate --run NAME=RUN_DIR [--run ...] --steps 10 --name STEM \\
        [eval.temperature=0 ...]

Every measurement is a `coplay eval` process (`--probe` for the probe) writing `STEM/<label>.json` under
`--out`; a file already there from the same protocol (temperature, seeds, horizon, policy) is read instead of
measured again, so an interrupted comparison resumes (delete a file to measure it again). The base model is
evaluated with the first run's config; each checkpoint with its own run's, so its prompts are the ones it
was trained on. Writes STEM.json and STEM.md beside the folder.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

DEFAULT_OVERRIDES = ("eval.temperature=0",)


def _matches(path: Path, want: dict[str, Any]) -> bool:
    """The file at `path` exists and its meta records the wanted values (same protocol and policy)."""
    if not path.is_file():
        return False
    meta = json.loads(path.read_text()).get("meta", {})
    same_run = "run" not in want or (meta.get("run") is not None
                                     and Path(meta["run"]).resolve() == Path(want["run"]).resolve())
    return same_run and all(meta.get(k) == v for k, v in want.items() if k != "run")


def measure(run_dir: Path, policy: str, step: int | None, overrides: list[str], out: Path, stem: str,
            probe: bool, want: dict[str, Any]) -> tuple[dict[str, Any], float | None]:
    """The results file `out/stem.json`: read when it matches `want`, else written by a `coplay eval`
    process; returns (its contents, the seconds measured here, None when read)."""
    path = out / f"{stem}.json"
    if _matches(path, want):
        return json.loads(path.read_text()), None
    if path.exists():
        raise SystemExit(f"{path}: exists from another protocol or policy than {want}; move it away")
    cmd = [sys.executable, "-m", "coplay.cli", "eval", str(run_dir), *overrides, "--policy", policy,
           "--out", str(out), "--name", stem]
    cmd += (["--step", str(step)] if step is not None else []) + (["--probe"] if probe else [])
    started = time.perf_counter()
    subprocess.run(cmd, check=True)
    return json.loads(path.read_text()), round(time.perf_counter() - started, 1)


def _paired(a: dict[Any, float], b: dict[Any, float], higher_is_better: bool, what: str) -> dict[str, Any]:
    from coplay.eval.stats import gain_verdict, paired_difference

    d = paired_difference(a, b)
    if d is None:
        return {"n": 0}
    return {"n": d.n, "difference": d.difference, "ci95": [d.ci_low, d.ci_high],
            "bootstrap95": [d.boot_low, d.boot_high], "verdict": gain_verdict(d, higher_is_better, what)}


def policy_row(evaluation: dict[str, Any], probe: dict[str, Any] | None, base: dict[str, Any] | None,
               base_probe: dict[str, Any] | None, game: str) -> dict[str, Any]:
    """One policy on one game: its mean score and probe regret (without `--no-probe`), and each minus the
    base model's, paired over the evaluation seeds and over the probe positions."""
    score = evaluation["results"][game]["score"]
    row: dict[str, Any] = {
        "score": {"mean": score["mean"], "ci95": [score["ci_low"], score["ci_high"]], "n": score["n"]},
        "versions": evaluation["meta"].get("versions"),
        "learner_step": evaluation["meta"].get("learner_step")}
    if base is not None:
        row["score_minus_base"] = _paired(base["results"][game]["per_seed"],
                                          evaluation["results"][game]["per_seed"], True, "the score")
        # seeds on which the policy scored exactly what the base model did (a different score means a
        # different game; the same score almost always the same game when both play greedily)
        shared = [s for s in base["results"][game]["per_seed"]
                  if evaluation["results"][game]["per_seed"].get(s) == base["results"][game]["per_seed"][s]]
        row["games_equal_to_base"] = len(shared)
    if probe is None:
        return row
    model = probe["results"][game]["model"]
    row["probe"] = {"mean_regret": model["mean_regret"], "ci95": [model["regret"]["ci_low"],
                                                                 model["regret"]["ci_high"]],
                    "best_share": model["best_share"], "invalid_share": model["invalid_share"]}
    if base_probe is not None:
        row["probe_minus_base"] = _paired(dict(enumerate(base_probe["results"][game]["model"]["regrets"])),
                                          dict(enumerate(model["regrets"])), False, "regret")
    return row


def _interval(x: dict[str, Any], key: str = "mean") -> str:
    return f"{x[key]:.1f} [{x['ci95'][0]:.1f}, {x['ci95'][1]:.1f}]"


def _change(d: dict[str, Any] | None) -> str:
    if not d or not d.get("n"):
        return ""
    return f"{d['difference']:+.2f} [{d['ci95'][0]:+.2f}, {d['ci95'][1]:+.2f}]"


def markdown(result: dict[str, Any]) -> str:
    lines = [f"# Checkpoints re-evaluated: {result['name']}", "", f"Command: `{result['command']}`", ""]
    for game, entry in result["games"].items():
        check, bots = entry["protocol_check"], entry.get("probe_bots", {})
        lines += [f"## {game}", "", entry["protocol"], "",
                  "| policy | score (95% t) | minus base, paired | seeds scored as the base model "
                  "| probe regret | minus base, paired | invalid share |",
                  "|---|---|---|---|---|---|---|"]
        for label, row in entry["policies"].items():
            probe = row.get("probe")
            regret = (f"{probe['mean_regret']:.2f} | {_change(row.get('probe_minus_base'))} | "
                      f"{probe['invalid_share']:.2f}") if probe else "- | - | -"
            lines.append(f"| {label} | {_interval(row['score'])} | {_change(row.get('score_minus_base'))} | "
                         f"{row.get('games_equal_to_base', '')} | {regret} |")
        for bot in ("random", "heuristic", "expert"):
            if bot in check:
                regret = f"{bots[bot]['mean_regret']:.2f}" if bot in bots else ""
                lines.append(f"| {bot} bot | {_interval(check[bot])} | | | {regret} | | |")
        lines += ["", f"Protocol check: {'passed' if check.get('passed') else 'FAILED: not a result'} "
                      f"({check.get('reason', '')})", ""]
        for label, row in entry["policies"].items():
            for key in ("score_minus_base", "probe_minus_base"):
                if row.get(key, {}).get("n"):
                    lines.append(f"- {label}: {row[key]['verdict']}")
        lines.append("")
    lines.append(f"Seconds measuring here: {result['seconds_measured']} "
                 f"(files read again: {result['reused']}).")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", action="append", required=True, metavar="NAME=RUN_DIR")
    parser.add_argument("--steps", required=True, help="comma-separated learner steps of each run")
    parser.add_argument("--name", required=True)
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--no-probe", action="store_true", help="the episode evaluations only")
    parser.add_argument("overrides", nargs="*",
                        help=f"dotted overrides (default {' '.join(DEFAULT_OVERRIDES)})")
    args = parser.parse_args(argv)
    overrides = list(args.overrides or DEFAULT_OVERRIDES)
    runs = {name: Path(path) for name, _, path in (s.partition("=") for s in args.run)}
    steps = [int(s) for s in args.steps.split(",")]
    folder = Path(args.out) / args.name
    folder.mkdir(parents=True, exist_ok=True)
    first = next(iter(runs.values()))
    policies = [("base", first, "base", None)] + [(f"{n}-step{k}", d, f"run:{d}", k)
                                                   for n, d in runs.items() for k in steps]
    evaluations, probes, seconds, reused = {}, {}, 0.0, 0
    for label, run_dir, policy, step in policies:
        # the base model's files record no run (it has no adapters to come from one)
        want = {"player": "base"} if step is None else {"player": f"run-step{step}", "run": str(run_dir)}
        for probe, into in ((False, evaluations), (True, probes))[:1 if args.no_probe else 2]:
            stem = f"{'probe-' if probe else ''}{label}"
            data, took = measure(run_dir, policy, step, overrides, folder, stem, probe, want)
            into[label] = data
            seconds, reused = seconds + (took or 0.0), reused + (took is None)
    base_eval = evaluations["base"]
    result: dict[str, Any] = {"name": args.name, "overrides": overrides,
                              "runs": {n: str(d) for n, d in runs.items()},
                              "steps": steps, "seconds_measured": round(seconds, 1), "reused": reused,
                              "command": "python -m benchmarks.reevaluate " + " ".join(
                                  sys.argv[1:] if argv is None else argv), "games": {}}
    protocols = {json.dumps(e["meta"]["protocol_check"]["protocol"], sort_keys=True)
                 + str(e["meta"]["temperature"]) for e in evaluations.values()}
    probe_sets = {json.dumps(p["meta"]["protocol"]["probe_sha256"], sort_keys=True)
                  + str(p["meta"]["temperature"]) for p in probes.values()}
    if len(protocols) != 1 or len(probe_sets) > 1:
        raise SystemExit("the evaluations (or probes) differ in protocol (seeds, horizon, env options, probe "
                         "set or temperature): their runs' configs disagree, or a file was kept from other "
                         "overrides; compare runs of one protocol")
    base_probe = probes.get("base")
    for game in base_eval["results"]:
        meta = base_eval["meta"]
        positions = (f"probe of {base_probe['results'][game]['model']['n']} positions" if base_probe
                     else "no probe (--no-probe)")
        result["games"][game] = {
            "protocol": (f"{meta['episodes_single']} seeds from {meta['seeds_eval_start']}, horizon "
                         f"{meta['max_steps']} moves, temperature {meta['temperature']:g}; {positions}"),
            "protocol_check": meta["protocol_check"]["games"][game],
            "policies": {label: policy_row(evaluations[label], probes.get(label),
                                           None if label == "base" else base_eval,
                                           None if label == "base" else base_probe, game)
                         for label, *_ in policies}}
        if base_probe:
            result["games"][game]["probe_bots"] = {
                bot: {"mean_regret": base_probe["results"][game][bot]["mean_regret"]}
                for bot in ("random", "expert")}
    out = Path(args.out)
    (out / f"{args.name}.json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    text = markdown(result)
    (out / f"{args.name}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
