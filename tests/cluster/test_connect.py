"""Joining Ray (issue 20, item 1): an address that does not answer fails within `cluster.connect_timeout_s`
with one line, before `ray.init` can hang; `auto` with no cluster on the machine says so."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coplay.actors.connect import ClusterConnectError, actor_options, start_ray
from coplay.config import ClusterConfig

REPO = Path(__file__).resolve().parents[2]


def _silent_port() -> tuple[socket.socket, int]:
    """A listening socket that never accepts (full backlog), so a connect to it hangs like a dead GCS."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    return server, server.getsockname()[1]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_address_nobody_listens_on_fails_at_once_with_one_line():
    port = _closed_port()
    with pytest.raises(ClusterConnectError) as err:
        start_ray(ClusterConfig(address=f"127.0.0.1:{port}", connect_timeout_s=2))
    text = str(err.value)
    assert "\n" not in text and f"127.0.0.1:{port}" in text and "does not answer" in text
    assert "unset cluster.address" in text


def test_auto_resolves_the_way_ray_does_and_is_probed_too(monkeypatch):
    """`auto` takes RAY_ADDRESS first (as `ray.init` would); a dead address there fails the same way."""
    port = _closed_port()
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    expected = f"cluster.address=auto: the Ray cluster at .*:{port} does not answer"
    with pytest.raises(ClusterConnectError, match=expected):
        start_ray(ClusterConfig(address="auto", connect_timeout_s=2))


def test_a_train_run_against_a_hanging_address_ends_within_the_timeout(tmp_path):
    """The whole command: exit 2, one line on stderr, and no run left hanging."""
    server, port = _silent_port()
    fillers = []
    try:
        for _ in range(8):  # fill the backlog so further connects hang
            c = socket.socket()
            c.setblocking(False)
            c.connect_ex(("127.0.0.1", port))
            fillers.append(c)
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "coplay.cli", "train", f"run.out_dir={tmp_path}",
                               f"cluster.address=127.0.0.1:{port}", "cluster.connect_timeout_s=3"],
                              capture_output=True, text=True, timeout=120, cwd=REPO)
        elapsed = time.monotonic() - started
    finally:
        for c in fillers:
            c.close()
        server.close()
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines[-1].startswith("coplay train: cluster.address=127.0.0.1:") and "does not answer" in lines[-1]
    assert "Traceback" not in proc.stderr
    assert elapsed < 60


_GCS_OF = ("import sys, ray; from coplay.actors.connect import start_ray; "
           "from coplay.config import ClusterConfig; "
           "start_ray(ClusterConfig(address=None if sys.argv[1] == 'unset' else sys.argv[1], num_cpus=1)); "
           "print(ray.get_runtime_context().gcs_address); ray.shutdown()")


def _gcs_address_of_a_run(address: str, env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-c", _GCS_OF, address], capture_output=True, text=True,
                          timeout=180, cwd=REPO, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_an_unset_address_starts_its_own_ray_even_with_another_head_up():
    """Another local head is up (this test's) and RAY_ADDRESS names it: a run without cluster.address still
    gets a fresh instance of its own, while cluster.address=auto joins the one that is up."""
    import os

    import ray

    from coplay.security import ray_init_kwargs

    ray.init(**ray_init_kwargs(ClusterConfig(num_cpus=1)), logging_level="ERROR")
    try:
        other = ray.get_runtime_context().gcs_address
        env = {**os.environ, "RAY_ADDRESS": other}
        assert _gcs_address_of_a_run("unset", env) != other
        assert _gcs_address_of_a_run("auto", env).rsplit(":", 1)[1] == other.rsplit(":", 1)[1]
    finally:
        ray.shutdown()
        ray_init_kwargs(ClusterConfig(address="auto"))  # undo the loopback pin for later tests


def test_cpu_heavy_actors_get_a_passive_openmp_wait_policy_unless_the_environment_or_config_says(monkeypatch):
    """Spinning OpenMP threads cost a learner sharing 2 cores with rollouts several times its step time."""
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert actor_options(ClusterConfig()) == {"runtime_env": {"env_vars": {"OMP_WAIT_POLICY": "PASSIVE"}}}
    assert actor_options(ClusterConfig(omp_wait_policy="ACTIVE"))["runtime_env"]["env_vars"] == {
        "OMP_WAIT_POLICY": "ACTIVE"}
    assert actor_options(ClusterConfig(omp_wait_policy=None)) == {}
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")  # the user's own setting reaches local workers as is
    assert actor_options(ClusterConfig()) == {}
