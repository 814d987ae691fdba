"""What a user sees while a run works: every phase announces itself when it starts and reports its own time
when it ends, and while any phase is open the console is never silent for long; third-party loggers are held
at WARNING unless `logging.verbose`.

On a terminal: one rich display with a row per open phase (a bar, or a pulse when its size is unknown, and
the time since its work began); a phase that ends leaves its end line above the rows. In a log (stderr not a
terminal: `ray job logs`, a file): a start line, a count line at most every `LOG_EVERY_S` while it advances,
a `still running` line naming every open phase after `HEARTBEAT_S` without a line (a learner step or a wait
moves no count), and an end line.

Phases overlap (the rollouts of iteration k, the bank update over k-1 and learner step k-1 run together), so
a phase is begun where its work starts (`begin`) and ended where its result is collected (`Phase.end`), with
its own time: the seconds its work took by its own clock (a worker's, the bank actor's) when that is known,
else the time since it began. `phase(...)` is the block form. Standard library and rich only.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta

from rich.console import Console
from rich.progress import BarColumn, Progress, ProgressColumn, SpinnerColumn, Task, TextColumn
from rich.text import Text

QUIET_LOGGERS = ("vllm", "ray", "peft", "deepspeed", "transformers", "torch", "urllib3", "filelock",
                 "httpx")
# FutureWarnings raised by other libraries' own calls into torch, in the processes a run starts; not coplay's
# calls, so filtered by their message unless `logging.verbose`: vLLM's kernel dispatcher scans every module's
# attributes and so touches the deprecated `torch.distributed.reduce_op` (vllm/triton_utils/dispatcher.py,
# in each rollout worker and engine core); DeepSpeed's ZeRO collectives call the deprecated
# `all_gather_into_tensor` and `reduce_scatter_tensor` (deepspeed/comm/torch.py, in each learner rank).
THIRD_PARTY_FUTURE_WARNINGS = ("`torch.distributed.reduce_op` is deprecated",
                               "`torch.distributed.all_gather_into_tensor` is deprecated",
                               "`torch.distributed.reduce_scatter_tensor` is deprecated")

LOG_EVERY_S = 15.0  # in a log, a count line while a phase advances, after this long without any line
HEARTBEAT_S = 15.0  # in a log, a `still running` line after this long without any line while phases are open

clock: Callable[[], float] = time.perf_counter  # every phase's clock (tests give a fake one)
background = True  # a daemon thread runs `tick` about once a second while a phase is open (tests: off)

_enabled = True
_lock = threading.RLock()
_open: list[Phase] = []
_display: Progress | None = None  # the terminal's rows while a phase is open there
_last_line = 0.0
_ticker: threading.Thread | None = None


def set_enabled(enabled: bool) -> None:
    """Turn progress output on or off for this process (`logging.console: false` turns it off)."""
    global _enabled
    _enabled = enabled


def quiet_third_party(verbose: bool) -> None:
    """vLLM, Ray, peft, DeepSpeed (and their helpers) log at WARNING and above, and the FutureWarnings their
    own calls raise (`THIRD_PARTY_FUTURE_WARNINGS`) are filtered, unless `verbose`; set in this process and,
    through the variables those libraries and Python read, in the processes it starts (Ray actors, vLLM's
    engine core)."""
    level = logging.INFO if verbose else logging.WARNING
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(level)
    if not verbose:
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        os.environ.setdefault("COPLAY_VLLM_NOTICES", "filter")  # coplay.engines.vllm_notices: why each
        os.environ.setdefault("DS_LOG_LEVEL", "warning")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "warning")
        os.environ.setdefault("RAY_DEDUP_LOGS", "1")
        # transformers' weight-loading bars, read when it is imported: from a learner rank they reach the
        # console as a line per load (a long load on the driver is a phase of its own, with its heartbeat)
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        # here, and through PYTHONWARNINGS (a message prefix per entry) in every Python process started later
        filters = [entry for entry in os.environ.get("PYTHONWARNINGS", "").split(",") if entry]
        for message in THIRD_PARTY_FUTURE_WARNINGS:
            warnings.filterwarnings("ignore", message=re.escape(message), category=FutureWarning)
            if f"ignore:{message}:FutureWarning" not in filters:
                filters.append(f"ignore:{message}:FutureWarning")
        os.environ["PYTHONWARNINGS"] = ",".join(filters)


def _terminal() -> bool:
    return Console(stderr=True).is_terminal


def say(text: str) -> None:
    """One line on stderr (above the rows on a terminal); it resets the heartbeat's silence."""
    global _last_line
    with _lock:
        if _display is not None:
            _display.console.print(text, markup=False, highlight=False)
        else:
            print(text, file=sys.stderr, flush=True)
        _last_line = clock()


class _SinceColumn(ProgressColumn):
    """The time since the phase's work began (its `started`, which may precede its row)."""

    def render(self, task: Task) -> Text:
        return Text(str(timedelta(seconds=int(max(0.0, clock() - task.fields["started"])))),
                    style="progress.elapsed")


@dataclass
class Phase:
    """An open phase: `advance(n)` moves its count, `set_total(n)` sizes it once known, `note` goes in its end
    line, `end(seconds)` reports its own time and closes it. `started`: when its work began (`clock`)."""

    description: str = ""
    total: int | None = None
    unit: str = ""
    started: float = field(default_factory=lambda: clock())
    done: int = 0
    note: str = ""
    shown: bool = True
    task: int | None = None
    logged: float = field(default_factory=lambda: clock())
    closed: bool = False
    seconds: float = 0.0  # what `end` reported
    quiet: bool = False  # in a log: no start line, and an end line only once a heartbeat named it
    # (own seconds, note) once its work is done, else None; asked by `tick` (so it must not raise)
    poll: Callable[[], tuple[float, str] | None] | None = None

    def count(self) -> str:
        """`3/8 episode seats`, `3 batches`, or "" before anything was counted or sized."""
        if self.total is None and not self.done:
            return ""
        size = f"/{self.total}" if self.total is not None else ""
        return f"{self.done}{size} {self.unit}".rstrip()

    def status(self, now: float) -> str:
        """`iteration 2: rollouts (45 s, 3/8 episode seats)`: the heartbeat's words for this phase (the time
        in brackets, so it never reads as part of a description that ends in a count)."""
        count = self.count()
        return f"{self.description} ({now - self.started:.0f} s" + (f", {count})" if count else ")")

    def set_total(self, total: int) -> None:
        self.total = total
        self._refresh()

    def advance(self, n: int = 1) -> None:
        self.done += n
        if self.task is not None:
            self._refresh()
        elif self.shown and not self.closed and clock() - max(self.logged, _last_line) >= LOG_EVERY_S:
            self.logged = clock()
            say(f"{self.description}: {self.count()}, {self.logged - self.started:.0f} s")

    def _refresh(self) -> None:
        with _lock:
            if self.task is not None and _display is not None:
                _display.update(self.task, total=self.total, completed=self.done, count=self.count())

    def end(self, seconds: float | None = None, note: str | None = None) -> float:
        """Close the phase with the line `<description>: done in <s> s[, note]`: `seconds` by the work's own
        clock when given, else the time since `started`. Returns the seconds reported; a second call does
        nothing (and returns them again)."""
        if self.closed:
            return self.seconds
        self.seconds = float(seconds) if seconds is not None else clock() - self.started
        if note is not None:
            self.note = note
        self.close()
        if self.shown and not self.quiet:
            say(f"{self.description}: done in {self.seconds:.1f} s" + (f", {self.note}" if self.note else ""))
        return self.seconds

    def close(self) -> None:
        """Remove the phase without an end line (its work failed: the error says why)."""
        global _display
        with _lock:
            if self.closed:
                return
            self.closed = True
            if self in _open:
                _open.remove(self)
            if self.task is not None and _display is not None:
                _display.remove_task(self.task)
                self.task = None
            if not _open and _display is not None:
                _display.stop()
                _display = None


def begin(description: str, total: int | None = None, unit: str = "", started: float | None = None,
          poll: Callable[[], tuple[float, str] | None] | None = None, quiet: bool = False) -> Phase:
    """Announce a phase (a row on a terminal; the line `<description> (<total> <unit>) ...` in a log) and
    return it open; `started` (`clock` time): when its work began, if before now. `poll`: asked about once
    a second whether the work is done (work in another process, collected later): its (own seconds, note)
    end the phase at once, so the end line comes when the work ends, not when it is collected. `quiet`: a
    phase that is usually short (a sync) shows in a log only once a heartbeat has named it."""
    global _display, _last_line
    current = Phase(description, total, unit, started=clock() if started is None else started, poll=poll,
                    quiet=quiet)
    if not _enabled:
        current.shown, current.closed = False, True
        return current
    with _lock:
        if not _open:  # the silence a heartbeat breaks starts with the first open phase
            _last_line = clock()
        _open.append(current)
        if _terminal():
            if _display is None:
                _display = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                    TextColumn("{task.fields[count]}"), _SinceColumn(),
                                    console=Console(stderr=True), transient=True)
                _display.start()
            current.task = _display.add_task(description, total=total, count=current.count(),
                                             started=current.started)
        elif not quiet:
            size = f" ({total} {unit})" if total is not None else ""
            say(f"{description}{size} ...")
        if background and (_ticker is None or not _ticker.is_alive()):
            _start_ticker()
    return current


@contextmanager
def phase(description: str, total: int | None = None, unit: str = "", quiet: bool = False) -> Iterator[Phase]:
    """A phase for the duration of the block (`begin`, then `Phase.end` unless the block ended it itself);
    a block that raises closes it without an end line."""
    current = begin(description, total, unit, quiet=quiet)
    try:
        yield current
    except BaseException:
        current.close()
        raise
    current.end()


def close_all() -> None:
    """Close every open phase without an end line (a run stopping: its error or stop line says why)."""
    with _lock:
        for current in list(_open):
            current.close()


def tick() -> str | None:
    """Ends the open phases whose `poll` says their work is done, then the heartbeat: in a log, after
    `HEARTBEAT_S` without a line while phases are open, one `still running` line naming each with its time
    so far (and count); returns it (None when nothing was due). Run by a daemon thread about once a second
    while a phase is open, so the console moves while the driver waits on another process."""
    with _lock:
        polled = [p for p in _open if p.poll is not None]
    for current in polled:  # outside the lock: a poll may wait briefly on another process
        done = current.poll() if current.poll is not None else None
        if done is not None:
            current.end(*done)
    with _lock:
        now = clock()
        if not _open or _display is not None or now - _last_line < HEARTBEAT_S:
            return None
        line = "still running: " + "; ".join(p.status(now) for p in _open)
        for current in _open:
            current.quiet = False  # named now, so its end line follows
        say(line)
        return line


def _start_ticker() -> None:
    global _ticker
    _ticker = threading.Thread(target=_tick_while_open, name="coplay-progress", daemon=True)
    _ticker.start()


def _tick_while_open() -> None:
    global _ticker
    while True:
        time.sleep(1.0)
        with _lock:
            if not _open:
                _ticker = None
                return
        tick()
