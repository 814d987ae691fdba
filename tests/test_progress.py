"""What a user sees during long phases (issue 20, item 2): each phase says when it starts and ends (a rich
bar on a terminal), and vLLM's INFO chatter is held back unless `logging.verbose`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
