"""Which evaluation protocols can tell skill from luck: the ruler's bots (`coplay.eval.ruler`: random, expert
and, on 2048, the fixed-order heuristic "first legal of left, down, right, up") played on the protocols the
evidence configs use, plus 2048 at the short horizons earlier comparisons used, on 32 eval seeds each.

A protocol passes the check when the expert's 95% t-interval lies entirely above the random bot's; one that
fails cannot separate the strongest from the weakest player, so no learner comparison on it is a result.
Each protocol is read from its evidence config (seeds, env_kwargs such as Candy Crush's `max_moves`) with
`eval.episodes` and `eval.max_steps` set per row. Bots only: no model, no Ray; a few seconds.

Writes `--out`/ruler-protocols.json and .md (means, 95% t and bootstrap intervals, pass/fail with the
reason, the expert − random difference paired by seed, seconds, the command and commit) and prints the JSON.

    python -m benchmarks.ruler [--seeds 32] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

# (game, evaluation horizon in decisions, the config it is read from, whether that config evaluates on it)
PROTOCOLS = (("2048", 8, "launch/configs/coevolution-2048.yaml", False),
             ("2048", 12, "launch/configs/coevolution-2048.yaml", False),
             ("2048", 50, "launch/configs/coevolution-2048.yaml", True),
             ("candy_crush", 6, "launch/configs/coevolution-candy_crush.yaml", True),
             ("tetris", 6, "launch/configs/coevolution-tetris.yaml", True),
             ("tetris", 12, "launch/configs/coevolution-tetris.yaml", False))


def measure(game: str, horizon: int, config: str, seeds: int) -> dict[str, Any]:
    """The bots on one protocol and its check."""
    from coplay.config import load_config
    from coplay.eval.ruler import bot_results, protocol_check, protocol_of
    from coplay.eval.stats import paired_difference

    cfg = load_config(config, [f"games=[{game}]", f"eval.episodes={seeds}", f"eval.max_steps={horizon}",
                               "logging.console=false"])
    started = time.perf_counter()
    bots, _ = bot_results(cfg, [game])
    seconds = time.perf_counter() - started
    check = protocol_check(bots)[game]
    spec = protocol_of(cfg, [game])
    diff = paired_difference(bots["random"][game]["per_seed"], bots["expert"][game]["per_seed"])
    return {"game": game, "horizon": horizon, "config": config, "episodes": seeds,
            "seeds": [spec["seeds"][0], spec["seeds"][-1] + 1], "env_kwargs": spec["env_kwargs"][game],
            "passed": check["passed"], "reason": check["reason"],
            "bots": {bot: {k: res[game]["score"][k] for k in ("n", "mean", "ci_low", "ci_high", "boot_low",
                                                               "boot_high", "min", "max")}
                     for bot, res in bots.items()},
            "expert_minus_random_paired": diff.as_dict() if diff is not None else None,
            "seconds": round(seconds, 2)}


def markdown(rows: list[dict[str, Any]], command: str) -> str:
    lines = [f"Command: `{command}`", "",
             "| game | horizon | seeds | random | expert | heuristic | expert − random (paired) | check | "
             "evidence config evaluates on it |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = []
        for bot in ("random", "expert", "heuristic"):
            b = r["bots"].get(bot)
            cells.append(f"{b['mean']:.1f} [{b['ci_low']:.1f}, {b['ci_high']:.1f}]" if b else "-")
        d = r["expert_minus_random_paired"]
        diff = f"{d['difference']:+.1f} [{d['ci_low']:+.1f}, {d['ci_high']:+.1f}]" if d else "-"
        lines.append(f"| {r['game']} | {r['horizon']} | {r['episodes']} | {' | '.join(cells)} | {diff} | "
                     f"{'passed' if r['passed'] else 'FAILED'} | {'yes' if r['evidence'] else 'no'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=32, help="eval seeds per protocol (default 32)")
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args(argv)
    if args.seeds < 2:
        raise SystemExit(f"--seeds {args.seeds}: expected at least 2 (an interval needs two episodes)")
    from benchmarks.learning import _commit

    command = " ".join(["python -m benchmarks.ruler", *(argv if argv is not None else sys.argv[1:])])
    started = time.time()
    rows = [{**measure(game, horizon, config, args.seeds), "evidence": evidence}
            for game, horizon, config, evidence in PROTOCOLS]
    body = {"command": command, "commit": _commit(), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "total_seconds": round(time.time() - started, 1),
            "rule": "passes when the expert bot's 95% t-interval lies entirely above the random bot's",
            "protocols": rows}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "ruler-protocols.json").write_text(json.dumps(body, indent=1, sort_keys=True) + "\n")
    (out / "ruler-protocols.md").write_text(markdown(rows, command))
    print(json.dumps(body, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
