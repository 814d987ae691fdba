"""`coplay eval --probe`: a player's one decision at each position of the per-decision probe
(`coplay.eval.probe`), outside a run, and `coplay eval --compare` of two such files paired by position.

Why: a run probes its policy only when `probe.every` says, at the evaluation's temperature of that run. To
ask afterwards how a checkpoint (or the base model) decides, at another temperature (0: its greedy choice,
with no sampling noise between two checkpoints), or after the run's last learner step, one plays the same
positions here, in this process, with the engine serving the player's adapters (`coplay.eval.players`).
The file has the run's probe-file format (`eval/probe-it<k>.json`: `meta` and per-game `results` with
the per-position regrets and the bots' figures), so `coplay.driver.probe.regret_change` pairs any two.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from coplay.config import CoplayConfig
from coplay.driver.probe import PROBE_KIND, RunProbe, regret_change
from coplay.eval.action_spread import collapse_warning
from coplay.eval.compare import load_results
from coplay.eval.players import make_player
from coplay.eval.policies import Policy, check_step, unused_stem
from coplay.eval.runner import open_engine, play_plans
from coplay.eval.stats import gain_verdict
from coplay.files import write_json_atomic
from coplay.runs import RunDir

log = logging.getLogger(__name__)


def run_probe_evaluation(cfg: CoplayConfig, policy: Policy, out: Path | None = None,
                         name: str | None = None) -> Path:
    """Play `policy` once at every probe position of the config's games that have a probe, at
    `eval.temperature`; write `<name>.json` under `out` (default the run's `eval/`, else
    `<run.out_dir>/eval`; never overwritten) and return its path."""
    run = RunDir.open(policy.run_dir) if policy.run_dir is not None else None
    if run is not None:
        check_step(run.root, policy.step)
    probes = RunProbe.load(cfg)
    if not probes.probes:
        raise ValueError(f"games {list(cfg.games)}: none has a probe (2048, candy_crush, tetris do)")
    player = make_player("model" if policy.kind == "run" else policy.kind, cfg, run, policy.step)
    label = f"run-step{player.detail['learner_step']}" if policy.kind == "run" else policy.kind
    plans = probes.seat_plans(cfg, player.seat, f"probe-{label}")
    started = time.perf_counter()
    engine = open_engine(cfg, player.adapters) if player.needs_engine else None
    try:
        played = play_plans(cfg, plans, engine, player.banks, f"probe {policy.spec}")
    finally:
        if engine is not None:
            engine.close()
    scored = probes.score(played, f"probe-{label}")
    out = out or (run.eval if run else Path(cfg.run.out_dir) / "eval")
    stem = name or f"probe-{label}_{'-'.join(probes.probes)}-n{cfg.probe.positions}-t{cfg.eval.temperature:g}"
    path = out / f"{unused_stem(out, stem)}.json"
    for game, entry in scored.items():  # as a run's probe warns (coplay.driver.probe.flag_collapses)
        spread = entry["action_spread"]
        spread["warning"] = collapse_warning(game, 0, spread, who=policy.spec, file=str(path))
        if spread["warning"]:
            log.warning("coplay: %s", spread["warning"])
    meta = {"player": label, "policy": policy.spec, "temperature": cfg.eval.temperature, "max_steps": 1,
            "protocol": probes.protocol(), "seconds": round(time.perf_counter() - started, 1),
            "run": str(run.root) if run else None, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            **player.detail}
    write_json_atomic(path, {"meta": meta, "results": scored})
    return path


def probe_table(path: Path) -> str:
    """The file's figures per game as a short markdown table: the player beside the bots."""
    data = load_results(path)
    lines = [f"# Probe: {data['meta']['policy']} at temperature {data['meta']['temperature']:g}", "",
             "| game | positions | player regret | best share | invalid share | random bot | expert bot |",
             "|---|---|---|---|---|---|---|"]
    for game, entry in data["results"].items():
        m = entry["model"]
        r = m["regret"]
        lines.append(f"| {game} | {m['n']} | {m['mean_regret']:.2f} [{r['ci_low']:.2f}, "
                     f"{r['ci_high']:.2f}] | "
                     f"{m['best_share']:.2f} | {m['invalid_share']:.2f} | "
                     f"{entry['random']['mean_regret']:.2f} | {entry['expert']['mean_regret']:.2f} |")
    return "\n".join(lines) + "\n"


def is_probe_file(data: dict[str, Any]) -> bool:
    """A probe file (a run's `probe-it<k>.json` or this module's), not an episode evaluation."""
    return data.get("meta", {}).get("protocol", {}).get("kind") == PROBE_KIND


def compare_probe_files(path_a: Path, path_b: Path, out: str | Path | None = None) -> str:
    """B's regret minus A's per game, paired over the positions both files scored (lower is better); a
    game whose probe sets differ (sha256) is refused, since its positions would not be the same. `out`:
    also write the rows (per game the paired difference, or why there is none) as JSON."""
    a, b = load_results(path_a), load_results(path_b)
    shas = (a["meta"]["protocol"].get("probe_sha256", {}), b["meta"]["protocol"].get("probe_sha256", {}))
    lines = [f"probe regret, B - A paired by position (A = {path_a}, B = {path_b}; lower is better)"]
    rows: list[dict[str, Any]] = []
    for game in sorted(set(a["results"]) & set(b["results"])):
        if shas[0].get(game) != shas[1].get(game):
            lines.append(f"  {game}: not compared, the two files probed different position sets")
            rows.append({"game": game, "compared": False, "why": "different probe sets"})
            continue
        d = regret_change(a, b, game)
        lines.append(f"  {game}: " + ("fewer than 2 shared positions" if d is None else
                                     gain_verdict(d, higher_is_better=False, what="regret")))
        rows.append({"game": game, "compared": False, "why": "fewer than 2 shared positions"} if d is None
                    else {"game": game, "compared": True, "figure": "probe regret, paired by position",
                          **asdict(d)})
    if out is not None:
        write_json_atomic(Path(out), {"a": str(path_a), "b": str(path_b), "meta_a": a["meta"],
                                      "meta_b": b["meta"], "rows": rows})
    return "\n".join(lines) + "\n"
