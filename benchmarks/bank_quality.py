"""Every bank version of a finished run on one and the same held-out set: is the bank after the run better
than the seed bank it started from?

Why. Each bank update measures its held-out quality on the trajectories it holds out of *its own*
iteration (`skill_bank.heldout_every`: every 4th, so one 6-move episode in the SmolLM2 Candy Crush demo),
so the `quality` a bank version records is measured on a different, and often one-segment, set from the
next version's: a series of those figures cannot say whether the bank improved. This reads the run's
trajectory shards (`shards/*.msgpack`), pools the trajectories every update held out (`held_out_part` per
iteration, as the skill-bank actor split them: no bank version was learned from them), and evaluates every
version of the bank (`banks/<key>/v<n>.json`) on that pool exactly as an update does (`evaluate_bank`:
boundaries proposed from the steps, segmentation, contract pass rate x step coverage - size penalty x
size, and the shuffled-window pass rate, the contracts' chance level). Also each version against the first
(the seed bank), per held-out trajectory: the quality each scores on that trajectory alone, paired.

    python -m benchmarks.bank_quality RUN_DIR [--bank candy_crush] [--out FILE.json]

Reads files only (no Ray, no model); the run's own config gives `skill_bank`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

COMMAND = "python -m benchmarks.bank_quality"


def heldout_pool(run: Path, bank_key: str, every: int) -> list[Any]:
    """The trajectories of `bank_key` that the run's bank updates held out, over all iterations."""
    from coplay.skills.schema import TEACHING_POLICIES, bank_key_for
    from coplay.skills.update import held_out_part
    from coplay.types import read_shard_dir

    shards, errors = read_shard_dir(run / "shards")
    if errors:
        print(f"bank_quality: {len(errors)} unreadable shard(s) skipped: {errors[0]}", file=sys.stderr)
    by_iteration: dict[int, list[Any]] = {}
    for shard in shards:
        for traj in shard.trajectories:
            if traj.policy in TEACHING_POLICIES and bank_key_for(traj.game, traj.seat, traj.role) == bank_key:
                by_iteration.setdefault(shard.iteration, []).append(traj)
    return [t for iteration in sorted(by_iteration) for t in held_out_part(by_iteration[iteration], every)]


def boundaries_for(bank: Any, trajectories: list[Any], cfg: Any) -> dict[str, list[int]]:
    """The boundaries an update of `bank` would propose on `trajectories`."""
    from coplay.skills.boundaries import propose_boundaries

    known = set(bank.skills)
    return {t.episode_id: propose_boundaries(t.steps, cfg.boundaries.radius, cfg.boundaries.threshold,
                                             known).positions for t in trajectories}


def measure(run: Path, bank_key: str) -> dict[str, Any]:
    from coplay.config import load_config
    from coplay.eval.stats import paired_difference
    from coplay.skills.heldout import evaluate_bank
    from coplay.skills.schema import Bank

    cfg = load_config(run / "config.yaml", []).skill_bank
    pool = heldout_pool(run, bank_key, cfg.heldout_every)
    if not pool:
        raise SystemExit(f"bank_quality: no held-out trajectory of bank {bank_key!r} in {run / 'shards'}")
    paths = sorted((run / "banks" / bank_key).glob("v*.json"),
                   key=lambda p: int(p.stem[1:]) if p.stem[1:].isdigit() else -1)
    banks = [Bank.from_bytes(p.read_bytes(), source=str(p)) for p in paths if p.stem[1:].isdigit()]
    versions, per_trajectory = [], {}
    for bank in banks:
        boundaries = boundaries_for(bank, pool, cfg)
        whole = evaluate_bank(bank, pool, boundaries, cfg, shuffle_seed=0)
        per_trajectory[bank.version] = {t.episode_id: evaluate_bank(bank, [t], boundaries, cfg,
                                                                    shuffle_seed=None).quality for t in pool}
        versions.append({"version": bank.version, "iteration": bank.iteration, "size": len(bank.skills),
                         "recorded_quality": (bank.metrics or {}).get("quality"),
                         "quality": round(whole.quality, 6), "pass_rate": round(whole.pass_rate, 6),
                         "shuffled_pass_rate": round(whole.shuffled_pass_rate, 6),
                         "coverage": round(whole.coverage, 6),
                         "segments": len(whole.segments),
                         "labelled": sum(1 for s in whole.segments if s.label in bank.skills)})
    first = banks[0].version
    paired = {}
    for bank in banks[1:]:
        d = paired_difference(per_trajectory[first], per_trajectory[bank.version])
        paired[f"v{bank.version} minus v{first}"] = d.as_dict() if d is not None else None
    return {"benchmark": "bank_quality", "command": f"{COMMAND} {' '.join(sys.argv[1:])}".strip(),
            "run": str(run), "bank": bank_key,
            "heldout": {"trajectories": len(pool), "steps": sum(len(t.steps) for t in pool),
                        "heldout_every": cfg.heldout_every},
            "versions": versions, "paired_per_trajectory": paired,
            "operations": operations(banks)}


def operations(banks: list[Any]) -> list[dict[str, Any]]:
    """Every operation the run's updates judged: version, kind, applied or not, its recorded quality change
    (measured then on that update's own held-out trajectories)."""
    out = []
    for bank in banks:
        for record in bank.operations or []:
            if "quality_before" in record:
                out.append({"version": bank.version, "op": record["op"], "applied": bool(record["applied"]),
                            "verdict": record.get("verdict"), "gated": bool(record.get("gated")),
                            "quality_change": round(record["quality_after"] - record["quality_before"], 6)})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", help="a finished run folder")
    parser.add_argument("--bank", default=None, help="bank key (default: the run's only one)")
    parser.add_argument("--out", default="", help="also write the JSON here")
    args = parser.parse_args(argv)
    run = Path(args.run)
    keys = sorted(p.name for p in (run / "banks").iterdir() if p.is_dir())
    if args.bank is None and len(keys) != 1:
        raise SystemExit(f"bank_quality: the run has banks {keys}; name one with --bank")
    result = measure(run, args.bank or keys[0])
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
