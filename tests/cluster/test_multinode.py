"""A simulated multi-node cluster (issue 18): `ray.cluster_utils.Cluster` on this machine, a head that offers
no learner or rollout resource (the driver's node, like a head without GPUs) and two more nodes; custom
resources place the learner rank on one and the rollout worker on the other; two iterations complete, and the
learner's process group formed at the address and port its rank 0 reported on its own node. The simulated
nodes are pinned to loopback like a local run."""

from __future__ import annotations

import pytest

from coplay.config import ClusterConfig
from coplay.runs import RunDir
from coplay.security import ray_init_kwargs
from tests.helpers import tiny_loop_config


@pytest.mark.slow
def test_two_iterations_with_the_learner_and_the_worker_off_the_drivers_node(tmp_path, tiny_model_config):
    import ray
    from ray.cluster_utils import Cluster

    from coplay.loop import train

    ray_init_kwargs(ClusterConfig())  # the simulated nodes bind loopback, as a local run does
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    learner_node = cluster.add_node(num_cpus=1, resources={"learner": 1})
    cluster.add_node(num_cpus=1, resources={"rollout": 1})
    try:
        ray.init(address=cluster.address, logging_level="ERROR")
        head = ray.get_runtime_context().get_node_id()
        cfg = tiny_loop_config(str(tmp_path / "runs"), tiny_model_config.tiny.cache_dir,
                               f"cluster.address={cluster.address}",
                               "cluster.learner_rank_resources={learner: 1}",
                               "cluster.rollout_worker_resources={rollout: 1}", "engine.backend=hf",
                               "sft.epochs=1", "sft.episodes_per_game=8")
        run = RunDir.open(train(cfg))
    finally:
        ray.shutdown()
        cluster.shutdown()
        ray_init_kwargs(ClusterConfig(address="auto"))  # undo the loopback pin for later tests
    records = run.read_metrics()
    learner = records[0]["learner"]
    (rank0,) = learner["ranks"]
    assert rank0["node_id"] == learner_node.node_id != head
    assert [rank0["master_addr"], rank0["master_port"]] == learner["rendezvous"]
    assert rank0["master_addr"] == rank0["node_ip"]  # rank 0's own node, not the driver's loopback choice
    assert {r["iteration"] for r in records if "scores" in r} == {1, 2}
    assert "final_versions" in records[-1]
