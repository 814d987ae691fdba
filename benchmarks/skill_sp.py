"""Skill-guided self-play (docs/curriculum.md): does routing the proposer by the bank's skills give more
valid, mid-difficulty tasks than the ablations? Runs chosen arms, each a real `coplay.loop.train` from the
same config with `curriculum.enabled` and the same seeds, and reads every iteration's curriculum summary
(`curriculum/it<k>.json`): the valid-task rate, the share of proposed tasks that were valid with solver
success p in [0.25, 0.75], the proposer's mean reward, rejections by reason, the exploration stream's
induction candidates, and the skills the bank gained by `induce` (curator-approved, from the run's banks).

Where the config evaluates (`eval.every`, `eval.at_start`) and probes, each arm's solver is also measured on
the ruler: its evaluations after the cold start and after the last iteration with the bots on the same
protocol and the protocol check (`benchmarks.coevolution.ruler_evidence`), the last minus the first paired by
seed, the last minus each bot, and its first and last probe (`benchmarks.learning_evidence.probe_evidence`);
every arm after the first is compared with the first on the final evaluation (paired by seed) and the last
probe (paired by position). The proposer's learner steps are read from the metrics log: per step its samples,
updates and how far the served `propose` adapter moved (`served_change`: KL on probe prompts, changed share).

Arms (one config switch each): `guided` (the curriculum as configured), `unguided` (no skill named; the gate
filters only), `uniform` (uniform routing), `no_exploration` (no exploration stream), `frozen_bank`,
`frozen_proposer`, `frozen_solver`.

    python -m benchmarks.skill_sp --arms guided,unguided --config launch/configs/curriculum-2048-smollm2.yaml
    python -m benchmarks.skill_sp --arms guided,unguided --games candy_crush \
        --config launch/configs/curriculum-candy_crush-smollm2.yaml --name skill-sp-candy_crush
    python -m benchmarks.skill_sp --quick       # tiny model, 2 iterations, guided and unguided: a smoke

Writes under `--out` (default benchmarks/results/) `<name>.json`, `<name>.md` (per arm and iteration) and
`<name>.png` (valid rate and mid share over iterations, one line per arm), rewritten after every run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.learning import _commit, run_main

ARMS: dict[str, list[str]] = {
    "guided": [],
    "unguided": ["curriculum.unguided=true"],
    "uniform": ["curriculum.routing=uniform"],
    "no_exploration": ["curriculum.exploration_share=0.0"],
    "frozen_bank": ["curriculum.freeze=[bank]"],
    "frozen_proposer": ["curriculum.freeze=[propose]"],
    "frozen_solver": ["curriculum.freeze=[act]"],
}
DEFAULT_CONFIG = "launch/configs/curriculum-2048-smollm2.yaml"
QUICK_CONFIG = "launch/configs/tiny-2048.yaml"
QUICK = ["curriculum.enabled=true", "sft.enabled=false", "loop.iterations=2", "loop.staleness=0",
         "rollout.start_states=1", "rollout.group_size=2", "rollout.max_steps=3", "curriculum.prompts=2",
         "curriculum.proposals=2", "curriculum.attempts=2", "sampling.max_tokens.propose=64",
         "eval.every=0", "loop.checkpoint_every=2", "logging.console=false", "skill_bank.group_size=2"]
SUMMARY_KEYS = ("proposed", "valid_rate", "mid_share", "mean_proposer_reward", "rejected", "saturated",
                "exploration_kept_count")


def per_iteration(run_root: Path, game: str) -> list[dict[str, Any]]:
    """Each iteration's curriculum summary for `game`, with the number of induction candidates and the
    `induce` operations the bank update over that iteration applied (the metrics log's maintenance)."""
    from coplay.runs import RunDir

    applied: dict[int, dict[str, int]] = {}
    for record in RunDir.open(run_root).read_metrics():
        if "maintenance" in record and "iteration" in record:
            block = record["maintenance"]
            # the update logged at iteration k ran over iteration k-1's data (and its curriculum round)
            applied[int(record["iteration"]) - 1] = {
                "proposed": int(block.get("proposed", {}).get("induce", 0)),
                "applied": int(block.get("applied", {}).get("induce", 0))}
    points = []
    for path in sorted((run_root / "curriculum").glob("it*.json"), key=lambda p: int(p.stem[2:])):
        body = json.loads(path.read_text()).get(game)
        if body is None:
            continue
        k = int(path.stem[2:])
        points.append({"iteration": k, **{key: body.get(key) for key in SUMMARY_KEYS},
                       "induction_candidates": len(body.get("induction_candidates", [])),
                       "induce": applied.get(k, {"proposed": 0, "applied": 0})})
    return points


def induced_skills(run_root: Path, game: str) -> list[dict[str, Any]]:
    """The skills of the run's newest bank that `induce` made (id, name, success, the task they came from)."""
    from coplay.runs import RunDir
    from coplay.skills.schema import bank_key_for, bank_versions, load_bank

    run, key = RunDir.open(run_root), bank_key_for(game)
    if not bank_versions(run, key):
        return []
    bank = load_bank(run, key)
    return [{"id": s.id, "name": s.name, "success": s.success, "contract": s.contract.literals,
             "iteration": s.lineage[0].get("iteration"), "task": s.tasking.examples[:1]}
            for s in bank.skills.values() if s.lineage and s.lineage[0].get("op") == "induce"]


def proposer_steps(run_root: Path) -> list[dict[str, Any]]:
    """Every learner step that trained `propose`, in log order: the metrics line it is logged in (`final`: the
    last iteration's own step), its samples, updates and gradient norm, and how far the served proposer moved
    (`served_change.propose`; absent where the step's change was not measured)."""
    from coplay.runs import RunDir

    steps = []
    for record in RunDir.open(run_root).read_metrics():
        for key in ("train", "final_train"):
            train = record.get(key) or {}
            figures = (train.get("adapters") or {}).get("propose")
            if not figures:
                continue
            served = (train.get("served_change") or {}).get("propose") or {}
            steps.append({"iteration": record.get("iteration"), "final": key == "final_train",
                          "learner_step": train.get("learner_step"), "samples": figures.get("samples"),
                          "updates": figures.get("updates"), "grad_norm": figures.get("grad_norm"),
                          "served_version": served.get("version"), "served_kl": served.get("kl"),
                          "served_changed_share": served.get("changed_share")})
    return steps


def solver_evidence(cfg: Any, run_root: Path, game: str) -> dict[str, Any] | None:
    """The solver on the ruler (module docstring); None when the run evaluated nothing."""
    from benchmarks.coevolution import eval_curve, paired, ruler_evidence
    from benchmarks.learning_evidence import probe_evidence

    curve = eval_curve(run_root, game)
    if not curve:
        return None
    out: dict[str, Any] = {"curve": curve, **ruler_evidence(cfg, game, run_root / "eval"),
                           "probe": probe_evidence(run_root, game)}
    first, last = curve[0], curve[-1]
    out["final_minus_first"] = paired(first, last) if first is not last else None
    out["final_minus_bots"] = {bot: paired(b, last) for bot, b in out["bots"].items()}
    return out


def arm_differences(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per game, every arm after the game's first minus the first: the final evaluation paired by seed and the
    last probe's regret paired by position (None where either is missing)."""
    from benchmarks.coevolution import paired
    from coplay.driver.probe import read_probes, regret_change

    out = []
    for game in dict.fromkeys(r["game"] for r in runs):
        arms = [r for r in runs if r["game"] == game]
        base = arms[0]
        for run in arms[1:]:
            a, b = base.get("ruler"), run.get("ruler")
            probes = [[p for p in read_probes(Path(r["run_dir"])) if game in p.get("results", {})]
                      for r in (base, run)]
            probe = (regret_change(probes[0][-1], probes[1][-1], game) if all(probes) else None)
            out.append({"game": game, "arm": run["arm"], "minus": base["arm"],
                        "final": paired(a["curve"][-1], b["curve"][-1]) if a and b else None,
                        "probe_regret": probe.as_dict() if probe is not None else None})
    return out


def run_arm(config: str, game: str, arm: str, overrides: list[str]) -> dict[str, Any]:
    from coplay.config import load_config
    from coplay.loop import train

    cfg = load_config(config, [f"games=[{game}]", *overrides, *ARMS[arm], f"run.name=skill-sp-{game}-{arm}"])
    if not cfg.curriculum.enabled:
        raise SystemExit(f"{config}: curriculum.enabled is false; this benchmark compares curriculum arms")
    started, commit = time.time(), _commit()  # the code the run starts from (the file's is its writer's)
    root = Path(train(cfg))
    points = per_iteration(root, game)
    return {"arm": arm, "game": game, "config": config, "overrides": ARMS[arm], "run_dir": str(root),
            "commit": commit,
            "seconds": round(time.time() - started, 1), "iterations": points,
            "induced_skills": induced_skills(root, game), "proposer_steps": proposer_steps(root),
            "ruler": solver_evidence(cfg, root, game),
            "sizes": {"model": cfg.model.name, "iterations": cfg.loop.iterations,
                      "prompts": cfg.curriculum.prompts, "proposals": cfg.curriculum.proposals,
                      "attempts": cfg.curriculum.attempts, "reference": cfg.curriculum.reference,
                      "exploration_share": cfg.curriculum.exploration_share,
                      "mix_share": cfg.curriculum.mix_share, "gate_credit": cfg.curriculum.gate_credit,
                      "start_states": cfg.rollout.start_states, "group_size": cfg.rollout.group_size,
                      "max_steps": cfg.rollout.max_steps, "eval_episodes": cfg.eval.episodes,
                      "eval_max_steps": cfg.eval.max_steps or cfg.rollout.max_steps,
                      "eval_temperature": cfg.eval.temperature, "probe_positions": cfg.probe.positions}}


def _diff(d: dict[str, Any] | None) -> str:
    return f"{d['difference']:+.2f} [{d['ci_low']:+.2f}, {d['ci_high']:+.2f}]" if d else "-"


def _score(point: dict[str, Any]) -> str:
    return f"{point['mean']:.1f} [{point['ci_low']:.1f}, {point['ci_high']:.1f}]"


def ruler_lines(runs: list[dict[str, Any]], differences: list[dict[str, Any]]) -> list[str]:
    """The solver on the ruler, the arms against the first arm, and the proposer's learner steps, as Markdown
    lines; [] for runs that evaluated nothing and trained no proposer."""
    lines: list[str] = []
    rows = [r for r in runs if r.get("ruler")]
    if rows:
        lines += ["", "The solver on the ruler (greedy evaluation on the same seeds for every row; paired "
                      "differences with 95% t-intervals; probe: mean regret, lower is better):", "",
                  "| game | arm | first evaluation (iteration) | last evaluation (iteration) "
                  "| last minus first | last minus random | last minus expert | protocol check "
                  "| probe first -> last | probe change |", "|---|---|---|---|---|---|---|---|---|---|"]
        for run in rows:
            r = run["ruler"]
            first, last = r["curve"][0], r["curve"][-1]
            check = r.get("protocol_check") or {}
            probe = r.get("probe") or {}
            probe_cells = (f"{probe['first']['mean']:.2f} -> {probe['last']['mean']:.2f}",
                           _diff(probe.get("paired_last_minus_first"))) if probe else ("-", "-")
            lines.append(f"| {run['game']} | {run['arm']} | {_score(first)} ({first['iteration']}) | "
                         f"{_score(last)} ({last['iteration']}) | {_diff(r['final_minus_first'])} | "
                         f"{_diff(r['final_minus_bots'].get('random'))} | "
                         f"{_diff(r['final_minus_bots'].get('expert'))} | "
                         f"{'passed' if check.get('passed') else 'failed'} | {probe_cells[0]} | "
                         f"{probe_cells[1]} |")
        for run in rows[:1]:
            lines += ["", "Bots on the same protocol: " + "; ".join(
                f"{bot} {_score(b)}" for bot, b in run["ruler"]["bots"].items())]
            probe = run["ruler"].get("probe") or {}
            if probe.get("bots"):
                lines[-1] += "; probe regret " + ", ".join(
                    f"{bot} {b['mean']:.2f}" for bot, b in probe["bots"].items())
    if differences:
        lines += ["", "| game | arm minus arm | final evaluation (paired by seed) | last probe regret "
                      "(paired by position) |", "|---|---|---|---|"]
        lines += [f"| {d['game']} | {d['arm']} - {d['minus']} | {_diff(d['final'])} | "
                  f"{_diff(d['probe_regret'])} |" for d in differences]
    steps = [(run, step) for run in runs for step in run.get("proposer_steps", [])]
    if steps:
        lines += ["", "The proposer's learner steps (`served KL`: how far the served `propose` adapter "
                      "moved, on the update measure's prompts):", "",
                  "| game | arm | logged at iteration | learner step | samples | updates | grad norm "
                  "| served KL | served changed share |", "|---|---|---|---|---|---|---|---|---|"]
        for run, st in steps:
            kl, share = st.get("served_kl"), st.get("served_changed_share")
            where = f"{st['iteration']}{' (final)' if st['final'] else ''}"
            lines.append(f"| {run['game']} | {run['arm']} | {where} | {st['learner_step']} | "
                         f"{st['samples']:.0f} | {st['updates']:.0f} | "
                         f"{st['grad_norm']:.3f} | {'-' if kl is None else f'{kl:.2e}'} | "
                         f"{'-' if share is None else f'{share:.2f}'} |")
    return lines


def markdown(runs: list[dict[str, Any]], command: str,
             differences: list[dict[str, Any]] | None = None) -> str:
    lines = [f"Command: `{command}`", "",
             "| game | arm | iteration | proposed | valid rate | mid share | proposer reward | rejected "
             "| induction candidates | induced (applied) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for run in runs:
        for p in run["iterations"]:
            rejected = ", ".join(f"{k} {v}" for k, v in sorted((p["rejected"] or {}).items())) or "-"
            lines.append(f"| {run['game']} | {run['arm']} | {p['iteration']} | {p['proposed']} | "
                         f"{p['valid_rate']:.2f} | {p['mid_share']:.2f} | {p['mean_proposer_reward']:.3f} | "
                         f"{rejected} | {p['induction_candidates']} | {p['induce']['applied']} |")
    lines += ruler_lines(runs, differences or [])
    return "\n".join(lines) + "\n"


def plot(path: Path, runs: list[dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, key, label in ((axes[0], "valid_rate", "valid-task rate"),
                           (axes[1], "mid_share", "share of tasks valid with p in [0.25, 0.75]")):
        for i, run in enumerate(runs):
            xs = [p["iteration"] for p in run["iterations"]]
            ax.plot(xs, [p[key] for p in run["iterations"]], marker="o", color=f"C{i}",
                    label=f"{run['game']} {run['arm']}")
        ax.set_xlabel("iteration")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel(label)
        ax.set_ylim(-0.05, 1.05)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_results(out: Path, stem: str, command: str, started: float, runs: list[dict[str, Any]],
                  planned: int) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    summary = {"command": command, "commit": _commit(), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
               "total_seconds": round(time.time() - started, 1), "complete": len(runs) == planned,
               "runs": runs, "arm_differences": arm_differences(runs)}
    (out / f"{stem}.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    (out / f"{stem}.md").write_text(markdown(runs, command, summary["arm_differences"]))
    plot(out / f"{stem}.png", runs)
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arms", default="guided,unguided", help=f"comma-separated, of {list(ARMS)}")
    parser.add_argument("--games", default="2048", help="single-player games (default 2048)")
    parser.add_argument("--config", default=None, help=f"default {DEFAULT_CONFIG} (--quick: {QUICK_CONFIG})")
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--name", default=None, help="file stem (default skill-sp, or skill-sp-quick)")
    parser.add_argument("--quick", action="store_true", help="smoke: tiny model, 2 iterations")
    parser.add_argument("overrides", nargs="*", help="dotted config overrides for every run")
    args = parser.parse_args(argv)
    import coplay_envs

    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    games = [g.strip() for g in args.games.split(",") if g.strip()]
    unknown = [a for a in arms if a not in ARMS]
    if unknown or not arms:
        raise SystemExit(f"--arms {args.arms!r}: expected a comma-separated list of {list(ARMS)}")
    multi = [g for g in games if coplay_envs.spec(g).api != "gymnasium"]
    if multi or not games:
        raise SystemExit(f"--games {args.games!r}: tasks are written on single-player games only ({multi})")
    config = args.config or (QUICK_CONFIG if args.quick else DEFAULT_CONFIG)
    overrides = [*(QUICK if args.quick else []), *args.overrides]
    command = " ".join(["python -m benchmarks.skill_sp", *(argv if argv is not None else sys.argv[1:])])
    out, stem = Path(args.out), args.name or ("skill-sp-quick" if args.quick else "skill-sp")
    started, runs = time.time(), []
    for game in games:
        for arm in arms:
            runs.append(run_arm(config, game, arm, overrides))
            print(json.dumps({k: runs[-1][k] for k in ("game", "arm", "seconds")}), flush=True)
            write_results(out, stem, command, started, runs, len(games) * len(arms))
    print(markdown(runs, command, arm_differences(runs)))
    return 0


if __name__ == "__main__":
    sys.exit(run_main("python -m benchmarks.skill_sp", main))
