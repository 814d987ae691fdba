"""Learner rendezvous from rank 0 (issue 18 part 1) on a real local Ray cluster: two learner ranks join at the
address and port rank 0 reported, train one step together, and every socket the run's processes listen on
(Ray's, the ranks' torch.distributed store and gloo transport) is bound to loopback. A group whose memory
estimate exceeds its budget is refused before any rank loads a model, with the one-line reason.
"""

from __future__ import annotations

import pytest

from coplay.config import ClusterConfig, CoplayConfig
from tests.helpers import is_loopback, listening_sockets
from tests.learn.scenarios import batch


@pytest.fixture(scope="module")
def learner_group(tiny_model_config):
    import ray

    from coplay.actors.learner_group import LearnerGroup
    from coplay.security import ray_init_kwargs

    ray.init(**ray_init_kwargs(ClusterConfig(num_cpus=3, num_gpus=0)), logging_level="ERROR",
             log_to_driver=False)
    cfg = CoplayConfig.model_validate({
        "model": tiny_model_config.model_dump(mode="json"),
        "learner": {"backend": "torch", "ranks": 2, "micro_batch_size": 2, "lr": 1e-3},
    })
    group = LearnerGroup(cfg)
    try:
        yield group
    finally:
        group.shutdown()
        ray.shutdown()
        ray_init_kwargs(ClusterConfig(address="auto"))  # undo the loopback pin for later tests


def test_every_rank_joins_at_the_address_and_port_rank_0_reported(learner_group):
    addr, port = learner_group.master
    assert addr == "127.0.0.1" and port > 0
    assert [p.rank for p in learner_group.places] == [0, 1]
    assert {(p.master_addr, p.master_port) for p in learner_group.places} == {(addr, port)}
    step = learner_group.train_step(*batch(1, ("act",), n=4))
    assert step.learner_step == 1 and set(step.adapters) == {"act"}
    assert learner_group.versions()["act"] == 1


def test_a_live_local_learner_group_listens_on_loopback_only(learner_group):
    """The rank-0 store serves the reported port; nothing of the run (Ray, the ranks' store and gloo
    transport) listens beyond loopback."""
    _, port = learner_group.master
    sockets = listening_sockets()
    names = {name for _, name, _, _ in sockets}
    assert {"gcs_server", "raylet"} <= names, sorted(names)
    assert any(p == port for _, _, _, p in sockets), f"no process listens on the reported port {port}"
    exposed = [s for s in sockets if not is_loopback(s[2])]
    assert not exposed, f"sockets listening beyond loopback: {exposed}"


def test_a_group_over_its_memory_budget_is_refused_with_the_one_line_reason(learner_group, tiny_model_config):
    from coplay.actors.learner_group import LearnerGroup
    from coplay.learn.memory import LearnerMemoryError

    cfg = CoplayConfig.model_validate({
        "model": tiny_model_config.model_dump(mode="json"),
        "learner": {"backend": "torch", "ranks": 1, "memory_budget_gib": 0.01},
    })
    with pytest.raises(LearnerMemoryError, match=r"^learner memory per rank ~.* exceeds learner\.memory"):
        LearnerGroup(cfg)


def test_a_dead_rank_stops_the_group_at_once_with_how_to_resume(learner_group, tiny_model_config):
    """Rank 1 dies while rank 0 would wait for it inside a collective: the call fails at once (not after the
    process group's timeout) with one line naming the rank and the resume command. (Runs last: it ends the
    module's group to free its CPUs.)"""
    import time

    import ray

    from coplay.actors.learner_group import LearnerDiedError, LearnerGroup

    learner_group.shutdown()
    cfg = CoplayConfig.model_validate({
        "model": tiny_model_config.model_dump(mode="json"),
        "learner": {"backend": "torch", "ranks": 2, "micro_batch_size": 2},
    })
    group = LearnerGroup(cfg, name="kill-test", resume_hint="Resume with: coplay train --resume RUN")
    try:
        assert ray.get_actor("kill-test.learner-1") is not None
        ray.kill(ray.get_actor("kill-test.learner-1"), no_restart=True)
        started = time.monotonic()
        with pytest.raises(LearnerDiedError) as info:
            group.train_step(*batch(1, ("act",), n=4))
        assert time.monotonic() - started < 60
        message = str(info.value)
        assert "\n" not in message and message.startswith("learner rank 1 died during train_step")
        assert message.endswith("Resume with: coplay train --resume RUN")
        with pytest.raises(LearnerDiedError, match="gone"):
            group.versions()
    finally:
        group.shutdown()
