"""`make demo` (`coplay demo`): the main job on embedded defaults — a short co-evolution on 2048 with the tiny
model on CPU, configured by `launch/configs/demo-2048.yaml`.

Cold-start SFT from the expert bot (with the deterministic seed bank labelling retrieval and bank decisions),
then a few iterations of rollouts through the vLLM CPU engine, skill-bank updates and GRPO on DeepSpeed,
all on a local Ray instance bound to loopback. It leaves a run folder under `runs/` with metrics, TensorBoard
logs, checkpoints, banks, the bank report, a score plot and the run report, and prints where they are.
Extra dotted overrides on the command line change any setting (`coplay demo loop.iterations=5`).
"""

from __future__ import annotations

import time
from pathlib import Path

DEMO_CONFIG = Path(__file__).resolve().parents[2] / "launch" / "configs" / "demo-2048.yaml"


def score_plot(run_root: Path) -> Path:
    """`score.png`: mean score per game per iteration with the 95% t-interval as a band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from coplay.runs import RunDir

    records = [r for r in RunDir.open(run_root).read_metrics() if r.get("scores")]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for game in sorted({g for r in records for g in r["scores"]}):
        rows = [(r["iteration"], r["scores"][game]) for r in records if game in r["scores"]]
        xs = [i for i, _ in rows]
        ax.plot(xs, [s["mean"] for _, s in rows], marker="o", label=game)
        ax.fill_between(xs, [s["ci_low"] for _, s in rows], [s["ci_high"] for _, s in rows], alpha=0.2)
    ax.set_xlabel("iteration")
    ax.set_ylabel("score (mean, 95% CI)")
    ax.legend()
    fig.tight_layout()
    out = run_root / "score.png"
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def run_demo(overrides: list[str] | None = None, config: str | Path | None = None) -> Path:
    """The demo run (`config`, default `DEMO_CONFIG`, plus dotted overrides), then its bank report, score
    plot and run report; prints where everything is and returns the run folder."""
    from coplay.config import load_config
    from coplay.loop import train
    from coplay.report.bank import write_bank_report
    from coplay.report.html import write_report

    config = Path(config) if config else DEMO_CONFIG
    if not config.is_file():
        raise FileNotFoundError(f"{config}: the demo runs from a coplay checkout "
                                f"(git clone, then make demo)")
    started = time.time()
    run_root = Path(train(load_config(config, overrides)))
    bank_report = write_bank_report(run_root)
    plot = score_plot(run_root)
    report = write_report(run_root)
    print(f"run folder:   {run_root}")
    print(f"  metrics:    {run_root / 'metrics.jsonl'}  (TensorBoard: {run_root / 'tb'})")
    print(f"  checkpoints:{run_root / 'checkpoints'}")
    print(f"  banks:      {run_root / 'banks'}  (report: {bank_report})")
    print(f"  score plot: {plot}")
    print(f"  report:     {report}")
    print(f"demo finished in {time.time() - started:.0f} s")
    return run_root
