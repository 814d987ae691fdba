"""`make demo`: the main job on embedded defaults — a short co-evolution on 2048 with the tiny model on CPU.

Cold-start SFT from the expert bot (with the deterministic seed bank labelling retrieval and bank decisions),
then a few iterations of rollouts through the vLLM CPU engine, skill-bank updates and GRPO on DeepSpeed,
all on a local Ray instance bound to loopback. It leaves a run folder under `runs/` with metrics, TensorBoard
logs, checkpoints, banks, the bank report, a score plot and the run report, and prints where they are.
Extra dotted overrides on the command line change any setting (`python -m coplay.demo loop.iterations=5`).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

DEMO_OVERRIDES = [
    "run.name=demo", "games=[2048]", "rollout.workers=1", "rollout.start_states=2", "rollout.group_size=4",
    "rollout.max_steps=12", "rollout.concurrent_episodes=8", "rollout.retrieve_every=4",
    "sampling.max_tokens={act: 32, retrieve: 8, segment: 24, contract: 128, curator: 16}",
    "engine.max_model_len=2048", "engine.max_num_seqs=16", "engine.enforce_eager=true", "engine.dtype=float32",
    "sft.episodes_per_game=24", "sft.max_steps=60", "sft.max_examples_per_adapter=1024", "sft.epochs=4",
    "sft.min_batches_per_adapter=24", "sft.adapter_min_batches={contract: 150}", "sft.lr=1e-2",
    "sampling.temperature=0.7", "learner.backend=deepspeed", "learner.zero_stage=2", "learner.lr=5e-4",
    "loop.iterations=4", "loop.staleness=1", "loop.eval_every=4", "loop.eval_episodes_single=8",
    "loop.checkpoint_every=2", "skill_bank.group_size=2", "cluster.num_cpus=2",
]


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


def main(argv: list[str] | None = None) -> int:
    from coplay.config import load_config
    from coplay.loop import train
    from coplay.report.html import write_report
    from coplay.skills.report import write_bank_report

    started = time.time()
    cfg = load_config(None, [*DEMO_OVERRIDES, *(argv or [])])
    run_root = Path(train(cfg))
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
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
