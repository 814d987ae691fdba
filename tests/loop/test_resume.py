"""`coplay train --resume RUN_DIR` after killing the driver (docs/architecture.md): with staleness 0 the
resumed run's adapters equal an uninterrupted run's bit for bit; with staleness 1 every episode enters
training exactly once across the kill. The driver is a real `coplay train` process, killed with SIGKILL once
a checkpoint exists; the continuation runs on this test's local cluster.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coplay.config import load_config
from coplay.runs import RunDir
from tests.helpers import DEMO_CONFIG, assert_every_episode_once, tiny_loop_overrides


def _overrides(runs: Path, cache_dir: str, extra: list[str], short_sft: bool = True) -> list[str]:
    """The tiny loop; `short_sft=False` keeps its full cold start, whose policy has reward variance, so the
    GRPO steps really change the adapters."""
    short = ["sft.epochs=1", "sft.episodes_per_game=8"] if short_sft else []
    return tiny_loop_overrides(str(runs), cache_dir) + short + extra


def _train_and_kill_after_checkpoint(runs: Path, overrides: list[str], step: int) -> Path:
    """Run `coplay train` in its own process; SIGKILL it as soon as `checkpoints/step-<step>` is complete."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-m", "coplay.cli", "train", "--config", str(DEMO_CONFIG),
                             *overrides], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 900
        while time.time() < deadline and proc.poll() is None:
            done = list(runs.glob(f"*/checkpoints/step-{step}/state.json"))
            if done:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
                return done[0].parents[2]
            time.sleep(0.2)
        raise AssertionError(f"`coplay train` ended (rc {proc.poll()}) before checkpoint step-{step} "
                             f"appeared")
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def _adapter_shas(run: RunDir) -> dict[str, str]:
    return {f"{m.parent.parent.name}@{m.parent.name}": json.loads(m.read_text())["sha256"]
            for m in sorted(run.root.glob("adapters/*/v*/manifest.json"))}


def _weights_sha(run: RunDir, name: str) -> str:
    import hashlib

    adapter, version = name.split("@")
    return hashlib.sha256((run.root / "adapters" / adapter / version / "adapter_model.safetensors")
                          .read_bytes()).hexdigest()


@pytest.mark.slow
def test_resume_with_staleness_0_reproduces_the_uninterrupted_adapters_bit_exactly(ray_cluster, tmp_path,
                                                                                  tiny_model_config):
    from coplay.loop import train

    extra = ["loop.staleness=0", "loop.checkpoint_every=1", "loop.iterations=2"]
    cache = tiny_model_config.tiny.cache_dir
    whole = RunDir.open(train(load_config(DEMO_CONFIG, _overrides(tmp_path / "whole", cache, extra,
                                                                  short_sft=False))))
    steps = [r["train"] for r in whole.read_metrics() if r.get("train")]
    assert len(steps) == 2 and steps[-1]["nonzero_advantages"], \
        (f"learner step 2 (after the resume point) must change the adapters for this test to mean "
         f"anything: {steps}")

    killed_runs = tmp_path / "killed"
    folder = _train_and_kill_after_checkpoint(killed_runs,
                                              _overrides(killed_runs, cache, extra, short_sft=False),
                                              step=1)
    cfg = load_config(folder / "config.yaml")
    resumed = RunDir.open(train(cfg, resume=folder))

    assert any("resumed_from" in r for r in resumed.read_metrics())
    expected, got = _adapter_shas(whole), _adapter_shas(resumed)
    assert set(got) == set(expected)
    differing = sorted(k for k in expected if expected[k] != got[k])
    weights = sorted(k for k in differing if _weights_sha(whole, k) != _weights_sha(resumed, k))
    assert not differing, f"adapters that differ from the uninterrupted run: {differing} (weights: {weights})"
    assert whole.read_metrics()[-1]["final_versions"] == resumed.read_metrics()[-1]["final_versions"]


@pytest.mark.slow
def test_resume_with_staleness_1_trains_every_episode_exactly_once(ray_cluster, tmp_path, tiny_model_config):
    from coplay.loop import train

    extra = ["loop.staleness=1", "loop.checkpoint_every=2", "loop.iterations=3"]
    runs = tmp_path / "runs"
    folder = _train_and_kill_after_checkpoint(runs, _overrides(runs, tiny_model_config.tiny.cache_dir, extra),
                                              step=2)
    cfg = load_config(folder / "config.yaml")
    run = RunDir.open(train(cfg, resume=folder))

    records = run.read_metrics()
    marker = next(i for i, r in enumerate(records) if "resumed_from" in r)
    assert records[marker]["learner_step"] == 1, \
        "the checkpoint after iteration 2 holds learner step 1 (s = 1)"
    before = [r["train"]["trained_iteration"] for r in records[:marker] if r.get("train")]
    after = [(r.get("train") or r.get("final_train"))["trained_iteration"] for r in records[marker:]
             if r.get("train") or r.get("final_train")]
    assert 1 in before and after == [2, 3], (before, after)
    assert_every_episode_once(cfg, run)


def test_a_folder_stopped_before_its_first_checkpoint_is_started_over_in_place(tmp_path):
    """Stopped during the cold start: `--resume` starts the run again in the same folder, clearing what the
    stopped attempt published (versions are never overwritten, so they must go) and keeping its config and
    metrics."""
    from coplay.driver.preflight import restart_in_place, resume_point

    run = RunDir.create(tmp_path, "no-ckpt", load_config().to_yaml())
    (run.root / "adapters" / "act" / "v0").mkdir(parents=True)
    (run.root / "checkpoints" / ".step-1.tmp-1").mkdir()
    run.append_metrics({"iteration": 0, "cold_start": {}})
    assert resume_point(run, load_config(run.config_path)).checkpoint is None
    restart_in_place(run)
    assert not any((run.root / "adapters").iterdir()) and not any((run.root / "checkpoints").iterdir())
    assert run.read_metrics() == [{"iteration": 0, "cold_start": {}}] and run.config_path.is_file()


def test_resume_of_a_missing_folder_fails_with_one_line(tmp_path, capsys):
    from coplay.cli import main

    assert main(["train", "--resume", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(tmp_path / "missing") in err
