"""Where each iteration's metrics go: `metrics.jsonl` (always), TensorBoard under `tb/`, W&B when
configured, and one rich console line per iteration (DESIGN.md §7)."""

from __future__ import annotations

import math
from typing import Any

from coplay.config import LoggingConfig
from coplay.runs import RunDir


def _flat(prefix: str, value: Any, out: dict[str, float]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flat(f"{prefix}/{k}" if prefix else str(k), v, out)
    elif isinstance(value, bool | int | float) and math.isfinite(float(value)):
        out[prefix] = float(value)


def _finite(value: Any) -> Any:
    """JSON has no NaN: non-finite numbers become None (and are counted in `nonfinite`)."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class MetricsLog:
    """One record per iteration to every configured sink."""

    def __init__(self, run: RunDir, cfg: LoggingConfig, run_config: dict[str, Any]) -> None:
        self.run, self.cfg = run, cfg
        self.tb = None
        if cfg.tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(log_dir=str(run.tb))
        self.wandb = None
        if cfg.wandb_project:
            import wandb

            self.wandb = wandb.init(project=cfg.wandb_project, name=run.root.name, config=run_config,
                                    dir=str(run.root))
        self.console = None
        if cfg.console:
            from rich.console import Console

            self.console = Console(stderr=True)

    def log(self, iteration: int, record: dict[str, Any]) -> None:
        record = _finite({"iteration": iteration, **record})
        self.run.append_metrics(record)
        flat: dict[str, float] = {}
        _flat("", record, flat)
        if self.tb is not None:
            for key, value in flat.items():
                self.tb.add_scalar(key, value, iteration)
            self.tb.flush()
        if self.wandb is not None:
            self.wandb.log(flat, step=iteration)
        if self.console is not None:
            self.console.print(console_line(iteration, record))

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.finish()


def console_line(iteration: int, record: dict[str, Any]) -> str:
    """One console line per record: an iteration's rollout summary, or what the run's closing records say
    (the last GRPO step after the final rollouts; the newest versions) instead of an empty rollout line."""
    if "final_train" in record:
        train = record["final_train"]
        return (f"[bold]final GRPO step[/] learner_step={train.get('learner_step')} "
                f"published={train.get('published', {})}")
    if "final_versions" in record:
        return (f"[bold]final[/] versions={record['final_versions']} "
                f"banks={record.get('final_bank_versions', {})}")
    scores = " ".join(f"{g}={s['mean']:.1f}" for g, s in record.get("scores", {}).items())
    return (f"[bold]it {iteration}[/] episodes={record.get('episodes', 0)} "
            f"tok/s={record.get('generated_tokens_per_s', 0):.0f} {scores} "
            f"bank={record.get('bank_sizes', {})} versions={record.get('versions', {})}")
