"""The README's everyday commands, timed in a checkout whose `.venv` `make` installed (a fresh clone after
`make demo`: `python -m benchmarks.console_transcript --fresh-clone --clone-into DIR`), each run once as the
README writes it, in order, on the run folders they make or the demo made:

    python -m benchmarks.command_times --checkout DIR [--demo-run DIR/runs/demo-smollm2-...] [--skip bench]

`RUN_DIR` is the tiny run that the README's `coplay train` line makes (its `--resume`, `eval` and
`eval --compare` lines use it) and, for `play --policy run:`, `report` and the `bank` commands, the
demo's SmolLM2 run (the newest `runs/demo-smollm2-*` unless `--demo-run`). Reported per command: the
command as run, its wall seconds, exit code, output line count, longest silence and last output lines;
the JSON (with the commit and the machine) goes to `--out` and standard output. Standard library only.
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

from benchmarks.console_transcript import longest_silence, run_and_record

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "command-times.json"
# (key, README line with RUN_DIR / DEMO_RUN / EVAL_A / EVAL_B placeholders; [what is run of an option])
COMMANDS = (
    ("config", "coplay config show learner.lr=2e-5"),
    ("play-bot", "coplay play --game tetris --policy expert --episodes 8 --render"),
    ("train", "coplay train --config launch/configs/tiny-2048.yaml loop.iterations=4"),
    ("resume", "coplay train --resume RUN_DIR [loop.iterations=6]"),
    ("eval", "coplay eval RUN_DIR"),
    ("compare", "coplay eval --compare EVAL_A EVAL_B"),
    ("play-run", "coplay play --game 2048 --policy run:DEMO_RUN --episodes 1 --render"),
    ("report", "coplay report DEMO_RUN"),
    ("bank-show", "coplay bank show DEMO_RUN"),
    ("bank-report", "coplay bank report DEMO_RUN"),
    ("bench", "coplay bench --quick"),
)


def newest(folder: Path, pattern: str) -> Path | None:
    """The newest entry of `folder` matching `pattern` (by modification time), or None."""
    found = sorted(folder.glob(pattern), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def eval_pair(run: Path) -> tuple[Path, Path] | None:
    """Two evaluation files of a run to compare: its random bot's and its own newest (`coplay eval`)."""
    bots = run / "eval" / "bots-random.json"
    own = [p for p in (run / "eval").glob("*.json") if not p.name.startswith(("bots-", "probe-"))]
    if not bots.exists() or not own:
        return None
    return bots, sorted(own, key=lambda p: p.stat().st_mtime)[-1]


def fill(line: str, places: dict[str, Path]) -> str | None:
    """The command with its placeholders filled in; None when one has no value (its maker failed)."""
    line = line.replace("[", "").replace("]", "")
    for key, value in places.items():
        line = line.replace(key, str(value))
    return None if any(key in line for key in ("RUN_DIR", "DEMO_RUN", "EVAL_A", "EVAL_B")) else line


def time_command(checkout: Path, line: str) -> dict[str, Any]:
    """Run one command in the checkout and what a reader of the README wants of it."""
    lines, arrivals, code, wall = run_and_record(line.split(), checkout)
    return {"command": line, "seconds": round(wall, 1), "exit_code": code, "lines": len(lines),
            "longest_silence_s": longest_silence(lines, arrivals, wall)["seconds"],
            "tail": [text for _, text in lines[-4:]]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", required=True, help="a clone with the .venv that `make` installed")
    parser.add_argument("--demo-run", help="the demo's run folder (default: the newest runs/demo-smollm2-*)")
    parser.add_argument("--skip", default="", help="comma-separated keys to leave out, e.g. bench")
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args(argv)
    checkout = Path(args.checkout).resolve()
    # `coplay` as `make` installed it, as the README's reader runs it after `source .venv/bin/activate`
    os.environ["PATH"] = f"{checkout / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}"
    runs = checkout / "runs"
    demo = Path(args.demo_run).resolve() if args.demo_run else newest(runs, "demo-smollm2-*")
    places: dict[str, Path] = {} if demo is None else {"DEMO_RUN": demo}
    skip = {k for k in args.skip.split(",") if k}
    results: dict[str, Any] = {}
    for key, template in COMMANDS:
        if key in skip:
            continue
        line = fill(template, places)
        if line is None:
            results[key] = {"command": template, "skipped": "the run folder it needs was not made"}
        else:
            print(f"[command_times] {line}", file=sys.stderr, flush=True)
            results[key] = time_command(checkout, line)
        if key == "train" and (tiny := newest(runs, "tiny-2048-*")) is not None:
            places["RUN_DIR"] = tiny
        if key == "eval" and "RUN_DIR" in places and (pair := eval_pair(places["RUN_DIR"])) is not None:
            places["EVAL_A"], places["EVAL_B"] = pair
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=checkout, capture_output=True,
                            text=True, check=False).stdout.strip()
    out = {"benchmark": "command_times", "command": "python -m benchmarks.command_times " + " ".join(
               argv if argv is not None else sys.argv[1:]),
           "commit": commit, "machine": {"cpus": os.cpu_count(), "machine": platform.machine(),
                                         "python": platform.python_version()},
           "date": time.strftime("%Y-%m-%d"), "results": results}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))
    return 0 if all(r.get("exit_code", 0) == 0 for r in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
