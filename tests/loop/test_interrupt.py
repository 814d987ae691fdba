"""Ctrl-C during a run (issue 20, item 1): a real `coplay train` process gets SIGINT while its cold-start
SFT runs; it ends within 30 s with one line saying the folder is resumable, leaves no process of its own
behind, and `--resume` accepts the folder (it has no checkpoint yet, so the run starts over in it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from coplay.config import load_config
from coplay.driver.preflight import resume_point
from coplay.runs import RunDir
from tests.helpers import DEMO_CONFIG, tiny_loop_overrides

REPO = Path(__file__).resolve().parents[2]


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def test_sigint_during_sft_stops_within_30_s_and_leaves_a_resumable_folder(tmp_path, tiny_model_config):
    overrides = [*tiny_loop_overrides(str(tmp_path), tiny_model_config.tiny.cache_dir),
                 "logging.console=true", "sft.epochs=50", "cluster.num_cpus=2"]
    proc = subprocess.Popen([sys.executable, "-m", "coplay.cli", "train", "--config", str(DEMO_CONFIG),
                             *overrides], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 600
        for line in proc.stderr:
            seen.append(line)
            if "cold start: SFT" in line or time.monotonic() > deadline:
                break
        assert any("cold start: SFT" in s for s in seen), "".join(seen[-20:])
        time.sleep(3)  # inside the SFT call on the learner actor
        children = _descendants(proc.pid)
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        _, err = proc.communicate(timeout=60)
        elapsed = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert elapsed < 30, f"took {elapsed:.1f} s to stop"
    assert proc.returncode == 130, err[-3000:]
    last = [ln for ln in err.splitlines() if ln.strip()][-1]
    assert last.startswith("coplay train: stopped") and "coplay train --resume" in last, err[-3000:]
    assert "Traceback" not in err
    time.sleep(5)
    alive = [p for p in children if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"left running: {[(p.pid, p.name()) for p in alive]}"

    (folder,) = [p for p in tmp_path.iterdir() if p.is_dir() and p.name.startswith("loop-test")]
    run = RunDir.open(folder)
    point = resume_point(run, load_config(run.config_path))
    assert point.checkpoint is None  # resumable: `--resume` starts it over in the same folder
