"""ArtifactStore faults and memory on a real local Ray cluster (issue 18 part 2): a killed store restarts with
its ledger rebuilt from the run folder and its serving set, so later pulls succeed; over 20 published
versions what it holds stays within the serving set plus the byte window `cluster.store_window_mb` (issue 38
item 5; measured: payload bytes held, and the object store's own byte count against an unbounded store in
the same run: the difference is the payloads the window let go)."""

from __future__ import annotations

import json
import os

from coplay.artifacts import bundle_sha256
from coplay.runs import RunDir

MB = 1 << 20


def _files(version: int, size: int = 64) -> dict[str, bytes]:
    return {"adapter_config.json": json.dumps({"r": 8, "v": version}).encode(),
            "adapter_model.safetensors": os.urandom(size)}


def _wait_for_new_incarnation(actor, old_pid: int, timeout_s: float = 120.0) -> None:
    """Until the restarted actor answers from a new process (the kill is asynchronous)."""
    import time

    import ray
    from ray.exceptions import ActorUnavailableError, RayActorError

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if ray.get(actor.pid.remote(), timeout=30) != old_pid:
                return
        except (ActorUnavailableError, RayActorError):
            pass
        time.sleep(0.5)
    raise TimeoutError(f"the actor did not come back within {timeout_s} s")


def test_a_killed_store_restarts_with_every_version_and_the_serving_set(ray_cluster, tmp_path):
    import ray

    from coplay.actors.artifact_store import ArtifactStore

    run = RunDir.create(tmp_path, "store", "{}\n")
    store = ArtifactStore.remote(str(run.root), 2 * 200)  # a window of about two of these versions
    published = {}
    for v in range(1, 6):
        published[v] = _files(v)
        ray.get(store.publish_adapter.remote("act", v, published[v], bundle_sha256(published[v]), v))
    ray.get(store.publish_bank.remote("avalon/good", 1, b'{"skills": []}', 1))
    ray.get(store.set_serving.remote([("act", 5), ("act", 2)], {"avalon/good": 1}))
    try:
        old_pid = ray.get(store.pid.remote())
        ray.kill(store, no_restart=False)
        _wait_for_new_incarnation(store, old_pid)
        memory = ray.get(store.memory.remote())
        assert memory["restarted"] == 1 and memory["versions"] == 6
        assert ray.get(store.serving.remote()) == ([("act", 5), ("act", 2)], {"avalon/good": 1})
        for v in range(1, 6):  # every later pull succeeds, with the published bytes
            bundle, record = ray.get(store.get_adapter.remote("act", v))
            assert bundle.files == published[v] and record.version == v
        data, _ = ray.get(store.get_bank.remote("avalon/good", 1))
        ray.get(store.acknowledge.remote("worker-0", "adapter", "act", 5, bundle_sha256(published[5])))
        assert data == b'{"skills": []}'
        new = _files(6)  # and publishing goes on where it stopped
        assert ray.get(store.publish_adapter.remote("act", 6, new, bundle_sha256(new), 6)).version == 6
    finally:
        ray.kill(store, no_restart=True)


def _object_store_bytes() -> int:
    """Bytes in this (one-node) cluster's object store now, from its raylet's statistics."""
    import ray
    from ray._private.internal_api import node_stats

    (node,) = [n for n in ray.nodes() if n["Alive"]]
    stats = node_stats(node["NodeManagerAddress"], node["NodeManagerPort"], include_memory_info=False)
    return int(stats.store_stats.object_store_bytes_used)


def _settled_object_store_bytes(at_most: int, timeout_s: float = 30.0) -> int:
    """The object store's bytes once a killed store's objects are freed (asynchronous), or after timeout."""
    import time

    deadline = time.monotonic() + timeout_s
    used = _object_store_bytes()
    while used > at_most and time.monotonic() < deadline:
        time.sleep(0.5)
        used = _object_store_bytes()
    return used


def test_store_memory_over_20_versions_stays_within_the_window(ray_cluster, tmp_path, capsys):
    import psutil
    import ray

    from coplay.actors.artifact_store import ArtifactStore

    size, window = 2 * MB, 2
    # Adapters are held in Ray's object store (put once, pulled by reference), so what the window saves is
    # object-store bytes, read from the raylet's own statistics. The store process's private memory (USS)
    # is printed, not compared: the object store's pages it wrote count there and stay mapped after a
    # free. A fixed mmap threshold keeps each 2 MiB argument its own mapping, returned when freed.
    fixed_mmap = {"env_vars": {"MALLOC_MMAP_THRESHOLD_": str(128 * 1024)}}
    measured = {}
    baseline = _object_store_bytes()
    for name, window_bytes in (("windowed", window * (size + 100)), ("unbounded", 64 * MB)):
        run = RunDir.create(tmp_path, name, "{}\n")
        store = ArtifactStore.options(runtime_env=fixed_mmap).remote(str(run.root), window_bytes)
        try:
            proc = psutil.Process(ray.get(store.pid.remote()))
            before, objects_before = proc.memory_full_info().uss, _settled_object_store_bytes(baseline + MB)
            for v in range(1, 21):
                files = _files(v, size)
                ray.get(store.publish_adapter.remote("act", v, files, bundle_sha256(files), v))
                ray.get(store.set_serving.remote([("act", v), ("act", 1)], {}))  # current + a frozen one
            # a version the window let go is freed by Ray asynchronously (its owner's reference count reaches
            # zero after the call returns); in a busy session that took longer than the reads above
            settled = (window + 3) * size if name == "windowed" else 0
            objects = (_settled_object_store_bytes(objects_before + settled) if settled
                       else _object_store_bytes()) - objects_before
            measured[name] = {**ray.get(store.memory.remote()),
                              "uss_growth_mb": round((proc.memory_full_info().uss - before) / MB, 1),
                              "object_store_growth_mb": round(objects / MB, 1)}
        finally:
            ray.kill(store, no_restart=True)
    with capsys.disabled():
        print(json.dumps({"store_memory_20_versions_of_2_mb": measured}))
    windowed, unbounded = measured["windowed"], measured["unbounded"]
    assert windowed["held_versions"] <= window + 2 and windowed["held_bytes"] <= (window + 2) * (size + 100)
    assert unbounded["held_versions"] == 20 and windowed["puts"] == unbounded["puts"] == 20
    # the object store holds what the store holds: the window saves the payloads of the versions it let go
    # (16 of 20 here), read back from the run folder on demand
    expected_saving_mb = (20 - (window + 2)) * size / MB
    saved_mb = unbounded["object_store_growth_mb"] - windowed["object_store_growth_mb"]
    assert saved_mb >= 0.75 * expected_saving_mb
