"""Ctrl-C and SIGTERM end a training command within a bounded time.

The first signal raises `KeyboardInterrupt` in the driver, which shuts the run's actors and Ray down and
prints one line saying the folder is resumable (`coplay.loop.train`, `coplay.driver.preflight.run_stopped`).
That shutdown talks to Ray; if it does not finish within `STOP_GRACE_S` of the signal (a signal that landed
inside Ray's client code can leave a lock held; a driver blocked in native code never runs Python's handler
at all), or the user presses Ctrl-C again, the driver stops by force: it writes
every thread's stack to `<run>/error.log` (to stderr before a run folder exists), kills its own child
processes (the local Ray cluster it started, with its workers and engines), prints the same kind of one
line and exits with 130. Nothing of the run folder is lost: what a checkpoint holds was written before.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

STOP_GRACE_S = 20.0

_state: dict[str, object] = {"command": "coplay", "run_root": None, "timer": None, "raised": False}
_forcing = threading.Lock()  # held by the one thread that runs the forced stop


def note_run_folder(root: Path) -> None:
    """The run folder a forced stop names for `--resume` and writes the stacks into."""
    _state["run_root"] = Path(root)


def _stop_by_force(reason: str) -> None:
    """Stacks to the run's error.log, child processes killed, one line, exit 130 (no cleanup runs). The
    watcher thread and the main thread's handler can both get here on a second signal: the first one stops
    the process, the other waits for its exit."""
    if not _forcing.acquire(blocking=False):
        threading.Event().wait()  # the other thread ends the process with os._exit
    import psutil

    from coplay.driver.preflight import resume_line

    root = _state["run_root"]
    command = _state["command"]
    where = "stderr"
    try:
        if isinstance(root, Path) and root.is_dir():
            with open(root / "error.log", "a") as log:
                log.write(f"{command}: {reason}; every thread's stack:\n")
                log.flush()
                faulthandler.dump_traceback(file=log, all_threads=True)
            where = str(root / "error.log")
        else:
            print(f"{command}: {reason}; every thread's stack:", file=sys.stderr, flush=True)
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    except OSError as exc:  # a full disk must not keep the run from stopping
        print(f"{command}: could not write the stacks ({exc})", file=sys.stderr)
    children = psutil.Process().children(recursive=True)
    for child in children:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(children, timeout=5)
    resume = resume_line(root) if isinstance(root, Path) else "no run folder was created"
    print(f"{command}: stopped (Ctrl-C or SIGTERM); {reason}, so its {len(children)} child processes were "
          f"killed (stacks in {where}); {resume}", file=sys.stderr, flush=True)
    os._exit(130)


def _arm(signum: int) -> None:
    """Per signal: the first one starts the grace timer, a second one stops by force now."""
    if _state["timer"] is not None:
        _stop_by_force(f"a second Ctrl-C or SIGTERM (signal {signum}) arrived during the shutdown")
        return
    timer = threading.Timer(STOP_GRACE_S, _stop_by_force,
                            args=(f"the shutdown did not finish within {STOP_GRACE_S:.0f} s",))
    timer.daemon = True
    _state["timer"] = timer
    timer.start()


def _watch(read_fd: int) -> None:
    """Python runs a signal handler only when the main thread next executes bytecode; a driver blocked in
    native code (a Ray call) would never arm the timer. The C-level handler writes each signal's number to
    the wakeup pipe at once, and this thread arms the timer from there."""
    while True:
        try:
            data = os.read(read_fd, 64)
        except OSError:
            return
        if not data:
            return
        for signum in data:
            if signum in (signal.SIGINT, signal.SIGTERM):
                _arm(signum)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    """In the main thread: the first signal starts the shutdown from here (the watcher thread arms the
    timer). A later one must not raise again: a second `KeyboardInterrupt` would cut the shutdown short and
    end the process with its child processes still running (on a loaded machine it can reach the main thread
    before the watcher has acted), so it stops by force from here."""
    if not _state["raised"]:
        _state["raised"] = True
        raise KeyboardInterrupt(f"signal {signum}")
    _stop_by_force(f"a second Ctrl-C or SIGTERM (signal {signum}) arrived during the shutdown")


@contextmanager
def bounded_stop(command: str) -> Iterator[None]:
    """SIGINT and SIGTERM stop `command` as above while the block runs (main thread only); the previous
    handlers and wakeup fd come back afterwards and a pending grace timer is cancelled once the block has
    ended (the shutdown finished in time)."""
    _state.update(command=command, run_root=None, timer=None, raised=False)
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    previous_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    watcher = threading.Thread(target=_watch, args=(read_fd,), name="coplay-stop-watcher", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        signal.set_wakeup_fd(previous_fd)
        os.close(write_fd)  # the watcher reads end-of-file and returns
        watcher.join(timeout=5)
        os.close(read_fd)
        timer = _state["timer"]
        if isinstance(timer, threading.Timer):
            timer.cancel()
        _state["timer"] = None
        _state["raised"] = False
