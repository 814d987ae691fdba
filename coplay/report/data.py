"""What the run report reads from a run folder (docs/run-folder.md), turned into chart series and table rows.

`metrics.jsonl` lines have the shape of `coplay.driver.metrics.iteration_record` (line 0 is the cold-start
record, a final `final_train` record may follow the last iteration); `eval/*.json` files are
`coplay.eval.write_eval`'s {"meta", "results"}; banks are `banks/<key>/v<n>.json` (`coplay.skills.schema`).
Missing keys are tolerated (a run that stopped early still gets a report); unreadable files are reported,
never skipped silently. Standard library + coplay's run folder, stats and bank schema only; never imports ray,
torch or matplotlib.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coplay.report.charts import Level, Series
from coplay.runs import RunDir
from coplay.skills.schema import Bank, BankError, bank_keys, bank_versions, load_bank

# Display order of the per-iteration timings; keys a newer loop adds are shown after these.
TIMING_PARTS = ("iteration_s", "sync_s", "rollout_wall_s", "generation_s", "env_s", "bank_s", "bank_wait_s",
                "train_s")
TRAIN_FIGURES = ("loss", "pg_loss", "kl", "clip_fraction", "grad_norm")


@dataclass
class EvalFile:
    """One `eval/<name>.json`: its name, meta and per-game results."""

    name: str
    meta: dict[str, Any]
    results: dict[str, Any]

    @property
    def label(self) -> str:
        for key in ("label", "player", "policy"):
            if isinstance(self.meta.get(key), str) and self.meta[key]:
                return str(self.meta[key])
        return self.name

    @property
    def iteration(self) -> int | None:
        it = self.meta.get("iteration")
        return int(it) if isinstance(it, int | float) and not isinstance(it, bool) else None


@dataclass
class RunData:
    """Everything the report shows, read once."""

    root: Path
    config_text: str
    iterations: list[dict[str, Any]]
    cold_start: dict[str, Any] | None
    evals: list[EvalFile]
    banks: dict[str, list[Bank]]
    problems: list[str] = field(default_factory=list)  # files that could not be read, named with the reason
    probes: list[EvalFile] = field(default_factory=list)  # eval/probe-it<k>.json (coplay.driver.probe)
    timeline: list[dict[str, Any]] = field(default_factory=list)  # lines with `phases`, in file order


def _read_evals(run: RunDir, problems: list[str], probes: bool = False) -> list[EvalFile]:
    """The evaluation files of `eval/` (`probes`: the per-decision probe's `probe-it<k>.json` instead)."""
    evals = []
    for path in sorted(run.eval.glob("*.json")):
        if path.name.startswith("probe-") != probes:
            continue
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            problems.append(f"{path}: not JSON ({exc})")
            continue
        if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
            problems.append(f"{path}: expected an object with 'meta' and 'results' (coplay.eval.write_eval)")
            continue
        evals.append(EvalFile(path.stem, dict(data.get("meta") or {}), data["results"]))
    return evals


def _read_banks(run: RunDir, problems: list[str]) -> dict[str, list[Bank]]:
    banks: dict[str, list[Bank]] = {}
    for key in bank_keys(run):
        history = []
        for version in bank_versions(run, key):
            try:
                history.append(load_bank(run, key, version))
            except BankError as exc:
                problems.append(str(exc))
        if history:
            banks[key] = history
    return banks


def load_run(run_dir: str | Path | RunDir) -> RunData:
    """Read a run folder (`RunDirError` when it is not one)."""
    run = run_dir if isinstance(run_dir, RunDir) else RunDir.open(run_dir)
    from coplay.driver.preflight import artifact_problems

    problems: list[str] = artifact_problems(run, shards=True)
    torn = run.torn_metrics_tail()
    if torn:
        problems.append(f"{run.metrics_path}: the last line is torn ({len(torn)} bytes, a write cut short); "
                        f"it is not shown")
    records = run.read_metrics() if run.metrics_path.exists() else []
    cold = next((r for r in records if "cold_start" in r), None)
    iterations = sorted((r for r in records if "scores" in r or "timings" in r), key=lambda r: r["iteration"])
    timeline = [r for r in records if isinstance(r.get("phases"), dict)]  # coplay.driver.phases
    return RunData(run.root, run.config_path.read_text(), iterations, cold, _read_evals(run, problems),
                   _read_banks(run, problems), problems, _read_evals(run, problems, probes=True), timeline)


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(float(value)):
        return None
    return float(value)


def games_of(records: list[dict[str, Any]], evals: list[EvalFile]) -> list[str]:
    games = {g for r in records for g in r.get("scores", {})} | {g for e in evals for g in e.results}
    return sorted(games)


def score_series(records: list[dict[str, Any]], game: str) -> Series | None:
    """Training-rollout mean score of `game` per iteration with its 95% t-interval band."""
    rows = [(r["iteration"], r["scores"][game]) for r in records if game in r.get("scores", {})]
    if not rows:
        return None
    return Series("training rollouts (mean, 95% CI)", [it for it, _ in rows],
                  [_num(s.get("mean")) for _, s in rows], [_num(s.get("ci_low")) for _, s in rows],
                  [_num(s.get("ci_high")) for _, s in rows])


def eval_overlays(evals: list[EvalFile], game: str) -> tuple[list[Series], list[Level]]:
    """Evaluations of `game`: those made at an iteration become points per label (with CI bands), those
    without one (baselines such as the random or expert bot, or SFT only) become horizontal levels."""
    by_label: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    levels = []
    for ev in evals:
        score = ev.results.get(game, {}).get("score")
        if not isinstance(score, dict) or _num(score.get("mean")) is None:
            continue
        if ev.iteration is None:
            levels.append(Level(f"{ev.label} (eval)", float(score["mean"]), _num(score.get("ci_low")),
                                _num(score.get("ci_high"))))
        else:
            by_label.setdefault(ev.label, []).append((ev.iteration, score))
    series = []
    for label, rows in sorted(by_label.items()):
        rows.sort(key=lambda row: row[0])
        series.append(Series(f"{label} (eval on seeds.eval)", [it for it, _ in rows],
                             [_num(s["mean"]) for _, s in rows], [_num(s.get("ci_low")) for _, s in rows],
                             [_num(s.get("ci_high")) for _, s in rows], {"linestyle": ":", "marker": "s"}))
    return series, levels


def reward_part_panels(records: list[dict[str, Any]]) -> dict[str, list[Series]]:
    """Mean reward of each adapter's samples per iteration (one panel per adapter)."""
    adapters = sorted({a for r in records for a in r.get("reward_parts", {})})
    panels = {}
    for adapter in adapters:
        rows = [(r["iteration"], r["reward_parts"][adapter])
                for r in records if adapter in r.get("reward_parts", {})]
        panels[adapter] = [Series("mean reward", [it for it, _ in rows],
                                  [_num(p.get("mean")) for _, p in rows])]
    return panels


def league_panels(records: list[dict[str, Any]]) -> dict[str, list[Series]]:
    """Per multi-seat game, each league member's rating mu over iterations (one panel per game)."""
    games = sorted({g for r in records for g in r.get("league", {})})
    panels = {}
    for game in games:
        rows = [(r["iteration"], r["league"][game]) for r in records if game in r.get("league", {})]
        members = sorted({m for _, table in rows for m in table})
        panels[game] = [Series(m, [it for it, table in rows if m in table],
                               [_num(table[m].get("mu")) for _, table in rows if m in table])
                        for m in members]
    return panels


def pooled_seat_scores(records: list[dict[str, Any]]) -> dict[str, dict[str, list[float]]]:
    """Per multi-seat game and role, the learner's episode scores of every iteration (`learner_seats`)."""
    out: dict[str, dict[str, list[float]]] = {}
    for r in records:
        for game, roles in r.get("learner_seats", {}).items():
            for role, v in roles.items():
                out.setdefault(game, {}).setdefault(role, []).extend(float(x) for x in v.get("scores", []))
    return {g: {r: v for r, v in roles.items() if v} for g, roles in sorted(out.items())}


def rate_series(records: list[dict[str, Any]]) -> list[Series]:
    """Invalid-action and parse-error rates (per step) per iteration."""
    out = []
    for key, label in (("invalid_rate", "invalid actions"), ("parse_error_rate", "parse errors")):
        rows = [(r["iteration"], _num(r.get(key))) for r in records if key in r]
        if rows:
            out.append(Series(label, [it for it, _ in rows], [v for _, v in rows]))
    return out


def train_panels(records: list[dict[str, Any]]) -> dict[str, list[Series]]:
    """Learner figures (loss, KL, clip fraction, ...) per adapter over iterations, one panel per figure."""
    panels: dict[str, list[Series]] = {}
    for figure in TRAIN_FIGURES:
        adapters = sorted({a for r in records
                           for a, v in r.get("train", {}).get("adapters", {}).items() if figure in v})
        lines = []
        for adapter in adapters:
            rows = [(r["iteration"], r["train"]["adapters"][adapter][figure]) for r in records
                    if figure in r.get("train", {}).get("adapters", {}).get(adapter, {})]
            lines.append(Series(adapter, [it for it, _ in rows], [_num(v) for _, v in rows]))
        if lines:
            panels[figure] = lines
    return panels


def timing_keys(records: list[dict[str, Any]]) -> list[str]:
    """Every timing the records hold, in display order."""
    present = {k for r in records for k in r.get("timings", {})}
    return [k for k in TIMING_PARTS if k in present] + sorted(present - set(TIMING_PARTS))


def timing_series(records: list[dict[str, Any]]) -> list[Series]:
    """Seconds per iteration: the whole iteration and each timed part the loop records."""
    out = []
    for key in timing_keys(records):
        rows = [(r["iteration"], _num(r["timings"].get(key))) for r in records if key in r.get("timings", {})]
        if rows:
            out.append(Series(key.removesuffix("_s").replace("_", " "), [it for it, _ in rows],
                              [v for _, v in rows]))
    return out


def throughput_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per iteration: generated tokens/s (over generation time), trained tokens and trained tokens/s over
    the whole iteration's wall time (the end-to-end figure of benchmarks/README.md), episodes."""
    rows = []
    keys = timing_keys(records)
    for r in records:
        timings = r.get("timings", {})
        wall = _num(timings.get("iteration_s"))
        trained = _num(r.get("train", {}).get("trained_tokens"))
        rows.append({
            "iteration": r["iteration"], "episodes": r.get("episodes"),
            **{k: _num(timings.get(k)) for k in keys},
            "generated_tokens": _num(r.get("generated_tokens")),
            "generated_tokens_per_s": _num(r.get("generated_tokens_per_s")), "trained_tokens": trained,
            "trained_tokens_per_s": trained / wall if trained is not None and wall else None,
        })
    return rows


def bank_size_series(banks: dict[str, list[Bank]]) -> list[Series]:
    """Skills per bank key over bank versions."""
    return [Series(key, [b.version for b in history], [float(len(b.skills)) for b in history])
            for key, history in sorted(banks.items())]


def bank_operation_counts(banks: dict[str, list[Bank]]) -> tuple[list[int], dict[str, list[float]]]:
    """Operations per bank version (summed over bank keys): applied ones by operation type, and those the
    curator's verdict (or a check) turned down as `not applied`."""
    versions = sorted({b.version for history in banks.values() for b in history})
    counts: dict[str, list[float]] = {}
    for history in banks.values():
        for bank in history:
            for op in bank.operations:
                kind = str(op.get("op")) if op.get("applied", True) else "not applied"
                counts.setdefault(kind, [0.0] * len(versions))[versions.index(bank.version)] += 1
    return versions, dict(sorted(counts.items()))
