"""`make demo` (`coplay demo`): the main job on embedded defaults — a short co-evolution on Candy Crush with a
real pretrained instruct model, SmolLM2-135M-Instruct from the model catalogue, on CPU, configured by
`launch/configs/demo-candy_crush-smollm2.yaml`; `coplay demo --config launch/configs/demo-2048.yaml` is the
same kind of run on 2048 with the random-weight tiny model (what the tests start from).

Cold-start SFT from the expert bot (with the deterministic seed bank labelling retrieval and bank decisions),
then a few iterations of rollouts through the vLLM CPU engine, skill-bank updates and GRPO on DeepSpeed,
all on a local Ray instance bound to loopback. It leaves a run folder under `runs/` with metrics, TensorBoard
logs, checkpoints, banks, the bank report, a score plot and the run report, and prints where they are, then
its rulers: the cold start's and the final policy's evaluation beside the bots on the same protocol (whose
check must pass for a claim) and their probe. Extra dotted overrides on the command line change any setting
(`coplay demo loop.iterations=5`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

DEMO_CONFIG = Path(__file__).resolve().parents[2] / "launch" / "configs" / "demo-candy_crush-smollm2.yaml"


def score_figure(run_root: Path) -> Any:
    """The run report's score chart as one matplotlib figure, a panel per game: the training rollouts' mean
    score per iteration (circles, 95% t band), the evaluations on seeds.eval (squares) and the bots on the
    same protocol (dashed lines), on whole-number iteration ticks, under a title that says which is which."""
    from matplotlib.figure import Figure

    from coplay.report.charts import draw_lines
    from coplay.report.data import eval_overlays, games_of, load_run, score_series

    data = load_run(run_root)
    games = games_of(data.iterations, data.evals)
    iterations = [r["iteration"] for r in data.iterations]
    xlim = (min(iterations) - 0.2, max(iterations) + 0.2) if iterations else None
    fig = Figure(figsize=(7.5, 3.4 * max(1, len(games))), dpi=100)
    for row, game in enumerate(games, start=1):
        evaluations, bots = eval_overlays(data.evals, game)
        train = score_series(data.iterations, game)
        draw_lines(fig.add_subplot(len(games), 1, row), f"{game}: score per iteration", "iteration",
                   "score (mean, 95% CI)", ([train] if train else []) + evaluations, bots, xlim=xlim)
    fig.suptitle("training rollouts (circles), evaluations on seeds.eval (squares), bots on the same "
                 "protocol (dashed)", fontsize=9)
    fig.tight_layout()
    return fig


def score_plot(run_root: Path) -> Path:
    """`score.png`: `score_figure` as a picture in the run folder."""
    out = run_root / "score.png"
    score_figure(run_root).savefig(out)
    return out


def bots_beside_run(run_root: Path, cfg: Any) -> list[str]:
    """The closing table: the run's first (the cold start's, where `eval.at_start`) and last evaluations
    (`eval/it<k>.json`) next to the random and expert bots (2048: also the fixed-order heuristic) played on
    the same protocol (`eval` section: seeds, episodes, horizon) by the ruler (`coplay.eval.ruler`: read
    from the run's `eval/bots-<bot>.json` where the loop wrote them, else played here and written there),
    the paired difference of the last to each bot, and one closing line per game: the difference to the
    expert bot where the protocol check passed, else that it failed and the table is not a result; then the
    last minus the first. [] when the run made no evaluation."""
    from coplay.eval.ruler import FAILED_LABEL, bot_results, protocol_check, vs_bots

    runs = sorted((run_root / "eval").glob("it*.json"))
    if not runs:
        return []
    evaluations = [json.loads(p.read_text()) for p in sorted({runs[0], runs[-1]})]
    last = evaluations[-1]
    bots, _ = bot_results(cfg, list(last["results"]), out_dir=run_root / "eval")
    checks, paired = protocol_check(bots), vs_bots(last["results"], bots)
    rows = [*((f"the run's adapters (iteration {e['meta'].get('iteration', '?')})", e["results"])
              for e in evaluations),
            *((f"{bot} bot", results) for bot, results in bots.items())]
    steps = cfg.eval.max_steps or cfg.rollout.max_steps
    lines = []
    for game in cfg.games:
        n = last["results"].get(game, {}).get("episodes", 0)
        lines.append(f"evaluation on {game}: {n} episodes on seeds.eval, {steps} moves, mean score [95% CI]")
        for name, results in rows:
            score = results.get(game, {}).get("score")
            if score:
                interval = f"[{score['ci_low']:.1f}, {score['ci_high']:.1f}]"
                diff = (paired.get(game, {}).get(name.removesuffix(" bot")) if name.endswith(" bot")
                        else None)
                vs = (f"   run − {name}: {diff['difference']:+.1f} [{diff['ci_low']:.1f}, "
                      f"{diff['ci_high']:.1f}] paired over {diff['n']} seeds" if diff else "")
                lines.append(f"  {name:<40} {score['mean']:9.1f}  {interval}{vs}")
        check = checks.get(game)
        if check is None:
            lines.append(f"  {game}: no protocol check (multi-seat game, or eval.ruler=false)")
        elif not check["passed"]:
            lines.append(f"  {game}: {FAILED_LABEL} ({check['reason']})")
        else:
            d = paired.get(game, {}).get("expert")
            verdict = ("no shared seeds with the expert bot" if d is None else
                       f"the run's adapters minus the expert bot: {d['difference']:+.1f} "
                       f"[{d['ci_low']:.1f}, {d['ci_high']:.1f}] (paired over {d['n']} seeds, 95% t)")
            lines.append(f"  {game}: protocol check passed ({check['reason']}); {verdict}")
        lines += _change_lines(game, runs, check)
    return lines


def _change_lines(game: str, runs: list[Path], check: dict[str, Any] | None) -> list[str]:
    """The last evaluation minus the first (the cold start where `eval.at_start`), paired over their shared
    seeds, with the verdict in plain words; only on a protocol whose check passed (else no claim)."""
    from coplay.eval.stats import gain_verdict, paired_difference

    if len(runs) < 2:
        return []
    first, last = (json.loads(p.read_text()) for p in (runs[0], runs[-1]))
    its = [f.get("meta", {}).get("iteration", "?") for f in (first, last)]
    if check is None or not check["passed"]:
        return [f"  {game}: iteration {its[1]} against iteration {its[0]}: no claim, the protocol check "
                f"did not pass"]
    d = paired_difference(*(f["results"].get(game, {}).get("per_seed", {}) for f in (first, last)))
    if d is None:
        return [f"  {game}: iteration {its[1]} against iteration {its[0]}: fewer than 2 shared seeds"]
    return [f"  {game}: iteration {its[1]} minus iteration {its[0]} (paired, 95% t): "
            f"{gain_verdict(d, what='score')}"]


def probe_lines(run_root: Path) -> list[str]:
    """The per-decision probe's closing lines (`eval/probe-it<k>.json`): per game the first and the last
    probed policy's mean regret next to the random and expert bots' on the same positions, how each one's
    choices spread over the actions beside the expert's, and the last minus the first, paired over the
    positions (95% t). [] when the run probed nothing."""
    from coplay.driver.probe import read_probes, regret_change
    from coplay.eval.action_spread import spread_text
    from coplay.eval.stats import gain_verdict

    points = read_probes(run_root)
    if not points:
        return []
    first, last = points[0], points[-1]
    once = len(points) == 1
    lines = []
    for game, entry in last["results"].items():
        n = entry["model"]["n"]
        lines.append(f"probe on {game}: {n} fixed positions, one decision each, mean regret against the "
                     f"game's lookahead [95% CI] (lower is better)")
        rows = [(f"the run's adapters (iteration {first['meta']['iteration']})",
                 first["results"][game]["model"]),
                (f"the run's adapters (iteration {last['meta']['iteration']})", entry["model"]),
                ("random bot", entry["random"]), ("expert bot", entry["expert"])]
        for name, score in rows[1:] if once else rows:
            r = score["regret"]
            lines.append(f"  {name:<40} {score['mean_regret']:9.2f}  [{r['ci_low']:.2f}, {r['ci_high']:.2f}]"
                         f"  best {score['best_share']:.0%}  invalid {score['invalid_share']:.0%}")
        for point in (last,) if once else (first, last):  # files before it have none
            spread = point["results"].get(game, {}).get("action_spread")
            if spread:
                lines.append(f"  actions at iteration {point['meta']['iteration']}: {spread_text(spread)}")
        if not entry["bots_separate"]:
            lines.append(f"  {game}: the bots' regret intervals overlap on this probe: not a result")
        elif not once:
            d = regret_change(first, last, game)
            if d is not None:
                lines.append(f"  {game}: iteration {last['meta']['iteration']} minus iteration "
                             f"{first['meta']['iteration']}: {d.difference:+.2f} [{d.ci_low:.2f}, "
                             f"{d.ci_high:.2f}] regret, paired over {d.n} positions (95% t); "
                             f"{gain_verdict(d, higher_is_better=False, what='regret')}")
    return lines


def run_demo(overrides: list[str] | None = None, config: str | Path | None = None) -> Path:
    """The demo run (`config`, default `DEMO_CONFIG`, plus dotted overrides), then its bank report, score
    plot and run report; prints where everything is and returns the run folder."""
    from coplay.config import load_config
    from coplay.driver.progress import phase
    from coplay.loop import train
    from coplay.models.loading import resolve_model_path
    from coplay.report.bank import write_bank_report
    from coplay.report.html import write_report

    config = Path(config) if config else DEMO_CONFIG
    if not config.is_file():
        raise FileNotFoundError(f"{config}: the demo runs from a coplay checkout "
                                f"(git clone, then make demo)")
    started = time.time()
    cfg = load_config(config, overrides)
    # built once into the model cache (a catalogue model: about a minute the first time, seconds later), here
    # in its own phase rather than inside the first Ray actor that loads it
    with phase(f"model: {cfg.model.name}"):
        resolve_model_path(cfg.model)
    run_root = Path(train(cfg))
    bank_report = write_bank_report(run_root)
    against_bots = bots_beside_run(run_root, cfg)  # before the plot and the report, which show the bots
    plot = score_plot(run_root)
    report = write_report(run_root)
    print(f"run folder:   {run_root}")
    print(f"  metrics:    {run_root / 'metrics.jsonl'}  (TensorBoard: {run_root / 'tb'})")
    print(f"  checkpoints: {run_root / 'checkpoints'}")
    print(f"  banks:      {run_root / 'banks'}  (report: {bank_report})")
    print(f"  score plot: {plot}")
    print(f"  report:     {report}")
    if not against_bots:
        print("episode evaluation: none in this run (eval.every=0, eval.at_start=false); the probe below "
              "is its ruler" if cfg.probe.every else "episode evaluation and probe: none in this run")
    for line in [*against_bots, *probe_lines(run_root)]:
        print(line)
    print(f"demo finished in {time.time() - started:.0f} s")
    return run_root
