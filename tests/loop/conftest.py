"""One real local Ray cluster (2 CPUs, loopback, no dashboard) for the loop tests of this folder."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def ray_cluster():
    import ray

    from coplay.config import ClusterConfig
    from coplay.security import ray_init_kwargs

    ray.init(**ray_init_kwargs(ClusterConfig(num_cpus=2)))
    yield
    ray.shutdown()
