"""What a user sees while a long phase runs: a rich progress bar on a terminal, one start and one end line
in a log (stderr not a terminal), and third-party loggers held at WARNING unless `logging.verbose`.

Every long phase goes through `phase(...)`: the cold-start SFT, the rollouts of an iteration (episodes),
the bank update, an evaluation (episodes) and `coplay play` (episodes). A phase whose size is unknown shows
a spinner with the elapsed time. Standard library and rich only.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

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

_enabled = True


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
        os.environ.setdefault("DS_LOG_LEVEL", "warning")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "warning")
        os.environ.setdefault("RAY_DEDUP_LOGS", "1")
        # here, and through PYTHONWARNINGS (a message prefix per entry) in every Python process started later
        filters = [entry for entry in os.environ.get("PYTHONWARNINGS", "").split(",") if entry]
        for message in THIRD_PARTY_FUTURE_WARNINGS:
            warnings.filterwarnings("ignore", message=re.escape(message), category=FutureWarning)
            if f"ignore:{message}:FutureWarning" not in filters:
                filters.append(f"ignore:{message}:FutureWarning")
        os.environ["PYTHONWARNINGS"] = ",".join(filters)


LOG_EVERY_S = 30.0  # without a terminal (a log, `ray job logs`), a line at most this often while it advances


@dataclass
class Phase:
    """A running phase: `advance(n)` moves its bar (in a log: a line at most every `LOG_EVERY_S`);
    `set_total(n)` gives it a size once known; `note` is shown in its end line."""

    progress: Progress | None
    task: int | None
    description: str = ""
    total: int | None = None
    unit: str = ""
    log: bool = False
    done: int = 0
    note: str = ""
    started: float = field(default_factory=time.perf_counter)
    logged: float = field(default_factory=time.perf_counter)

    def set_total(self, total: int) -> None:
        self.total = total
        if self.progress is not None and self.task is not None:
            self.progress.update(self.task, total=total)

    def advance(self, n: int = 1) -> None:
        self.done += n
        if self.progress is not None and self.task is not None:
            self.progress.advance(self.task, n)
        elif self.log and time.perf_counter() - self.logged >= LOG_EVERY_S:
            self.logged = time.perf_counter()
            size = f"/{self.total}" if self.total is not None else ""
            print(f"{self.description}: {self.done}{size} {self.unit}, {self.logged - self.started:.0f} s",
                  file=sys.stderr, flush=True)


@contextmanager
def phase(description: str, total: int | None = None, unit: str = "") -> Iterator[Phase]:
    """A progress bar (of `total` `unit`s; a spinner when neither is given; `Phase.set_total` sizes it
    later) for the duration of the block."""
    if not _enabled:
        yield Phase(None, None)
        return
    console = Console(stderr=True)
    if not console.is_terminal:
        size = f" ({total} {unit})" if total is not None else ""
        print(f"{description}{size} ...", file=sys.stderr, flush=True)
        current = Phase(None, None, description, total, unit, log=True)
        yield current
        note = f", {current.note}" if current.note else ""
        print(f"{description}: done in {time.perf_counter() - current.started:.1f} s{note}", file=sys.stderr,
              flush=True)
        return
    columns = [SpinnerColumn(), TextColumn("{task.description}")]
    if total is not None or unit:
        columns += [BarColumn(), MofNCompleteColumn(), TextColumn(unit)]
    progress = Progress(*columns, TimeElapsedColumn(), console=console, transient=False)
    with progress:
        task = progress.add_task(description, total=total)
        current = Phase(progress, task, description, total, unit)
        yield current
        if current.total is None:
            progress.update(task, total=1, completed=1)
