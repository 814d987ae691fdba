"""An iteration's metrics: the record (one line of `metrics.jsonl`: scores per game with CIs, reward parts
and losses per adapter, invalid and parse-error rates, versions, bank sizes, timings and throughput) and
where it goes: `metrics.jsonl` (always), TensorBoard under `tb/`, W&B when configured, and one rich console
line per iteration (docs/run-folder.md)."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from coplay.config import LoggingConfig
from coplay.driver import progress
from coplay.driver.phases import Laps, iteration_phases, phase_text
from coplay.driver.records import CollectStats, IterationData
from coplay.eval.stats import summarize
from coplay.report.skill_analysis import skill_use
from coplay.runs import RunDir
from coplay.types import BankUpdate, Sample, TrainStep, Trajectory


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
        progress.set_enabled(cfg.console)
        progress.quiet_third_party(cfg.verbose)
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
        # the last GRPO step (after the final rollouts) continues the train/* curves, at its own step
        flat.update({f"train/{k.removeprefix('final_train/')}": v for k, v in list(flat.items())
                     if k.startswith("final_train/")})
        if self.tb is not None:
            for key, value in flat.items():
                self.tb.add_scalar(key, value, iteration)
            self.tb.flush()
        if self.wandb is not None:
            self.wandb.log(flat, step=iteration)
        if self.console is not None:
            # unwrapped: a log (or a narrow terminal) must not break a line inside a figure
            self.console.print(console_line(iteration, record), soft_wrap=True)

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.finish()


def engine_names(versions: dict[str, int]) -> str:
    """`act@v2 retrieve@v2`: adapter versions as the engines name them, one token each (a line that wraps
    never splits one)."""
    return " ".join(f"{adapter}@v{version}" for adapter, version in versions.items()) or "none"


def _per_key(values: dict[str, Any], unit: str = "") -> str:
    return ", ".join(f"{key} {unit}{value}" for key, value in values.items()) or "none"


def console_line(iteration: int, record: dict[str, Any]) -> str:
    """The console lines of one record (printed unwrapped, each short and labelled; no dict is printed
    raw): an iteration's rollouts, the adapter and bank versions they used, the skills per bank, the
    evaluation after them with the versions it used (newer than the rollouts' when a learner step came
    between), and the phases; or what the run's closing records say (the last GRPO step after the final
    rollouts; the newest versions) instead of an empty rollout line."""
    if "final_train" in record:
        train = record["final_train"]
        return (f"[bold]final GRPO step[/] (learner step {train.get('learner_step')}): published "
                f"{engine_names(train.get('published', {}))}"
                + _indented(served_change_text(train.get("served_change", {}))))
    if "final_versions" in record:
        return (f"[bold]final[/]: adapters {engine_names(record['final_versions'])}; bank versions "
                f"{_per_key(record.get('final_bank_versions', {}), 'v')}"
                + _indented(phase_text(record.get("phases"))))
    versions = engine_names(record.get("versions", {}))
    if "resumed_from" in record:
        return f"[bold]resumed[/] from {record['resumed_from']}: adapters {versions}"
    banks = _per_key(record.get("bank_versions", {}), "v")
    if "cold_start" in record:  # the at-start evaluation (if any) played the cold start's versions
        lines = [f"[bold]cold start[/]: adapters {versions}; bank versions {banks}"]
        used = record.get("versions")
    else:
        scores = ", ".join(f"{g} {s['mean']:.1f}" for g, s in record.get("scores", {}).items()) or "none"
        lines = [f"[bold]it {iteration}[/]: {record.get('episodes', 0)} episodes, mean score {scores}, "
                 f"{record.get('generated_tokens_per_s', 0):.0f} tok/s",
                 f"  rollouts on adapters {versions}; bank versions {banks}",
                 # sizes come from the bank updates that finished during this iteration: without one, the
                 # banks are those of the versions above, not empty
                 (f"  skills per bank: {_per_key(sizes)}" if (sizes := record.get("bank_sizes")) else
                  "  skills per bank: no bank update finished during this iteration")
                 + (f"; bank operations applied: {_per_key(applied)}"
                    if (applied := record.get("maintenance", {}).get("applied")) else "")]
        used = record.get("eval_versions")
    if record.get("eval"):
        scored = {g: e["score"] for g, e in record["eval"].items() if "score" in e}
        results = ", ".join(f"{g} {s['mean']:.1f} [{s['ci_low']:.1f}, {s['ci_high']:.1f}]"
                            for g, s in scored.items())
        lines.append(f"  evaluation on seeds.eval: {results}"
                     + (f"; adapters {engine_names(used)}" if used else ""))
    text = "\n".join(lines)
    for extra in (served_change_text(record.get("train", {}).get("served_change", {})),
                  game_share_text(record.get("reward_shares", {})), phase_text(record.get("phases"))):
        text += _indented(extra)
    return text


def _indented(text: str) -> str:
    """A helper's ` label: ...` text as a line of its own under the record's first line ("" stays "")."""
    return f"\n {text}" if text else ""


def game_share_text(shares: dict[str, dict[str, float]]) -> str:
    """` game share: act 82% retrieve 64%`: how much of each adapter's reward magnitude came from the game
    itself rather than the skill shaping (docs/rewards.md); "" when no step trained."""
    parts = [f"{adapter} {s['game']:.0%}" for adapter, s in sorted(shares.items()) if "game" in s]
    return f" game share: {' '.join(parts)}" if parts else ""


def served_change_text(changes: dict[str, dict[str, Any]]) -> str:
    """` served: act Δ=2.1e-03 (41% of elements) KL=3.0e-04`: how far a learner step moved each published
    adapter as served; "" when nothing was published."""
    parts = []
    for adapter, c in sorted(changes.items()):
        kl = "" if c.get("kl") is None else f" KL={c['kl']:.1e}"
        parts.append(f"{adapter} Δ={c['rel_change']:.1e} ({c['changed_share']:.0%} of elements){kl}")
    return f" served: {'; '.join(parts)}" if parts else ""


def maintenance_totals(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """The bank updates' maintenance blocks (`coplay.skills.update.maintenance_summary`) summed over bank
    keys: evidence, proposals by kind, deferred, invalid, verdicts, applied, rejected, gated, quality change;
    every judged operation's quality change (a list), and the curator's agreement (its rate recomputed)."""
    total: dict[str, Any] = {}
    for report in reports:
        for part, values in report.get("maintenance", {}).items():
            if isinstance(values, list):
                total.setdefault(part, []).extend(values)
            elif isinstance(values, dict):
                into = total.setdefault(part, {})
                for key, value in values.items():
                    if isinstance(value, int | float):
                        into[key] = round(into.get(key, 0) + value, 6)
    agreement = total.get("curator_agreement")
    if agreement is not None:
        judged = agreement.get("judged", 0)
        agreement["rate"] = round(agreement.get("agreed", 0) / judged, 4) if judged else None
    return total


def score_summary(trajectories: list[Trajectory]) -> dict[str, dict[str, float]]:
    """Mean score, 95% t-interval, median, min, max per game (the policy's own seats only)."""
    by_game: dict[str, list[float]] = defaultdict(list)
    for t in trajectories:
        if t.policy == "model":
            by_game[t.game].append(t.score)
    return {g: summarize(v).as_dict() for g, v in sorted(by_game.items())}


def learner_seats(trajectories: list[Trajectory]) -> dict[str, dict[str, dict[str, Any]]]:
    """Multi-seat games: per role the learner's episodes, mean score and the scores themselves (the seat
    schedule at work; the report pools the scores of all iterations into per-role intervals)."""
    import coplay_envs

    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for t in trajectories:
        if t.policy == "model" and coplay_envs.seats(t.game):
            out[t.game][t.role].append(t.score)
    return {g: {r: {"episodes": len(v), "mean_score": sum(v) / len(v), "scores": v}
                for r, v in sorted(roles.items())}
            for g, roles in sorted(out.items())}


def negotiation(trajectories: list[Trajectory]) -> dict[str, dict[str, float]]:
    """Diplomacy press per player kind (`model` = the learner; `all` seats): valid message lines sent in
    negotiation stages, messages per negotiation step, and the share sent privately (to one power)."""
    from coplay_envs.diplomacy.orders import POWERS, resolve_messages

    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # steps, messages, private
    for t in trajectories:
        if t.game != "diplomacy":
            continue
        for step in t.steps:
            if not step.features_before.get("is_negotiation"):
                continue
            sent = resolve_messages(step.action, t.seat, list(POWERS)).messages
            private = sum(1 for recipient, _ in sent if recipient != "ALL")
            for who in {"all", "model" if t.policy == "model" else t.policy.split("@")[0]}:
                c = counts[who]
                c[0], c[1], c[2] = c[0] + 1, c[1] + len(sent), c[2] + private
    return {who: {"negotiation_steps": n, "messages": m, "private": p, "messages_per_step": m / max(n, 1),
                  "private_share": p / m if m else 0.0} for who, (n, m, p) in sorted(counts.items())}


def reward_parts(samples: list[Sample]) -> dict[str, dict[str, float]]:
    """Per adapter: mean, min and max reward and the number of samples a learner step trained on."""
    rewards: dict[str, list[float]] = defaultdict(list)
    for s in samples:
        if s.reward is not None:
            rewards[s.adapter].append(float(s.reward))
    return {a: {"mean": sum(v) / len(v), "min": min(v), "max": max(v), "n": len(v)}
            for a, v in sorted(rewards.items())}


TRAIN_KEYS = ("learner_step", "adapters", "trained_tokens", "published", "nonzero_advantages", "reward_parts",
              "reward_shares",
              "trained_iteration", "trained_episodes", "served_change")


def final_train_record(final: TrainStep, checkpoint: str) -> dict[str, Any]:
    """The metrics line of the last iteration's learner step (`coplay.driver.batch.train_last`), logged after
    that iteration's line, with the checkpoint that holds it."""
    return {"final_train": {**final.to_json(), "checkpoint": checkpoint},
            "reward_parts": final.reward_parts, "reward_shares": final.reward_shares}


def iteration_record(iteration: int, data: IterationData, stats: CollectStats, bank: BankUpdate,
                     train: TrainStep | None, versions: dict[str, int], seconds: float,
                     faults: dict[str, Any], evaluation: dict[str, Any] | None = None,
                     checkpoint: str | None = None,
                     league: dict[str, Any] | None = None, *,
                     probe: dict[str, Any] | None = None, phases: Laps | None = None,
                     eval_versions: dict[str, int] | None = None,
                     final: TrainStep | None = None) -> dict[str, Any]:
    """The whole metrics line of iteration `iteration`: its rollouts (`data`, `stats`, at adapter `versions`),
    the bank update that ran meanwhile, the learner step of this iteration (if any), what failed and was
    recovered, the evaluation (if any) at adapter `eval_versions` (the newest after this iteration's learner
    step: with staleness >= 1 newer than the rollouts'), the checkpoint written after it (if any) and the
    league's ratings after it (multi-seat games), the per-decision probe (`coplay.driver.probe`), when it
    ran, and the phase timeline (`coplay.driver.phases`) from the driver's laps `phases`. `final`: the last
    iteration's own learner step, which ran in its learner segment (its record is the next line)."""
    steps = max(1, stats.steps)
    train_json = train.to_json() if train is not None else {}
    record: dict[str, Any] = {
        "iteration": iteration,
        "episodes": len({t.episode_id for t in data.trajectories}),
        "scores": score_summary(data.trajectories),
        "reward_parts": train_json.get("reward_parts", {}),
        "reward_shares": train_json.get("reward_shares", {}),
        "invalid_rate": stats.invalid_actions / steps,
        "parse_error_rate": stats.parse_errors / steps,
        "versions": dict(versions),
        "bank_versions": dict(data.bank_versions),
        "bank_sizes": {r["bank_key"]: r.get("size", 0) for r in bank.reports},
        "bank_samples": {k: v for r in bank.reports for k, v in r.get("samples", {}).items()},
        "maintenance": maintenance_totals(bank.reports),
        "skill_use": skill_use(data.trajectories),  # picked, and how each use ended (success/abort/switch)
        "prompt_trims": {"history": stats.prompt_trim_history, "legal": stats.prompt_trim_legal,
                         "too_long": stats.prompt_too_long,
                         "bank": sum(int(r.get("prompts_trimmed", 0)) for r in bank.reports)},
        "train": {k: v for k, v in train_json.items() if k in TRAIN_KEYS},
        "timings": {"iteration_s": seconds, "sync_s": stats.sync_s, "rollout_wall_s": stats.wall_seconds,
                    "generation_s": stats.generation_seconds, "env_s": stats.env_ns / 1e9,
                    "bank_s": stats.bank_s,
                    "bank_wait_s": stats.bank_wait_s, "train_s": train_json.get("train_seconds", 0.0),
                    "update_measure_s": train_json.get("measure_seconds", 0.0)},
        "serving": {"adapters_held": stats.adapters_held, "frozen_held": stats.frozen_held,
                    "pulled_bytes": stats.pulled_bytes, "pull_s": round(stats.pull_s, 3)},
        # one entry per rollout chunk, i.e. per worker that rolled out: who was busy and for how long
        "workers": {"rollout_s": stats.worker_seconds, "episodes": stats.worker_episodes},
        "generated_tokens": stats.generated_tokens,
        "generated_tokens_per_s": stats.generated_tokens / max(stats.generation_seconds, 1e-9),
        "faults": faults,
        "checkpoint": checkpoint,
    }
    seats = learner_seats(data.trajectories)
    if seats:
        record["learner_seats"] = seats
    press = negotiation(data.trajectories)
    if press:
        record["negotiation"] = press
    if league:
        record["league"] = league
    if evaluation is not None:
        record["eval"] = evaluation
        if eval_versions is not None:
            record["eval_versions"] = dict(eval_versions)
    if probe is not None:
        record["probe"] = probe
    if phases is not None:  # the driver's laps since the previous line, and the busy view
        record["phases"] = iteration_phases(phases, stats, bank, train, final)
    return record
