"""A small learning-rate sweep on the per-decision probe: which GRPO learning rate (and epochs) makes a
learner step land in the served policy without wrecking it? Each setting is a real `coplay.loop.train` run
of one config (default the SmolLM2 demo's, with `ablation.variant=grpo_no_bank`: the bank plays no part in
how far a step moves the policy), and the table reads its metrics:

- per learner step, the `act` adapter's served change (`train.served_change`: relative weight change as
  served, share of elements changed, KL(prev ‖ new) on the probe's prompts);
- per iteration, the probe (the model's mean regret with its 95% interval, best and invalid shares) beside
  the random and expert bots on the same positions, and the paired difference of the model's regret at each
  position against the cold start's (iteration 0), t and bootstrap intervals.

Writes `benchmarks/results/<name>.json` and `.md` (command and commit inside); run folders stay under
`run.out_dir`.

    python -m benchmarks.lr_sweep --lrs 2e-5,1e-4,4e-4 --name lr-sweep-2048-smollm2
    python -m benchmarks.lr_sweep --quick     # the tiny model, two settings, a smoke in a few minutes
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.learning import _commit, run_main

CONFIG = "launch/configs/demo-2048-smollm2.yaml"
QUICK_CONFIG = "launch/configs/demo-2048.yaml"
SWEEP = ["ablation.variant=grpo_no_bank", "eval.every=0", "loop.checkpoint_every=100"]
QUICK = ["sft.episodes_per_game=4", "sft.max_steps=10", "loop.iterations=2", "probe.positions=16",
         "logging.console=false"]


def paired(before: list[float], after: list[float]) -> dict[str, Any] | None:
    """After − before over the same positions (`coplay.eval.stats.paired_difference`: 95% t and bootstrap)."""
    from coplay.eval.stats import paired_difference

    d = paired_difference(dict(enumerate(before)), dict(enumerate(after)))
    return d.as_dict() if d is not None else None


def as_bf16_served(run_root: Path, adapter: str, version: int) -> dict[str, float] | None:
    """How a step's exported update (`adapters/<adapter>/v<n-1>` -> `v<n>`, float32) would land on a server
    that casts LoRA weights to bfloat16 (vLLM on a bf16 model): relative change and share of elements
    changed after the cast. None when a version folder is missing."""
    import torch
    from safetensors.torch import load_file

    from coplay.learn.update_size import as_served, weight_change

    paths = [run_root / "adapters" / adapter / f"v{v}" / "adapter_model.safetensors"
             for v in (version - 1, version)]
    if not all(p.is_file() for p in paths):
        return None
    prev, new = (as_served(load_file(str(p)), torch.bfloat16) for p in paths)
    rel, share = weight_change(prev, new)
    return {"rel_change": rel, "changed_share": share}


def read_run(run_root: Path) -> dict[str, Any]:
    """The sweep's figures from one run folder (metrics.jsonl and eval/probe-it*.json)."""
    records = [json.loads(line) for line in (run_root / "metrics.jsonl").read_text().splitlines() if line]
    steps = []
    for r in records:
        train = r.get("train") or r.get("final_train")
        act = (train or {}).get("served_change", {}).get("act")
        if act:
            steps.append({"learner_step": train["learner_step"], **act,
                          "as_bf16_served": as_bf16_served(run_root, "act", int(act["version"]))})
    probes = {}
    for path in sorted((run_root / "eval").glob("probe-it*.json")):
        body = json.loads(path.read_text())
        probes[int(body["meta"]["iteration"])] = body["results"]
    curve = {}
    for iteration, results in sorted(probes.items()):
        curve[iteration] = {}
        for game, entry in results.items():
            row = {"model": {k: entry["model"][k] for k in ("mean_regret", "regret", "best_share",
                                                           "invalid_share")},
                   "expert": entry["expert"]["mean_regret"], "random": entry["random"]["mean_regret"],
                   "bots_separate": entry["bots_separate"]}
            if iteration != 0 and 0 in probes:
                row["paired_vs_cold_start"] = paired(probes[0][game]["model"]["regrets"],
                                                     entry["model"]["regrets"])
            curve[iteration][game] = row
    return {"run": str(run_root), "steps": steps, "probe": curve}


def markdown(body: dict[str, Any]) -> str:
    lines = [f"# {body['name']}", "", f"`{body['command']}` (commit {body['commit']})", "",
             "| setting | learner step | act Δ served (rel) | elements changed | KL(prev‖new) | "
             "served in bf16: Δ (rel) | served in bf16: elements changed |",
             "|---|---|---|---|---|---|---|"]
    for setting, result in body["settings"].items():
        for s in result["steps"]:
            kl = "n/a" if s.get("kl") is None else f"{s['kl']:.2e}"
            bf16 = s.get("as_bf16_served") or {}
            bf16_cells = (f"{bf16['rel_change']:.2e} | {bf16['changed_share']:.1%}" if bf16 else "n/a | n/a")
            lines.append(f"| {setting} | {s['learner_step']} | {s['rel_change']:.2e} | "
                         f"{s['changed_share']:.1%} | {kl} | {bf16_cells} |")
    lines += ["", "| setting | iteration | game | model regret [95% CI] | best share | invalid share | "
              "expert | random | Δ vs cold start, paired [95% CI] |", "|---|---|---|---|---|---|---|---|---|"]
    for setting, result in body["settings"].items():
        for iteration, games in result["probe"].items():
            for game, row in games.items():
                m, r = row["model"], row["model"]["regret"]
                d = row.get("paired_vs_cold_start")
                delta = ("" if d is None else
                         f"{d['difference']:+.2f} [{d['ci_low']:+.2f}, {d['ci_high']:+.2f}]")
                lines.append(f"| {setting} | {iteration} | {game} | {m['mean_regret']:.2f} "
                             f"[{r['ci_low']:.2f}, {r['ci_high']:.2f}] | {m['best_share']:.0%} | "
                             f"{m['invalid_share']:.0%} | {row['expert']:.2f} | {row['random']:.2f} | "
                             f"{delta} |")
    return "\n".join(lines) + "\n"


def write_table(out: Path, body: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{body['name']}.json").write_text(json.dumps(body, indent=2) + "\n")
    (out / f"{body['name']}.md").write_text(markdown(body))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=None)
    parser.add_argument("--lrs", default="2e-5,1e-4,4e-4", help="comma-separated learner.lr values")
    parser.add_argument("--epochs", default="1", help="comma-separated learner.epochs values")
    parser.add_argument("--name", default=None)
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--from-runs", nargs="*", default=None, metavar="LABEL=RUN_DIR",
                        help="rebuild the table from finished run folders instead of training")
    parser.add_argument("overrides", nargs="*", help="dotted overrides for every run")
    args = parser.parse_args(argv)

    from coplay.config import load_config
    from coplay.loop import train

    config = args.config or (QUICK_CONFIG if args.quick else CONFIG)
    name = args.name or ("lr-sweep-quick" if args.quick else "lr-sweep")
    if args.from_runs is not None:
        settings = {}
        for item in args.from_runs:
            label, _, folder = item.rpartition("=")  # labels hold "=" (lr=1e-4 epochs=1), folders do not
            settings[label] = {**read_run(Path(folder)), "from_run": folder}
        write_table(Path(args.out), {"name": name, "command": "python -m benchmarks.lr_sweep "
                                     + " ".join(argv or sys.argv[1:]), "commit": _commit(),
                                     "config": config, "settings": settings})
        return 0
    lrs = [float(x) for x in args.lrs.split(",")][: 2 if args.quick else None]
    settings: dict[str, Any] = {}
    commit = _commit()
    for epochs in [int(x) for x in args.epochs.split(",")]:
        for lr in lrs:
            label = f"lr={lr:g} epochs={epochs}"
            overrides = [*SWEEP, *(QUICK if args.quick else []), *args.overrides, f"learner.lr={lr}",
                         f"learner.epochs={epochs}", f"run.name={name}-lr{lr:g}-e{epochs}"]
            started = time.perf_counter()
            run_root = Path(train(load_config(config, overrides)))
            settings[label] = {**read_run(run_root), "seconds": round(time.perf_counter() - started, 1),
                               "overrides": overrides}
            print(f"{label}: {settings[label]['seconds']} s, {run_root}", file=sys.stderr)
            # after every setting, so a stopped sweep keeps what it measured
            command = "python -m benchmarks.lr_sweep " + " ".join(argv or sys.argv[1:])
            write_table(Path(args.out), {"name": name, "command": command, "commit": commit, "config": config,
                                         "settings": settings})
    print(json.dumps({"name": name, "settings": {k: {"steps": v["steps"]} for k, v in settings.items()}},
                     indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(run_main("python -m benchmarks.lr_sweep", main))
