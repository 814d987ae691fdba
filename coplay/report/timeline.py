"""The run report's phase timeline (`coplay.driver.phases`): how the run's wall time split between start-up,
cold start, publishing and sync, rollouts, the learner, the bank update, evaluation and checkpoints, as a
stacked bar per metrics line, a table of the whole run, the busy seconds of the components that run at the
same time, and the bank's model calls per kind with their tokens. A run from before the timeline says so
instead. Never imports ray or torch.
"""

from __future__ import annotations

import html
from typing import Any

from coplay.driver.phases import run_totals
from coplay.report import charts
from coplay.report.data import RunData

e = html.escape

# What each driver segment is (docs/run-folder.md, "The phase timeline").
MEANING = {
    "startup_ray": "start-up: Ray started (or joined)",
    "startup_learner": "start-up: the actors created and the learner built on every rank (the engines start "
                       "meanwhile)",
    "startup_engines": "start-up: waiting for the rollout workers' engines after the cold start, the part of "
                       "their start the learner and the cold start did not hide",
    "resume": "a resume: checkpoint loaded, artifacts restored",
    "cold_start_teacher": "cold start: expert episodes, seed banks, teacher data, publishing the adapters",
    "cold_start_sft": "cold start: the SFT of every adapter",
    "publish_sync": "publishing each learner step's adapters to the store, and syncing the workers to the "
                    "iteration's versions",
    "rollouts": "launching the rollouts, and waiting for them after the learner step",
    "learner": "the learner step on the driver's clock: rewards and advantages, forward, backward, "
               "optimizer, export (the rollouts play meanwhile)",
    "bank_update": "waiting for the bank update after the rollouts (it runs beside them)",
    "curriculum": "the curriculum's proposer and solver rounds",
    "evaluation": "evaluations, the per-decision probe (and building it), measuring how far each update "
                  "moved the served policy",
    "checkpoint": "writing checkpoints",
    "other": "the rest: metrics lines, bookkeeping",
}
# One colour per segment, the same in every report (the rollouts blue, the learner orange, the bank green).
COLORS = {"startup_ray": "#aec7e8", "startup_learner": "#c5b0d5", "startup_engines": "#c49c94",
          "resume": "#dbdb8d", "cold_start_teacher": "#ff9896", "cold_start_sft": "#d62728",
          "publish_sync": "#9467bd", "rollouts": "#1f77b4", "learner": "#ff7f0e", "bank_update": "#2ca02c",
          "curriculum": "#17becf", "evaluation": "#e377c2", "checkpoint": "#8c564b", "other": "#c7c7c7"}
BUSY_COLUMNS = (("rollouts", "seconds", "rollouts"), ("rollouts", "generation_s", "generation"),
                ("rollouts", "env_s", "env"), ("bank_update", "seconds", "bank update"),
                ("bank_update", "model_calls_s", "bank model calls"), ("learner", "seconds", "learner step"),
                ("learner", "batch_s", "batch"), ("learner", "reference_s", "KL reference"),
                ("learner", "forward_s", "forward"), ("learner", "backward_s", "backward"),
                ("learner", "optimizer_s", "optimizer"), ("learner", "export_s", "export"),
                ("learner", "publish_s", "publish"), ("learner", "measure_s", "update measure"))
CALL_COLUMNS = ("calls", "prompts", "completions", "tokens_in", "tokens_out", "seconds")
NOT_RECORDED = ("Phase timeline not recorded: no line of this run's metrics.jsonl has `phases` (a run from "
                "before the timeline). The Throughput section shows the timings it has.")


def line_label(record: dict[str, Any]) -> str:
    """A metrics line's place in the run: `start` (start-up and cold start), `resume`, `end` (the closing
    line: the last learner step, the final sync), else its iteration."""
    if "cold_start" in record:
        return "start"
    if "resumed_from" in record:
        return "resume"
    if "final_versions" in record:
        return "end"
    return str(record.get("iteration", "?"))


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _cell(value: Any, digits: int = 1) -> str:
    number = _num(value)
    return "-" if number is None else f"{number:,.{digits}f}"


def stacked_segments(lines: list[dict[str, Any]], order: list[str]) -> dict[str, list[float]]:
    """Per segment (in `order`), its seconds on each line (0 where a line does not have it)."""
    return {name: [_num(r["phases"].get("seconds", {}).get(name)) or 0.0 for r in lines] for name in order}


def totals_table(totals: dict[str, Any]) -> str:
    rows = "".join(f"<tr><td>{e(name)}</td><td>{_cell(s)}</td><td>{totals['share'][name]:.1%}</td>"
                   f"<td class='what'>{e(MEANING.get(name, ''))}</td></tr>"
                   for name, s in totals["seconds"].items())
    total = (f"<tr class='median'><td>run</td><td>{_cell(totals['wall_s'])}</td><td>100%</td>"
             f"<td class='what'>{totals['lines']} metrics line(s)</td></tr>")
    return ("<table class='phases'><tr><th>phase (driver wall time)</th><th>seconds</th><th>share</th>"
            f"<th class='what'>what the driver was doing or waiting on</th></tr>{rows}{total}</table>")


def busy_table(lines: list[dict[str, Any]]) -> str:
    """One row per line that has any busy figure; the columns any line has."""
    cols = [c for c in BUSY_COLUMNS if any(_num(r["phases"].get("busy", {}).get(c[0], {}).get(c[1]))
                                           is not None for r in lines)]
    if not cols:
        return ""
    body = []
    for r in lines:
        busy = r["phases"].get("busy", {})
        if not any(part in busy for part in ("rollouts", "bank_update", "learner")):
            continue
        body.append(f"<tr><td>{e(line_label(r))}</td>"
                    + "".join(f"<td>{_cell(busy.get(part, {}).get(key))}</td>" for part, key, _ in cols)
                    + "</tr>")
    heads = "".join(f"<th>{e(label)}</th>" for _, _, label in cols)
    return (f"<h3>Busy seconds of the components (they overlap)</h3><div class='wide'><table class='busy'>"
            f"<tr><th>line</th>{heads}</tr>{''.join(body)}</table></div>")


def calls_table(totals: dict[str, Any]) -> str:
    """The bank update's model calls per kind over the run, with tokens per second of waiting."""
    calls = totals["busy"].get("bank_update", {}).get("calls", {})
    if not calls:
        return "<p class='note'>No bank model calls recorded (deterministic bank, or no bank update).</p>"
    rows = []
    for kind, c in sorted(calls.items()):
        seconds = _num(c.get("seconds")) or 0.0
        rate = (_num(c.get("tokens_out")) or 0.0) / seconds if seconds > 0 else None
        cells = "".join(f"<td>{_cell(c.get(k), 1 if k == 'seconds' else 0)}</td>" for k in CALL_COLUMNS)
        rows.append(f"<tr><td>{e(kind)}</td>{cells}<td>{_cell(rate)}</td></tr>")
    heads = "".join(f"<th>{e(k.replace('_', ' '))}</th>" for k in CALL_COLUMNS)
    return ("<h3>Bank update: model calls per kind, whole run</h3><table class='calls'>"
            f"<tr><th>call kind</th>{heads}<th>tokens out / s</th></tr>{''.join(rows)}</table>")


def section(data: RunData) -> str:
    """The report section: the stacked bars, the run's table, the busy table, the bank calls table."""
    lines = data.timeline
    totals = run_totals(lines)
    if totals is None:
        return f"<p class='none'>{e(NOT_RECORDED)}</p>"
    order = list(totals["seconds"])
    svg = charts.stacked_bars("phases", "driver wall time per metrics line, by phase", "metrics line",
                              "seconds", [line_label(r) for r in lines], stacked_segments(lines, order),
                              colors=COLORS, legend_outside=True)
    caption = ("Each bar is one metrics line's wall time on the driver, split into what the driver was "
               "doing or waiting on (they add up to the line's time): `start` is the start-up and the cold "
               "start, each number an iteration (from the previous line to its own, so a checkpoint written "
               "after iteration k is in k+1), `end` the last learner step and the final sync. Work that runs "
               "beside the driver's wait (the rollouts during the learner step, the bank update during the "
               "rollouts) is in the busy table below, not in these bars.")
    note = ("<p class='note'>Two views that must not be added together: the bars and the first table are "
            "segments of the driver's wall clock (shares sum to 1); the busy seconds are how long each "
            "component worked, and they overlap each other and the segments (with staleness &ge; 1 the "
            "rollouts of iteration k run while the bank update over k&minus;1 and learner step k&minus;1 "
            "run). "
            "Bank model calls are the bank actor's waits for the rollout workers' engines, which also serve "
            "the rollouts.</p>")
    figure = (f"<figure class='chart' id='chart-phases'>{svg}<figcaption>{e(caption)}</figcaption></figure>")
    return figure + totals_table(totals) + note + busy_table(lines) + calls_table(totals)
