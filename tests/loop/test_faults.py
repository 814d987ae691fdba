"""Fault tolerance on a real local Ray cluster (docs/architecture.md): corrupt artifacts, and rollout workers
or the skill-bank actor killed mid-iteration while the loop runs.

The corrupt deliveries come from the ArtifactStore's documented test hook `testing_corrupt_deliveries`
(one flipped bit in the bytes handed out; the run-folder copy and the checksum stay intact). The bank kill
lands inside an update made slow by the SkillBankActor's test hook `testing_delay_next_update`: a tiny bank
update lasts well under a second, too short to hit with a timed kill.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from coplay.config import load_config
from coplay.runs import RunDir
from tests.helpers import DEMO_CONFIG, assert_every_episode_once, tiny_loop_overrides


def _bank_bytes(version: int) -> bytes:
    from coplay.skills.schema import Bank

    return Bank(bank_key="2048", version=version).to_bytes()


def test_corrupt_bank_is_refused_republished_and_stops_the_run_after_three_failures(ray_cluster, tmp_path,
                                                                                       tiny_model_config):
    import ray

    from coplay.actors.artifact_store import ArtifactStore
    from coplay.actors.rollout_worker import RolloutWorker
    from coplay.actors.system import System
    from coplay.artifacts import ArtifactError

    cfg = load_config(DEMO_CONFIG, tiny_loop_overrides(str(tmp_path), tiny_model_config.tiny.cache_dir)
                      + ["engine.backend=hf"])
    run = RunDir.create(tmp_path, "corrupt", cfg.to_yaml())
    store = ArtifactStore.remote(str(run.root))
    worker = RolloutWorker.options(num_cpus=1, max_restarts=0).remote(0, cfg.model_dump(mode="json"), store)
    system = System.attach(cfg, run, store, [worker])
    try:
        for version in (1, 2, 3):
            ray.get(store.publish_bank.remote("2048", version, _bank_bytes(version), version))
        system.sync({}, [], {"2048": 1})
        assert ray.get(worker.loaded.remote())["banks"] == {"2048": 1}

        # one corrupt delivery: the worker refuses it, reports it, and keeps serving v1
        ray.get(store.testing_corrupt_deliveries.remote("bank", "2048", 2, 1))
        report = ray.get(worker.sync.remote([], {"2048": 2}))
        assert [(f.kind, f.name, f.version) for f in report.failed] == [("bank", "2048", 2)]
        assert ray.get(worker.loaded.remote())["banks"] == {"2048": 1}

        # two more: the driver republishes from the run folder and retries until the worker holds v2
        ray.get(store.testing_corrupt_deliveries.remote("bank", "2048", 2, 2))
        system.sync({}, [], {"2048": 2})
        assert ray.get(worker.loaded.remote())["banks"] == {"2048": 2}
        assert ray.get(store.acknowledged_by.remote("bank", "2048", 2)) == {"worker-0": _sha(_bank_bytes(2))}
        assert len(system.take_faults()["refused_artifacts"]) == 2

        # corrupt every time: the third failure stops the run with an error naming the artifact
        ray.get(store.testing_corrupt_deliveries.remote("bank", "2048", 3, 100))
        with pytest.raises(ArtifactError, match=r"bank 2048 v3 failed to load 3 times"):
            system.sync({}, [], {"2048": 3})
        assert ray.get(worker.loaded.remote())["banks"] == {"2048": 2}, "the worker must keep serving v2"
    finally:
        system.shutdown()


def _sha(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------------------------- kill tests

def _kill_when_iteration_one_is_collected(runs: Path, actor_suffix: str, delay_s: float,
                                          killed: list[str]) -> None:
    """Wait for iteration 1's shard (rollouts of 2 and the bank update over 1 start right after), then kill
    the named actor of the run with a restart allowed."""
    import ray

    deadline = time.time() + 900
    while time.time() < deadline:
        shards = list(runs.glob("*/shards/it00001-*.msgpack"))
        if shards:
            time.sleep(delay_s)
            name = f"{shards[0].parent.parent.name}.{actor_suffix}"
            ray.kill(ray.get_actor(name), no_restart=False)
            killed.append(name)
            return
        time.sleep(0.5)


def _kill_bank_inside_an_update(runs: Path, killed: list[str]) -> None:
    """As soon as the run's bank actor exists, make its first `update` sleep (the first update starts within
    milliseconds of iteration 1's shard, too soon to set anything then); wait until the actor stops answering
    `ping` after iteration 1's shard exists (it is inside that update: `submit` takes milliseconds), then kill
    it with a restart allowed."""
    import ray
    from ray.exceptions import GetTimeoutError

    deadline = time.time() + 900
    bank, name = None, ""
    while bank is None and time.time() < deadline:
        for folder in runs.glob("*/"):
            try:
                bank, name = ray.get_actor(f"{folder.name}.bank"), f"{folder.name}.bank"
            except ValueError:  # not created yet
                continue
        time.sleep(0.1)
    if bank is None:
        return
    ray.get(bank.testing_delay_next_update.remote(600.0))
    while not list(runs.glob("*/shards/it00001-*.msgpack")) and time.time() < deadline:
        time.sleep(0.1)  # before that the actor is busy seeding banks: no kill there
    while time.time() < deadline:
        try:
            ray.get(bank.ping.remote(), timeout=2.0)
        except GetTimeoutError:
            ray.kill(bank, no_restart=False)
            killed.append(name)
            return
        time.sleep(0.2)


def _run_with_kill(tmp_path, cache_dir: str, kill: Any, *args: Any) -> tuple[object, RunDir, list[str]]:
    """One tiny loop run while `kill(runs, *args, killed)` runs in a thread."""
    from coplay.loop import train

    cfg = load_config(DEMO_CONFIG, tiny_loop_overrides(str(tmp_path / "runs"), cache_dir)
                      # rollouts long enough to kill into on an idle machine
                      + ["sft.epochs=1", "sft.episodes_per_game=8", "rollout.max_steps=12"])
    killed: list[str] = []
    killer = threading.Thread(target=kill, args=(tmp_path / "runs", *args, killed), daemon=True)
    killer.start()
    run = RunDir.open(train(cfg))
    killer.join(timeout=5)
    return cfg, run, killed


@pytest.mark.slow
def test_killing_the_rollout_worker_mid_iteration_loses_and_duplicates_no_episode(ray_cluster, tmp_path,
                                                                                  tiny_model_config):
    cfg, run, killed = _run_with_kill(tmp_path, tiny_model_config.tiny.cache_dir,
                                      _kill_when_iteration_one_is_collected, "worker-0", 1.5)
    assert killed, "the worker was never killed"
    faults = run.read_metrics()[2]["faults"]
    assert faults.get("rollout_reruns"), f"no rollout chunk was re-run: {faults}"
    assert_every_episode_once(cfg, run)
    final = run.read_metrics()[-1]
    for name, acks in final["acknowledgements"].items():
        assert set(acks) == {"worker-0"}, f"the restarted worker did not acknowledge {name}: {acks}"


@pytest.mark.slow
def test_killing_the_bank_actor_mid_update_reruns_the_update(ray_cluster, tmp_path, tiny_model_config):
    cfg, run, killed = _run_with_kill(tmp_path, tiny_model_config.tiny.cache_dir, _kill_bank_inside_an_update)
    assert killed, "the bank actor was never killed"
    records = run.read_metrics()
    faults = records[2]["faults"]  # the update over iteration 1 runs during iteration 2
    assert faults.get("bank_reruns"), f"the bank update was not rerun: {faults}"
    assert records[2]["bank_versions"] == records[0]["bank_versions"]
    assert records[-1]["final_bank_versions"]["2048"] == records[0]["bank_versions"]["2048"] + 1
    assert_every_episode_once(cfg, run)
