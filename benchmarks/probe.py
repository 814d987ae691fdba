"""The per-decision probe ranks the bots: per game, build the probe (`coplay.eval.probe`, its default
parameters: 128 positions, half from expert and half from random play on probe seeds 2000000+) and score
the expert bot's and the random bot's choice at every position by regret against the game's lookahead.

Reported per game: build seconds (one process, one core), the parameters and the probe's sha256, each
bot's mean regret with 95% t and bootstrap intervals, best-choice and invalid shares, and whether the two
bots' intervals are disjoint (both kinds). Everything but the seconds is deterministic: a rerun on any
machine gives the same figures. Writes `benchmarks/results/probe-bots.json` (`--out`) and prints it.

Run: ``python -m benchmarks.probe [--games 2048,candy_crush,tetris] [--n 128] [--quick]`` (a few minutes
on 2 CPU cores; `--quick`: 16 positions per game, a smoke run that writes nothing unless `--out` is given).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

COMMAND = "python -m benchmarks.probe"
DEFAULT_GAMES = ("2048", "candy_crush", "tetris")
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "probe-bots.json"


def _commit() -> str | None:
    """HEAD of the checkout the figures came from (None outside a git checkout)."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
                             cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip()


def measure(game: str, n: int, **overrides: Any) -> dict[str, Any]:
    """Build `game`'s probe and score both bots on it."""
    from coplay.eval.probe import (
        PROBE_VERSION,
        bot_actions,
        build_probe,
        intervals_disjoint,
        probe_params,
        score_actions,
    )

    params = probe_params(game, n, **overrides)
    start = time.perf_counter()
    probe = build_probe(game, params=params)
    build_seconds = time.perf_counter() - start
    expert = score_actions(probe, bot_actions(probe, "expert"))
    rand = score_actions(probe, bot_actions(probe, "random"))
    return {"build_seconds": round(build_seconds, 1), "probe_version": PROBE_VERSION,
            "params": params.as_dict(), "sha256": probe.sha256, "positions": len(probe.positions),
            "sources": dict(Counter(p.source for p in probe.positions)),
            "mean_legal_actions": round(sum(len(p.legal_actions) for p in probe.positions)
                                        / len(probe.positions), 2),
            "expert": expert, "random": rand, "separated": intervals_disjoint(expert, rand)}


def run(games: list[str], n: int, command: str = COMMAND, **overrides: Any) -> dict[str, Any]:
    """The whole report: per-game figures, a headline of mean regrets, the command and commit."""
    started = time.time()
    results = {game: measure(game, n, **overrides) for game in games}
    headline: dict[str, float] = {}
    for game, r in results.items():
        headline[f"{game}_expert_regret"] = round(r["expert"]["mean_regret"], 3)
        headline[f"{game}_random_regret"] = round(r["random"]["mean_regret"], 3)
    return {"command": command, "commit": _commit(), "started": time.strftime("%Y-%m-%dT%H:%M:%S",
                                                                            time.localtime(started)),
            "seconds": round(time.time() - started, 1), "python": sys.version.split()[0],
            "platform": platform.platform(), "cpus": os.cpu_count(), "n": n, "headline": headline,
            "all_separated": all(r["separated"] for r in results.values()), "games": results}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    parser.add_argument("--games", default=",".join(DEFAULT_GAMES), help="comma-separated game keys")
    parser.add_argument("--n", type=int, default=128, help="positions per game")
    parser.add_argument("--quick", action="store_true", help="16 positions per game; writes no file")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"results file (default {DEFAULT_OUT.relative_to(DEFAULT_OUT.parents[2])}, "
                             "none with --quick)")
    args = parser.parse_args(argv)
    argv_text = " ".join(sys.argv[1:] if argv is None else argv)
    n = 16 if args.quick else args.n
    report = run([g for g in args.games.split(",") if g], n,
                 command=f"{COMMAND} {argv_text}".strip())
    text = json.dumps(report, indent=2)
    out = args.out or (None if args.quick else DEFAULT_OUT)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")
    print(text)
    return 0 if report["all_separated"] or args.quick else 1


if __name__ == "__main__":
    sys.exit(main())
