"""Ctrl-C ends a command within a bounded time even when its shutdown hangs (coplay.driver.interrupt): a
real process whose cleanup never returns, or whose main thread never runs the handler, is stopped by force
after the grace period, or at once on a second Ctrl-C; its child processes are killed, the stacks land in
the run's error.log and the last line names the folder to resume."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil

_SCRIPT = textwrap.dedent("""
    import signal, subprocess, sys, time
    from pathlib import Path
    from coplay.driver import interrupt

    interrupt.STOP_GRACE_S = {grace}
    root = Path(sys.argv[1])
    if {slow_watcher}:  # as on a loaded machine: the main thread sees a second signal before the watcher
        arm = interrupt._arm
        interrupt._arm = lambda signum: (time.sleep(3.0), arm(signum))

    def start():
        interrupt.note_run_folder(root)
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        try:  # the test signals once it reads this line: the line is printed inside the try
            print("child", child.pid, flush=True)
            while True:
                time.sleep(0.1)
        finally:
            while True:  # a cleanup that never returns (a lock a signal left held)
                time.sleep(0.1)

    with interrupt.bounded_stop("coplay train"):
        if {mute}:  # as if the main thread were blocked in native code: Python's handler never runs
            signal.signal(signal.SIGINT, lambda *_: None)
        start()
""")


def _start(tmp_path: Path, grace: float, mute: bool = False,
           slow_watcher: bool = False) -> tuple[subprocess.Popen, int]:
    root = tmp_path / "run-1"
    root.mkdir()
    script = _SCRIPT.format(grace=grace, mute=mute, slow_watcher=slow_watcher)
    proc = subprocess.Popen([sys.executable, "-c", script, str(root)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.startswith("child"), line + proc.stderr.read()
    return proc, int(line.split()[1])


def _check_stopped(proc: subprocess.Popen, child: int, tmp_path: Path, reason: str,
                   hung_in: str = "") -> None:
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("coplay train: stopped") and reason in last, err
    assert f"coplay train --resume {tmp_path / 'run-1'}" in last
    assert "Traceback" not in err
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE
    stacks = (tmp_path / "run-1" / "error.log").read_text()
    assert "most recent call first" in stacks and f"in {hung_in}" in stacks  # where the shutdown hung


def test_a_hung_shutdown_is_stopped_by_force_after_the_grace_period(tmp_path):
    proc, child = _start(tmp_path, grace=2.0)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _check_stopped(proc, child, tmp_path, "did not finish within 2 s", hung_in="start")
    assert time.monotonic() - sent < 20


def test_a_second_ctrl_c_stops_at_once(tmp_path):
    proc, child = _start(tmp_path, grace=600.0)
    proc.send_signal(signal.SIGINT)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    _check_stopped(proc, child, tmp_path, "a second Ctrl-C or SIGTERM")


def test_a_second_signal_the_main_thread_sees_first_still_kills_the_children(tmp_path):
    proc, child = _start(tmp_path, grace=600.0, slow_watcher=True)
    proc.send_signal(signal.SIGINT)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)  # reaches the main thread's handler before the watcher arms anything
    _check_stopped(proc, child, tmp_path, "a second Ctrl-C or SIGTERM")


def test_the_bound_holds_when_the_main_thread_never_handles_the_signal(tmp_path):
    proc, child = _start(tmp_path, grace=2.0, mute=True)
    proc.send_signal(signal.SIGINT)
    _check_stopped(proc, child, tmp_path, "did not finish within 2 s", hung_in="start")
