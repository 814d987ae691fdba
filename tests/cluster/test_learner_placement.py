"""Learner placement (issue 38 part 2): whole GPUs per learner rank (a config error otherwise), STRICT_PACK by
default with the strategy in the config, and on a simulated multi-node cluster: STRICT_PACK keeps the ranks
on one node or stops in one line, PACK lets them span nodes."""

from __future__ import annotations

import pytest

from coplay.config import ClusterConfig, ConfigError, load_config
from coplay.security import ray_init_kwargs


@pytest.mark.parametrize("gpus", ["0.5", "0.25", "2", "1.5"])
def test_a_fractional_or_multi_gpu_learner_rank_is_a_config_error(gpus):
    expected = r"cluster\.learner_rank_gpus: .*takes 1 GPU .* or 0 \(a CPU slot\)"
    with pytest.raises(ConfigError, match=expected):
        load_config(None, [f"cluster.learner_rank_gpus={gpus}"])


def test_whole_gpus_and_the_placement_strategy_come_from_the_config():
    assert load_config(None, []).cluster.learner_placement == "STRICT_PACK"
    assert load_config(None, ["cluster.learner_rank_gpus=1"]).cluster.learner_rank_gpus == 1
    assert load_config(None, ["cluster.learner_rank_gpus=0"]).cluster.learner_rank_gpus == 0
    cfg = load_config(None, ["cluster.learner_placement=PACK"])
    assert cfg.cluster.learner_placement == "PACK"
    with pytest.raises(ConfigError, match="cluster.learner_placement: .*'STRICT_PACK', 'PACK'"):
        load_config(None, ["cluster.learner_placement=SOMEWHERE"])


def _bundle_nodes(pg) -> list[str]:
    from ray.util.placement_group import placement_group_table

    table = placement_group_table(pg)
    return [table["bundles_to_node_id"][i] for i in sorted(table["bundles_to_node_id"])]


def test_strict_pack_keeps_the_ranks_on_one_node_and_pack_may_split_them():
    """Two nodes with room for one learner rank each, then a third with room for two: STRICT_PACK refuses
    the first two in one line (what it asked for, the most one node offers, PACK as the way out), PACK spans
    them, and STRICT_PACK puts both ranks on the third."""
    import ray
    from ray.cluster_utils import Cluster
    from ray.util.placement_group import remove_placement_group

    from coplay.actors.learner_group import learner_placement_group

    ray_init_kwargs(ClusterConfig())  # the simulated nodes bind loopback, as a local run does
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        small = [cluster.add_node(num_cpus=1, resources={"learner": 1}) for _ in range(2)]
        ray.init(address=cluster.address, logging_level="ERROR")
        strict = ClusterConfig(learner_rank_resources={"learner": 1}, learner_placement_timeout_s=3)
        with pytest.raises(ConfigError) as refused:
            learner_placement_group(strict, 2, 0.0)
        message = str(refused.value)
        asked = "cluster.learner_placement=STRICT_PACK: 2 learner ranks of {'CPU': 1, 'learner': 1.0}"
        assert asked in message
        assert "'learner': 1.0" in message.split("offers:")[1] and "learner_placement=PACK" in message
        assert "\n" not in message

        # placements that can succeed get time: on 2 busy cores a fresh node may take seconds to answer
        patient = strict.model_copy(update={"learner_placement_timeout_s": 120})
        spread = learner_placement_group(patient.model_copy(update={"learner_placement": "PACK"}), 2, 0.0)
        assert sorted(_bundle_nodes(spread)) == sorted(n.node_id for n in small)
        remove_placement_group(spread)

        big = cluster.add_node(num_cpus=2, resources={"learner": 2})
        packed = learner_placement_group(patient, 2, 0.0)
        assert _bundle_nodes(packed) == [big.node_id, big.node_id]
        remove_placement_group(packed)
    finally:
        ray.shutdown()
        cluster.shutdown()
        ray_init_kwargs(ClusterConfig(address="auto"))  # undo the loopback pin for later tests


def test_nccl_and_gloo_sockets_follow_the_interface_of_the_nodes_ray_address():
    """A rank's NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME: the interface holding its node's address (here a
    real interface of this machine), unless the environment names one; nothing for an address no interface
    holds."""
    import socket

    import psutil

    from coplay.learn.distributed import socket_interface_env

    held = [(name, a.address) for name, addrs in psutil.net_if_addrs().items() for a in addrs
            if a.family == socket.AF_INET and not a.address.startswith("127.")]
    if not held:
        pytest.skip("this machine has no non-loopback IPv4 interface")
    name, address = held[0]
    assert socket_interface_env(address, {}) == {"NCCL_SOCKET_IFNAME": name, "GLOO_SOCKET_IFNAME": name}
    assert socket_interface_env(address, {"NCCL_SOCKET_IFNAME": "ib0"}) == {"GLOO_SOCKET_IFNAME": name}
    assert socket_interface_env("203.0.113.77", {}) == {}  # TEST-NET-3: held by no interface here
