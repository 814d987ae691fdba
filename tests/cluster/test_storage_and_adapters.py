"""Shared storage and adapter traffic on a simulated multi-node cluster (issue 38 items 4 and 5).

`ray.cluster_utils.Cluster` runs a head (the driver's node, with the ArtifactStore) and two more nodes on this
machine, each with its own raylet and object store, so objects between them travel through Ray's object
manager as between machines. One node does not share the run folder: its raylet (and so every actor on it)
has `COPLAY_TESTING_NODE_ROOT` set and sees the filesystem under another root, as a node with other disks
would (coplay/actors/storage_probe.py). The storage check itself is the run's own: real learner-rank, rollout
worker and store actors write and read real files, and the driver reads them back.

The transfer test sends a synthetic 87 MB adapter (the issue's 8B rank-16 figure) from a publisher on one
node through the store on the head to workers on two nodes, by ObjectRef, and prints bytes and seconds
beside the by-value path it replaced (measured, not asserted: no timing asserts).
"""

from __future__ import annotations

import json
import os
import time

import pytest

from coplay.actors.storage_probe import TESTING_NODE_ROOT, SharedStorageError, StorageCheck
from coplay.config import ClusterConfig, load_config
from coplay.runs import RunDir
from coplay.security import ray_init_kwargs

MB = 1_000_000
ADAPTER_BYTES = 87 * MB
STORE_MEMORY = 600 * MB  # each simulated node's object store


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    """Head (driver, store) + a node that shares the run folder + one that does not; torn down after."""
    import ray
    from ray.cluster_utils import Cluster

    other_disk = tmp_path_factory.mktemp("other-disk")
    ray_init_kwargs(ClusterConfig())  # the simulated nodes bind loopback, as a local run does
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False, "resources": {"head": 1},
        "object_store_memory": STORE_MEMORY})
    try:
        shared = cluster.add_node(num_cpus=1, resources={"shared_node": 1}, object_store_memory=STORE_MEMORY)
        unshared = cluster.add_node(num_cpus=1, resources={"unshared_node": 1},
                                    object_store_memory=STORE_MEMORY,
                                    env_vars={TESTING_NODE_ROOT: str(other_disk)})
        ray.init(address=cluster.address, logging_level="ERROR")
        yield {"head": cluster.head_node, "shared": shared, "unshared": unshared, "other_disk": other_disk}
    finally:
        ray.shutdown()
        cluster.shutdown()
        ray_init_kwargs(ClusterConfig(address="auto"))  # undo the loopback pin for later tests


def _on(node_resource: str) -> dict:
    return {"num_cpus": 0, "resources": {node_resource: 0.01}}


@pytest.mark.slow
def test_the_storage_probe_names_the_node_that_does_not_share_the_run_folder(nodes, tmp_path,
                                                                             tiny_model_config):
    import ray

    from coplay.actors.artifact_store import ArtifactStore
    from coplay.actors.learner_group import LearnerRank
    from coplay.actors.rollout_worker import RolloutWorker

    cfg = load_config(None, [f"model.tiny.cache_dir={tiny_model_config.tiny.cache_dir}", "engine.backend=hf",
                             "engine.max_model_len=512"]).model_dump(mode="json")
    run = RunDir.create(tmp_path / "runs", "probe", "{}\n")
    store = ArtifactStore.options(**_on("head")).remote(str(run.root))
    rank0 = LearnerRank.options(**_on("shared_node")).remote(0, 2, cfg)
    rank1 = LearnerRank.options(**_on("unshared_node")).remote(1, 2, cfg)
    worker = RolloutWorker.options(**_on("unshared_node")).remote(0, cfg, store)
    actors = [store, rank0, rank1, worker]
    try:
        check = StorageCheck.for_run(run.root)
        assert check.root == run.root  # three live nodes: the check is on
        good = check.check(check.send({"the artifact store": store, "learner rank 0": rank0}))
        assert {r.node_id for r in good} == {nodes["head"].node_id, nodes["shared"].node_id}
        assert all((run.root / ".storage-probe" / r.file).is_file() for r in good)

        with pytest.raises(SharedStorageError) as stopped:
            check.check(check.send({"learner rank 0": rank0, "learner rank 1": rank1,
                                    "rollout worker 0": worker}))
        line = str(stopped.value)
        print(line)
        assert "\n" not in line and line.startswith("shared storage: learner rank 1 on node ")
        assert nodes["unshared"].node_id[:12] in line and f"does not see the run folder {run.root}" in line
        assert "(also failed: rollout worker 0 on node " in line  # the worker on the same node
        assert "mount the same shared filesystem" in line and "run.out_dir" in line
        local = nodes["other_disk"] / run.root.relative_to(run.root.anchor)
        assert not local.exists()  # nothing is made on that node

        # the same node with a local folder at that path (made by hand, or an earlier local run)
        local.mkdir(parents=True)
        with pytest.raises(SharedStorageError, match="rollout worker 0 on node .* sees another folder"):
            check.check(check.send({"rollout worker 0": worker}))
        check.close()
        assert not (run.root / ".storage-probe").exists()
    finally:
        for actor in actors:
            ray.kill(actor, no_restart=True)


def _plasma_used(node) -> int:
    """Bytes in one node's object store now (its raylet's own statistics)."""
    from ray._private.internal_api import node_stats

    stats = node_stats(node.node_ip_address, node.node_manager_port, include_memory_info=False)
    return int(stats.store_stats.object_store_bytes_used)


@pytest.mark.slow
def test_an_87_mb_adapter_is_put_once_and_pulled_once_per_node(nodes, tmp_path, capsys):
    import ray

    from coplay.actors.adapter_pull import pull_adapter
    from coplay.actors.artifact_store import ArtifactStore
    from coplay.artifacts import AdapterBundle

    @ray.remote(num_cpus=0)
    class Publisher:
        """Learner rank 0's part (`LearnerRankImpl.export_refs`): the bundle put into the object store here,
        once; only its ref leaves."""

        def publish(self, nbytes: int) -> tuple[list, str]:
            files = {"adapter_config.json": json.dumps({"r": 16, "synthetic": True}).encode(),
                     "adapter_model.safetensors": os.urandom(nbytes)}
            bundle = AdapterBundle.of(files)
            return [ray.put(bundle)], bundle.sha256

    @ray.remote(num_cpus=0)
    class Puller:
        """A rollout worker's pull (`RolloutWorkerImpl.sync` calls the same `pull_adapter`)."""

        def by_ref(self, store, adapter: str, version: int) -> dict:
            bundle, record, stats = pull_adapter(store, adapter, version)
            return {"bytes": stats.nbytes, "seconds": round(stats.seconds, 3), "resealed": stats.resealed,
                    "checksum_ok": bundle.sha256 == record.sha256}

        def by_value(self, store, adapter: str, version: int) -> dict:
            """The path before: the store serialized the bundle into each worker's reply."""
            started = time.perf_counter()
            bundle, _ = ray.get(store.get_adapter.remote(adapter, version))
            return {"bytes": sum(len(b) for b in bundle.files.values()),
                    "seconds": round(time.perf_counter() - started, 3)}

        def delivered_object(self, store, adapter: str, version: int) -> str:
            return ray.get(store.adapter_ref.remote(adapter, version)).ref.hex()

    run = RunDir.create(tmp_path / "runs", "traffic", "{}\n")
    store = ArtifactStore.options(**_on("head")).remote(str(run.root), 1 << 30)
    publisher = Publisher.options(**_on("shared_node")).remote()
    pullers = {"unshared-a": Puller.options(**_on("unshared_node")).remote(),
               "unshared-b": Puller.options(**_on("unshared_node")).remote(),
               "shared": Puller.options(**_on("shared_node")).remote()}
    nodes_by_name = {"head": nodes["head"], "shared": nodes["shared"], "unshared": nodes["unshared"]}
    try:
        started = time.perf_counter()
        refs, sha = ray.get(publisher.publish.remote(ADAPTER_BYTES))
        put_s = time.perf_counter() - started
        record = ray.get(store.publish_adapter_ref.remote("act", 1, refs, sha, 1))
        publish_s = time.perf_counter() - started - put_s
        ray.get(store.set_serving.remote([("act", 1)], {}))
        before = {name: _plasma_used(node) for name, node in nodes_by_name.items()}
        by_ref = {}
        for name, puller in pullers.items():  # one at a time: each pull's seconds are its own
            by_ref[name] = ray.get(puller.by_ref.remote(store, "act", 1), timeout=300)
        after_ref = {name: _plasma_used(node) for name, node in nodes_by_name.items()}
        delivered = {ray.get(p.delivered_object.remote(store, "act", 1)) for p in pullers.values()}
        memory = ray.get(store.memory.remote())
        by_value = {name: ray.get(p.by_value.remote(store, "act", 1), timeout=300)
                    for name, p in pullers.items()}

        # the owner of the put (the publisher, as learner rank 0 would be) dies: the next pull gets the
        # version put anew by the store from its run-folder copy, counted
        ray.kill(publisher, no_restart=True)
        late = Puller.options(**_on("shared_node")).remote()
        after_owner_died = ray.get(late.by_ref.remote(store, "act", 1), timeout=300)
        memory_after = ray.get(store.memory.remote())
    finally:
        for actor in [store, publisher, *pullers.values(), *([late] if "late" in locals() else [])]:
            ray.kill(actor, no_restart=True)

    growth = {name: after_ref[name] - before[name] for name in before}
    measured = {"adapter_bytes": ADAPTER_BYTES + len(b'{"r": 16, "synthetic": true}'),
                "put_s": round(put_s, 3), "publish_s": round(publish_s, 3),
                "by_ref": by_ref, "by_value": by_value, "store_puts": memory["puts"],
                "store_held_bytes": memory["held_bytes"], "object_store_growth_bytes_during_pulls": growth,
                "after_owner_died": after_owner_died, "store_after_owner_died": memory_after}
    with capsys.disabled():
        print("\n" + json.dumps({"adapter_traffic_87mb_simulated_3_nodes": measured}))
    assert record.version == 1 and record.sha256 == sha
    for pulled in by_ref.values():
        assert pulled["bytes"] >= ADAPTER_BYTES and pulled["checksum_ok"] and not pulled["resealed"]
    assert delivered == {refs[0].hex()}  # every worker got the publisher's object: put once
    assert memory["puts"] == 0 and memory["held_bytes"] >= ADAPTER_BYTES  # the store never put it again
    # two workers on the unshared node pulled it, their node's store took one copy (no timing asserted)
    assert ADAPTER_BYTES <= growth["unshared"] < 1.5 * ADAPTER_BYTES
    assert after_owner_died["resealed"] == 1 and after_owner_died["checksum_ok"]
    assert memory_after["reseals"] == 1 and memory_after["puts"] == 1
