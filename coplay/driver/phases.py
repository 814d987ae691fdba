"""The phase timeline: how a run's wall time splits between start-up, cold start, rollouts, bank update,
learner, evaluation, and publishing and sync (docs/run-folder.md, "The phase timeline").

Phases overlap: the rollouts of iteration k run while the bank update over k-1 and (staleness >= 1) learner
step k-1 run. So a metrics line's `phases` holds two views that must not be added to each other:
- `seconds`: wall-clock **segments of the driver**, what it was doing or waiting on, lap by lap
  (`PhaseClock`). They are contiguous, so they add up to `wall_s` (`other` holds the rest) and their `share`s
  sum to 1. A segment names what the driver waited on, not everything that ran meanwhile: while it waits for
  the learner step, the rollouts play on; `rollouts` is the wait for them that remained after it.
- `busy`: how long each concurrent component worked (the rollouts, the bank actor with its model calls per
  adapter and their tokens, the learner's forward, backward, optimizer step and export). Busy seconds overlap
  one another and the segments; they say where work went, the segments say what the run waited for.

A line covers the time since the previous line: the checkpoint written after iteration k, after its line,
is a segment of line k+1; line 0 holds the start-up (Ray, the learner, the engines) and the cold start
(teacher data, SFT). Pure Python (no ray, no torch): the loop, `coplay.driver.state`, the metrics line, the
report and the benchmarks all read it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from coplay.driver.records import CollectStats
from coplay.types import BankUpdate, TrainStep

# Display order of the segments; a segment a newer loop adds is shown after these, `other` last.
SEGMENTS = ("startup_ray", "startup_learner", "startup_engines", "resume", "cold_start_teacher",
            "cold_start_sft", "publish_sync", "rollouts", "learner", "bank_update", "curriculum",
            "evaluation", "checkpoint")
OTHER = "other"
# What the learner step's own timings hold (`coplay.learn.learner`, `coplay.actors.system.System.train`);
# publishing the adapters is moved out of the `learner` segment into `publish_sync`, measuring how far the
# served policy moved into `evaluation` (both run inside the learner's lap on the driver, one after another).
LEARNER_TIMINGS = ("batch_s", "reference_s", "forward_s", "backward_s", "optimizer_s", "step_s", "export_s",
                   "publish_s", "measure_s")


@dataclass
class Laps:
    """What a `PhaseClock` measured since its last `take`: wall seconds and the seconds of each named lap."""

    wall_s: float
    seconds: dict[str, float] = field(default_factory=dict)


class PhaseClock:
    """The driver's wall clock, lap by lap: `lap(name)` gives the time since the previous lap (or `take`) to
    `name` (laps of one name add up); `take()` hands over what was measured since the last take and starts
    afresh. A lap marks the end of what it names, so the loop reads as before with one line after a phase."""

    def __init__(self, now: Callable[[], float] = time.perf_counter) -> None:
        self.now = now
        self.since = self.mark = now()
        self.seconds: dict[str, float] = {}

    def lap(self, name: str) -> float:
        """Seconds since the previous lap, added to `name`; returned (the loop's existing timings use it)."""
        now = self.now()
        elapsed, self.mark = now - self.mark, now
        self.seconds[name] = self.seconds.get(name, 0.0) + elapsed
        return elapsed

    def take(self) -> Laps:
        """The wall time since the previous take and the laps in it (for one metrics line); starts afresh."""
        now = self.now()
        laps = Laps(now - self.since, dict(self.seconds))
        self.since = self.mark = now
        self.seconds = {}
        return laps


def ordered(names: Iterable[str]) -> list[str]:
    """Segment names in display order: the known ones, then new ones alphabetically, `other` last."""
    present = set(names)
    return ([n for n in SEGMENTS if n in present] + sorted(present - set(SEGMENTS) - {OTHER})
            + ([OTHER] if OTHER in present else []))


def phase_record(laps: Laps, busy: Mapping[str, Any] | None = None,
                 moves: Iterable[tuple[str, str, float]] = ()) -> dict[str, Any]:
    """A metrics line's `phases`: {"wall_s", "seconds": {segment: s}, "share": {segment: s / wall_s},
    "busy": {component: {...}}}. `moves` (from, to, seconds): time measured inside the lap `from` that
    belongs to `to` (e.g. publishing inside the learner's lap), at most what `from` holds. `other` is the
    wall time no lap named; the shares sum to 1 (up to float rounding)."""
    seconds = {name: max(0.0, s) for name, s in laps.seconds.items()}
    for source, target, amount in moves:
        moved = min(max(0.0, float(amount)), seconds.get(source, 0.0))
        if moved > 0:
            seconds[source] -= moved
            seconds[target] = seconds.get(target, 0.0) + moved
    named = sum(seconds.values())
    seconds[OTHER] = seconds.get(OTHER, 0.0) + max(0.0, laps.wall_s - named)
    wall = sum(seconds.values())  # = laps.wall_s, unless clock noise made the laps exceed it
    order = ordered(seconds)
    return {"wall_s": wall, "seconds": {n: seconds[n] for n in order},
            "share": {n: seconds[n] / wall if wall > 0 else 0.0 for n in order},
            "busy": dict(busy or {})}


def learner_moves(timings: Mapping[str, float] | None) -> list[tuple[str, str, float]]:
    """Where a learner step's publishing and update measure go (see `LEARNER_TIMINGS`)."""
    timings = timings or {}
    return [("learner", "publish_sync", float(timings.get("publish_s", 0.0))),
            ("learner", "evaluation", float(timings.get("measure_s", 0.0)))]


def iteration_phases(laps: Laps, stats: CollectStats | None = None, bank: BankUpdate | None = None,
                     train: TrainStep | None = None, final: TrainStep | None = None) -> dict[str, Any]:
    """An iteration's `phases` (`phase_record`), or the closing line's: the laps,
    the learner step's publishing and update measure moved out of its lap, and the busy view: the rollouts
    (their span from launch to collected, the slowest worker's generation, env stepping summed over
    workers), the bank update that ran meanwhile (its seconds, per adapter call kind the calls, tokens in
    and out and seconds, and `model_calls_s`, their sum) and the learner step (`seconds`: the step, export
    and publishing, as `timings.train_s`; its parts, `LEARNER_TIMINGS`). `final`: a second learner step in
    the same `learner` segment (the last iteration's own, `coplay.driver.batch.train_last`): its publishing
    and update measure move out too, and its busy seconds add to the learner's."""
    busy: dict[str, Any] = {}
    if stats is not None:
        busy["rollouts"] = {"seconds": stats.wall_seconds, "generation_s": stats.generation_seconds,
                            "env_s": stats.env_ns / 1e9}
    if bank is not None and (bank.seconds or bank.calls):
        waited = sum(float(c.get("seconds", 0.0)) for c in bank.calls.values())
        busy["bank_update"] = {"seconds": bank.seconds, "model_calls_s": waited,
                               "calls": {kind: dict(usage) for kind, usage in sorted(bank.calls.items())}}
    for step in (train, final):  # both ran inside this line's window: their busy seconds add up
        if step is not None:
            add_numbers(busy.setdefault("learner", {}),
                        {"seconds": step.seconds,
                         **{k: float(step.timings[k]) for k in LEARNER_TIMINGS if k in step.timings}})
    moves = [m for step in (train, final) if step is not None for m in learner_moves(step.timings)]
    return phase_record(laps, busy, moves)


def start_busy(engine_seconds: list[float], sft_seconds: float | None = None) -> dict[str, Any]:
    """The busy view of the start: the slowest rollout worker's start (its engine, built while the learner
    and the cold start ran) and the number of workers; the cold start's SFT, when it ran."""
    busy: dict[str, Any] = {"startup": {"engines_s": max(engine_seconds, default=0.0),
                                        "workers": len(engine_seconds)}}
    if sft_seconds is not None:
        busy["cold_start"] = {"sft_s": float(sft_seconds)}
    return busy


def add_numbers(into: dict[str, Any], other: Mapping[str, Any]) -> dict[str, Any]:
    """Sum `other` into `into`, leaf by leaf (nested dicts of numbers; anything else is left out)."""
    for key, value in other.items():
        if isinstance(value, Mapping):
            add_numbers(into.setdefault(key, {}), value)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            into[key] = into.get(key, 0) + value
    return into


def run_totals(records: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The whole run's timeline from its metrics lines: seconds per segment summed over every line with
    `phases` (iterations played again after a resume included: that time was spent), their shares of the
    summed wall time, the busy figures summed leaf by leaf, and how many lines carried `phases`. None when
    none did (a run from before the timeline)."""
    seconds: dict[str, float] = {}
    busy: dict[str, Any] = {}
    lines = 0
    for record in records:
        phases = record.get("phases")
        if not isinstance(phases, Mapping):
            continue
        lines += 1
        add_numbers(seconds, phases.get("seconds") or {})
        add_numbers(busy, phases.get("busy") or {})
    if not lines:
        return None
    wall = sum(seconds.values())
    order = ordered(seconds)
    return {"lines": lines, "wall_s": wall, "seconds": {n: seconds[n] for n in order},
            "share": {n: seconds[n] / wall if wall > 0 else 0.0 for n in order}, "busy": busy}


def phase_text(phases: Mapping[str, Any] | None, top: int = 3) -> str:
    """` time 41 s: rollouts 52%, learner 31%, bank_update 9%`: a line's largest segments for the console;
    "" without `phases`."""
    if not isinstance(phases, Mapping) or not phases.get("share"):
        return ""
    largest = sorted(phases["share"].items(), key=lambda item: -item[1])[:top]
    return f" time {phases.get('wall_s', 0.0):.0f} s: " + ", ".join(f"{n} {s:.0%}" for n, s in largest)
