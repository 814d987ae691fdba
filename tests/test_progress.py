"""What a user sees during long phases (issue 20, item 2): each phase says when it starts and ends (a rich
bar on a terminal), and vLLM's INFO chatter is held back unless `logging.verbose`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_play_and_eval_announce_their_episodes(tmp_path):
    play = subprocess.run([sys.executable, "-m", "coplay.cli", "play", "--game", "2048", "--episodes", "3",
                           "--max-steps", "2"], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert play.returncode == 0, play.stderr
    assert "play 2048: expert (3 episodes) ..." in play.stderr and "play 2048: expert: done in" in play.stderr
    ev = subprocess.run([sys.executable, "-m", "coplay.cli", "eval", "--policy", "random", "--games", "2048",
                         "--episodes", "2", "--max-steps", "2", "--out", str(tmp_path)],
                        capture_output=True, text=True, timeout=120, cwd=REPO)
    assert ev.returncode == 0, ev.stderr
    assert "evaluate random (2 episodes) ..." in ev.stderr and "evaluate random: done in" in ev.stderr
    quiet = subprocess.run([sys.executable, "-m", "coplay.cli", "play", "--game", "2048", "--episodes", "1",
                            "--max-steps", "1", "logging.console=false"], capture_output=True, text=True,
                           timeout=120, cwd=REPO)
    assert quiet.returncode == 0 and "play 2048" not in quiet.stderr


def _vllm_level(verbose: bool) -> int:
    code = ("import logging; from coplay.driver.progress import quiet_third_party; "
            f"quiet_third_party({verbose}); import vllm.logger; "
            "print(logging.getLogger('vllm').getEffectiveLevel())")
    env = {k: v for k, v in __import__("os").environ.items() if k != "VLLM_LOGGING_LEVEL"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
                          cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.strip().splitlines()[-1])


def test_vllm_logs_warnings_only_unless_verbose():
    assert _vllm_level(False) == 30
    assert _vllm_level(True) == 20


def _child_stderr(verbose: bool) -> str:
    """What a Python process started after `quiet_third_party(verbose)` prints when it touches torch's
    deprecated `reduce_op` the way vLLM's kernel dispatcher does in every rollout worker."""
    code = ("import os, subprocess, sys; from coplay.driver.progress import quiet_third_party; "
            f"quiet_third_party({verbose}); "
            "sys.exit(subprocess.run([sys.executable, '-c', 'import torch.distributed as d; "
            "hasattr(d.reduce_op, \"__dict__\")']).returncode)")
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTHONWARNINGS"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
                          cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stderr


def test_other_libraries_deprecation_warnings_are_held_back_in_the_processes_a_run_starts():
    """Issue 41 item 3: `make demo` printed torch FutureWarnings that vLLM's and DeepSpeed's own calls raise
    in the actors; they are filtered by message in every process started after the console is set up, and
    shown again with `logging.verbose`."""
    assert "FutureWarning" not in _child_stderr(False)
    assert "`torch.distributed.reduce_op` is deprecated" in _child_stderr(True)


def test_transformers_loading_bars_are_off_in_the_processes_a_run_starts():
    code = ("import subprocess, sys; from coplay.driver.progress import quiet_third_party; "
            "quiet_third_party(sys.argv[1] == 'verbose'); "
            "subprocess.run([sys.executable, '-c', 'import transformers.utils.logging as t; "
            "print(t.is_progress_bar_enabled())'])")
    env = {k: v for k, v in __import__("os").environ.items() if k != "HF_HUB_DISABLE_PROGRESS_BARS"}
    for mode, shown in (("quiet", "False"), ("verbose", "True")):
        done = subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True, timeout=120,
                              env=env, cwd=REPO)
        assert done.stdout.strip().splitlines()[-1] == shown, (mode, done.stderr[-1000:])


def test_a_long_phase_in_a_log_reports_its_count_while_it_runs(monkeypatch, capsys):
    """Without a terminal (`ray job logs`, a file) a sized phase prints a count line while it advances,
    not only its start and end lines: the cold-start SFT of a real model runs for minutes."""
    from coplay.driver import progress

    monkeypatch.setattr(progress, "LOG_EVERY_S", 0.0)
    progress.set_enabled(True)
    with progress.phase("cold start: SFT of 9 examples", unit="batches") as bar:
        bar.set_total(3)
        bar.advance(2)
        bar.advance()
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "cold start: SFT of 9 examples ..."
    assert err[1].startswith("cold start: SFT of 9 examples: 2/3 batches, ")
    assert err[2].startswith("cold start: SFT of 9 examples: 3/3 batches, ")
    assert err[3].startswith("cold start: SFT of 9 examples: done in ")


class Ticks:
    """A clock that moves only when told: the console's seconds become exact numbers."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def fake_console(monkeypatch):
    """Progress on, in log mode (stderr captured), on a fake clock, with `tick` called by the test alone."""
    from coplay.driver import progress

    ticks = Ticks()
    monkeypatch.setattr(progress, "clock", ticks)
    monkeypatch.setattr(progress, "background", False)
    progress.set_enabled(True)
    yield progress, ticks
    progress.close_all()


def _run_for(progress, ticks, seconds: int) -> None:
    for _ in range(seconds):  # what the background thread does, once a second
        ticks.t += 1.0
        progress.tick()


def test_overlapping_phases_each_report_their_own_time_and_a_long_wait_is_never_silent(fake_console, capsys):
    """Issue 41 item 2: the rollouts of iteration 2 and the bank update over iteration 1 run while the GRPO
    step runs; each says when it starts, each ends with its own time (the workers' 60 s, the bank actor's
    81.7 s), not the 0.0 s the driver waited once it got to them, and the console names them at least every
    `HEARTBEAT_S` while the driver is busy elsewhere."""
    progress, ticks = fake_console
    rollouts_done: list[tuple[float, str]] = []
    rollouts = progress.begin("iteration 2: rollouts", 4, "episode seats",
                              poll=lambda: rollouts_done[0] if rollouts_done else None)
    bank = progress.begin("bank update over iteration 1")
    with progress.phase("GRPO step 1 on the samples of iteration 1") as step:
        _run_for(progress, ticks, 48)
        step.note = "12 samples"
    _run_for(progress, ticks, 12)
    rollouts_done.append((60.0, "320 steps"))  # the workers finish at 60 s by their own clocks
    _run_for(progress, ticks, 1)
    _run_for(progress, ticks, 32)
    assert rollouts.end(0.0) == 60.0  # collected later: the first report stands
    bank.end(81.7, "collected 93.0 s after its start")
    err = capsys.readouterr().err.splitlines()
    assert err[:3] == ["iteration 2: rollouts (4 episode seats) ...", "bank update over iteration 1 ...",
                       "GRPO step 1 on the samples of iteration 1 ..."]
    assert "GRPO step 1 on the samples of iteration 1: done in 48.0 s, 12 samples" in err
    assert "iteration 2: rollouts: done in 60.0 s, 320 steps" in err
    assert err[-1] == "bank update over iteration 1: done in 81.7 s, collected 93.0 s after its start"
    beats = [line for line in err if line.startswith("still running: ")]
    assert beats[0] == ("still running: iteration 2: rollouts (15 s, 0/4 episode seats); bank update over "
                        "iteration 1 (15 s); GRPO step 1 on the samples of iteration 1 (15 s)")
    # at 15, 30 and 45 s; then 15 and 30 s after the rollouts' end line at 61 s, no longer naming them
    assert len(beats) == 5 and not any("rollouts" in line for line in beats[3:])


def test_a_phase_longer_than_the_heartbeat_never_leaves_the_log_silent(fake_console, capsys):
    progress, ticks = fake_console
    printed: list[float] = []
    with progress.phase("checkpoint after iteration 3"):
        for _ in range(92):
            ticks.t += 1.0
            if progress.tick() is not None:
                printed.append(ticks.t)
    gaps = [b - a for a, b in zip([1000.0, *printed], [*printed, ticks.t], strict=True)]
    assert max(gaps) <= progress.HEARTBEAT_S
    assert capsys.readouterr().err.splitlines()[-1] == "checkpoint after iteration 3: done in 92.0 s"


def test_a_quiet_phase_shows_only_once_it_lasts(fake_console, capsys):
    """A sync is usually a second: it prints nothing then; one that hangs is named and ends with a line."""
    progress, ticks = fake_console
    with progress.phase("sync: 5 adapter versions and 1 banks to the workers", quiet=True):
        _run_for(progress, ticks, 2)
    assert capsys.readouterr().err == ""
    with progress.phase("sync: 5 adapter versions and 1 banks to the workers", quiet=True):
        _run_for(progress, ticks, 20)
    assert capsys.readouterr().err.splitlines() == [
        "still running: sync: 5 adapter versions and 1 banks to the workers (15 s)",
        "sync: 5 adapter versions and 1 banks to the workers: done in 20.0 s"]


def test_a_failed_phase_ends_without_a_done_line_and_stops_being_named(fake_console, capsys):
    progress, ticks = fake_console
    with pytest.raises(RuntimeError), progress.phase("iteration 1: evaluation"):
        ticks.t += 3.0
        raise RuntimeError("worker died")
    _run_for(progress, ticks, 30)
    assert capsys.readouterr().err.splitlines() == ["iteration 1: evaluation ..."]
