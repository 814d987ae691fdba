"""Env speed for every game: runs each `benchmarks/env_bench/<game>.py`'s `run(repeats)` in this process.

Each game module measures its env (text observation, legal actions, view, state and features every step)
against a baseline in the same run (a reference package or the raw rules engine) and returns JSON with
medians over `repeats`; see each module's docstring for its workload. A module that fails is recorded with
its error and the others still run. `--quick` uses 1 repeat (about 30 s here), the default 5.

Run: ``python -m benchmarks.envs [--quick]``. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import sys
import time
import traceback
from typing import Any

import benchmarks.env_bench as env_bench

COMMAND = "python -m benchmarks.envs"
# Where each module's JSON keeps the env's speed (random play) and its baseline's speed in the same run;
# the headline ratio is ours / baseline (above 1: our env, with all its text, is faster than the baseline).
RATE_KEYS = ("ours_steps_per_s", "env_phases_per_s", "random_swaps.ours_steps_per_s",
             "random_policy.env_placements_per_s")
BASELINE_KEYS = ("reference_steps_per_s", "raw_phases_per_s", "random_swaps.reference_steps_per_s",
                 "random_policy.rules_placements_per_s")


def modules() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(env_bench.__path__) if not m.name.startswith("_"))


def _lookup(result: dict[str, Any], paths: tuple[str, ...]) -> tuple[float, str] | None:
    """The first number found at one of the key paths, and the unit the path names (steps, phases, ...)."""
    for path in paths:
        value: Any = result
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value), path.rsplit(".", 1)[-1].removesuffix("_per_s").split("_", 1)[1]
    return None


def run(quick: bool = False) -> dict[str, Any]:
    repeats = 1 if quick else 5
    games: dict[str, Any] = {}
    headline: dict[str, float] = {}
    for name in modules():
        start = time.perf_counter()
        try:
            result = importlib.import_module(f"benchmarks.env_bench.{name}").run(repeats)
        except Exception as exc:  # one game's failure must not hide the others' figures; it is recorded
            games[name] = {"error": f"{type(exc).__name__}: {exc}",
                           "traceback": traceback.format_exc()[-3000:]}
            continue
        result["seconds"] = round(time.perf_counter() - start, 1)
        games[name] = result
        rate, baseline = _lookup(result, RATE_KEYS), _lookup(result, BASELINE_KEYS)
        if rate is not None:
            headline[f"{name}_{rate[1]}_per_s"] = round(rate[0], 1)
            if baseline is not None and baseline[0] > 0:
                headline[f"{name}_vs_baseline"] = round(rate[0] / baseline[0], 3)
    return {"command": COMMAND + (" --quick" if quick else ""), "quick": quick, "repeats": repeats,
            "headline": headline, "failed": sorted(n for n, r in games.items() if "error" in r),
            "games": games, "python": sys.version.split()[0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 repeat instead of 5")
    report = run(parser.parse_args(argv).quick)
    print(json.dumps(report, indent=2))
    return 1 if report["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
