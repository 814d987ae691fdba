"""The whole submission path on one machine (issue 9, `make test-slow`): `ray start --head` on loopback with
token auth, `ray job submit` of `launch/train.py` with a tiny config, and the job's run folder appears.

The head runs as `ray start --block` in its own process group; teardown ends exactly the processes it
started (by process group and pid), never other Ray instances on the machine, so no `ray stop`.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from coplay.security import RAY_MULTI_NODE_ENV, assert_no_pickle_on_disk
from tests.helpers import is_loopback

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _client_env(token: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"RAY_ADDRESS", "RAY_AUTH_MODE"}}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # the job's `python` is this virtualenv's
    if token:
        env["RAY_AUTH_MODE"] = "token"
    return env


def _run(args: list[str], env: dict[str, str], timeout: float,
         cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def _stop_process_tree(head: subprocess.Popen) -> None:
    """SIGTERM to the head's process group (ours alone: start_new_session), then SIGKILL to any descendant
    that outlived it, by pid."""
    import psutil

    try:
        descendants = psutil.Process(head.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        descendants = []
    try:
        os.killpg(head.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        head.wait(timeout=30)
    except subprocess.TimeoutExpired:
        head.kill()
        head.wait(timeout=10)
    _, alive = psutil.wait_procs(descendants, timeout=20)
    for proc in alive:
        proc.kill()
    psutil.wait_procs(alive, timeout=10)


@pytest.fixture(scope="module")
def ray_head():
    """A single-node Ray head on loopback with token auth; yields (the head process, the job API address)."""
    gcs_port, dashboard_port, client_port, agent_port = _free_ports(4)
    # short: Ray's unix socket paths must fit 107 bytes
    temp_dir = tempfile.mkdtemp(prefix="cpr-", dir="/tmp")
    env = _client_env(token=True)
    env[RAY_MULTI_NODE_ENV] = "0"  # a one-machine cluster: every Ray socket on 127.0.0.1
    log = open(Path(temp_dir) / "ray-start.log", "w")  # closed in the finally below
    head = subprocess.Popen(
        [str(BIN / "ray"), "start", "--head", "--block", "--node-ip-address=127.0.0.1",
         f"--port={gcs_port}", "--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard_port}",
         f"--ray-client-server-port={client_port}", f"--dashboard-agent-listen-port={agent_port}",
         "--num-cpus=2", "--num-gpus=0", f"--temp-dir={temp_dir}", "--disable-usage-stats"],
        env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    address = f"http://127.0.0.1:{dashboard_port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            probe = _run([str(BIN / "ray"), "job", "list", "--address", address], _client_env(True), 60)
            if probe.returncode == 0:
                break
            if head.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"Ray head did not come up: "
                            f"{(Path(temp_dir) / 'ray-start.log').read_text()[-3000:]}")
            time.sleep(2)
        yield head, address
    finally:
        _stop_process_tree(head)
        log.close()
        shutil.rmtree(temp_dir, ignore_errors=True)


def test_the_one_machine_head_listens_on_loopback_only(ray_head):
    import psutil

    head, _ = ray_head
    sockets = []
    for proc in psutil.Process(head.pid).children(recursive=True):
        try:
            sockets += [(proc.name(), c.laddr) for c in proc.net_connections(kind="inet")
                        if c.status == psutil.CONN_LISTEN]
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    assert sockets, "the head's processes listen somewhere"
    assert not [s for s in sockets if not is_loopback(s[1].ip)], sockets


def test_the_job_api_refuses_a_client_without_the_token(ray_head):
    _, address = ray_head
    result = _run([str(BIN / "ray"), "job", "list", "--address", address], _client_env(token=False), 120)
    assert result.returncode != 0
    assert "auth" in (result.stdout + result.stderr).lower()


def test_ray_job_submit_of_launch_train_py_produces_the_run_folder(ray_head, tmp_path):
    _, address = ray_head
    out_dir = tmp_path / "runs"
    result = _run(
        [str(BIN / "ray"), "job", "submit", "--address", address,
         "--runtime-env", "launch/runtime_env.yaml", "--",
         "python", "launch/train.py", "--config", "launch/configs/tiny-2048.yaml",
         f"run.out_dir={out_dir}", "run.name=job-submit", "loop.iterations=1"],
        _client_env(token=True), timeout=1500)
    transcript = result.stdout + result.stderr
    assert result.returncode == 0, transcript[-6000:]
    runs = sorted(out_dir.glob("job-submit-*"))
    assert len(runs) == 1, f"expected one run folder under {out_dir}; job output:\n{transcript[-3000:]}"
    run = runs[0]
    assert f"run folder {run.resolve()}" in transcript
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["cluster"]["address"] == "auto" and config["games"] == ["2048"]
    assert (run / "metrics.jsonl").read_text().strip(), "the iteration logged its metrics"
    assert_no_pickle_on_disk(run)
