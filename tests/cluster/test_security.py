"""Security defaults (docs/architecture.md, issue 9 part 4): a local Ray binds to loopback and starts no
dashboard; run folders hold no pickle; `trust_remote_code` is off unless configured and reaches the loaders.

One real local Ray start (about 10 s) is shared by the tests that need it.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path

import pytest

from coplay.config import ClusterConfig, ModelConfig
from coplay.security import (
    LOOPBACK,
    PickleOnDiskError,
    assert_no_pickle_on_disk,
    find_pickles,
    ray_init_kwargs,
)
from tests.helpers import is_loopback, listening_sockets

# ------------------------------------------------------------------------------------------ ray.init


def test_local_run_kwargs_start_a_fresh_loopback_ray_without_dashboard():
    kwargs = ray_init_kwargs(ClusterConfig(num_cpus=2, num_gpus=0))
    assert kwargs == {"address": "local", "include_dashboard": False, "dashboard_host": LOOPBACK,
                      "num_cpus": 2, "num_gpus": 0}


def test_a_dashboard_asked_for_in_a_local_run_still_listens_on_loopback_only():
    kwargs = ray_init_kwargs(ClusterConfig(include_dashboard=True))
    assert kwargs["include_dashboard"] is True and kwargs["dashboard_host"] == LOOPBACK


def test_cluster_run_kwargs_only_connect_to_the_configured_address():
    assert ray_init_kwargs(ClusterConfig(address="auto", num_cpus=4)) == {"address": "auto"}


@pytest.mark.parametrize("before", [None, "1"])
def test_the_loopback_pin_is_undone_exactly_when_a_cluster_is_used_next(before, monkeypatch):
    import ray._private.ray_constants as ray_constants

    from coplay.security import RAY_MULTI_NODE_ENV

    if before is None:
        monkeypatch.delenv(RAY_MULTI_NODE_ENV, raising=False)
    else:
        monkeypatch.setenv(RAY_MULTI_NODE_ENV, before)
    monkeypatch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", True)
    ray_init_kwargs(ClusterConfig())
    assert os.environ[RAY_MULTI_NODE_ENV] == "0" and ray_constants.ENABLE_RAY_CLUSTER is False
    ray_init_kwargs(ClusterConfig())  # pinning twice keeps the first "before"
    ray_init_kwargs(ClusterConfig(address="auto"))
    assert os.environ.get(RAY_MULTI_NODE_ENV) == before and ray_constants.ENABLE_RAY_CLUSTER is True


@pytest.fixture(scope="module")
def local_ray():
    import ray

    # ray is imported before the kwargs are made on purpose: the loop may import it first.
    kwargs = ray_init_kwargs(ClusterConfig(num_cpus=1, num_gpus=0))
    context = ray.init(**kwargs, logging_level="ERROR", log_to_driver=False)
    try:
        yield ray, context
    finally:
        ray.shutdown()
        ray_init_kwargs(ClusterConfig(address="auto"))  # undo the loopback pin for later tests


def test_local_ray_binds_every_socket_to_loopback(local_ray):
    ray, _ = local_ray

    @ray.remote(num_cpus=0)
    def where() -> str:
        return ray.util.get_node_ip_address()

    assert ray.get(where.remote(), timeout=120) == LOOPBACK  # a worker exists and reports loopback
    sockets = listening_sockets()
    names = {name for _, name, _, _ in sockets}
    assert {"gcs_server", "raylet"} <= names, f"expected Ray's GCS and raylet among {sorted(names)}"
    exposed = [s for s in sockets if not is_loopback(s[2])]
    assert not exposed, f"sockets listening beyond loopback: {exposed}"


def _serves_the_dashboard_api(port: int) -> bool:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/version", timeout=5) as response:
            return response.status == 200 and b"ray_version" in response.read()
    except urllib.error.HTTPError as exc:  # token auth answers 401 on the dashboard's API
        return exc.code == 401 and b"authentication token" in exc.read()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def test_local_ray_starts_no_dashboard(local_ray):
    """Ray always runs its head process `dashboard.py`; without a dashboard it loads only the usage-stats
    module and disables the web frontend. What it listens on (a Prometheus metrics port) must not serve the
    dashboard's API: no UI, no job submission."""
    import psutil

    _, context = local_ray
    assert not context.dashboard_url
    heads = [p for p in psutil.Process().children(recursive=True)
             if p.is_running() and "dashboard/dashboard.py" in " ".join(p.cmdline())]
    for head in heads:
        assert "--disable-frontend" in head.cmdline() and "--modules-to-load=UsageStatsHead" in head.cmdline()
        ports = [c.laddr.port for c in head.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
        assert not [port for port in ports if _serves_the_dashboard_api(port)], ports


# ------------------------------------------------------------------------------------------ no pickle


def _clean_run_folder(root: Path) -> Path:
    """A run folder written the way coplay writes one: msgpack shard, JSON bank and metrics, safetensors
    adapter, a torch checkpoint of plain tensors and numbers."""
    import torch
    from safetensors.torch import save_file

    from coplay.runs import RunDir
    from coplay.types import Shard, write_shard

    run = RunDir.create(root, "security", "run: {name: security}\n")
    write_shard(run.shard_path(0, 0), Shard(shard_id="it0-w0", iteration=0, worker=0))
    run.bank_path("avalon/good", 1).parent.mkdir(parents=True)
    run.bank_path("avalon/good", 1).write_text(json.dumps({"skills": []}))
    run.append_metrics({"iteration": 0, "score": 1.5})
    adapter = run.adapter_dir("act", 1)
    adapter.mkdir(parents=True)
    save_file({"lora_A": torch.zeros(2, 2)}, adapter / "adapter_model.safetensors")
    (adapter / "adapter_config.json").write_text("{}")
    checkpoint = run.checkpoint_dir(1)
    checkpoint.mkdir(parents=True)
    torch.save({"step": 1, "moments": {"exp_avg": torch.ones(3)}, "lr": [1e-5]}, checkpoint / "optimizer.pt")
    return run.root


class _Opaque:
    """A class weights_only refuses to rebuild."""

    def __init__(self) -> None:
        self.value = 3


def test_a_run_folder_of_msgpack_json_safetensors_and_plain_torch_tensors_passes(tmp_path):
    root = _clean_run_folder(tmp_path)
    assert find_pickles(root) == []
    assert_no_pickle_on_disk(root)


def test_pickle_streams_and_pickle_named_files_are_found_whatever_their_name(tmp_path):
    root = _clean_run_folder(tmp_path)
    (root / "shards" / "it00001-w000-0000.msgpack").write_bytes(pickle.dumps({"a": 1}, protocol=4))
    (root / "eval" / "scores.pkl").write_bytes(pickle.dumps([1, 2], protocol=0))
    findings = {f.path.name: f.reason for f in find_pickles(root)}
    assert findings.keys() == {"it00001-w000-0000.msgpack", "scores.pkl"}
    assert "protocol 4" in findings["it00001-w000-0000.msgpack"]
    with pytest.raises(PickleOnDiskError, match=r"(?s)2 file\(s\).*scores\.pkl"):
        assert_no_pickle_on_disk(root)


def test_a_safetensors_file_whose_header_length_looks_like_pickle_magic_passes(tmp_path):
    import torch
    from safetensors.torch import save_file

    for pad in range(0, 2048, 8):
        path = tmp_path / "adapter_model.safetensors"
        save_file({"w": torch.zeros(1)}, path, metadata={"pad": "x" * pad})
        if path.read_bytes()[:2] == b"\x80\x02":  # header length 0x0280: the bytes of a protocol-2 pickle
            break
    else:
        pytest.fail("no padding gave a header length starting with 0x80 0x02")
    assert find_pickles(tmp_path) == []


def test_torch_files_that_weights_only_refuses_are_found(tmp_path):
    import torch

    root = _clean_run_folder(tmp_path)
    torch.save({"state": _Opaque()}, root / "checkpoints" / "step-1" / "engine.pt")
    findings = find_pickles(root)
    assert [f.path.name for f in findings] == ["engine.pt"]
    assert "weights_only" in findings[0].reason


def test_numpy_object_arrays_are_found_but_numeric_arrays_pass(tmp_path):
    import numpy as np

    root = _clean_run_folder(tmp_path)
    np.save(root / "eval" / "numbers.npy", np.arange(4))
    np.savez(root / "eval" / "plain.npz", a=np.arange(3))
    np.save(root / "eval" / "objects.npy", np.array([{"x": 1}], dtype=object), allow_pickle=True)
    np.savez(root / "eval" / "mixed.npz", a=np.arange(3), b=np.array([None, "x"], dtype=object))
    assert sorted(f.path.name for f in find_pickles(root)) == ["mixed.npz", "objects.npy"]


def test_a_missing_run_folder_is_an_error_not_a_pass(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        find_pickles(tmp_path / "nope")


# ------------------------------------------------------------------------------------ trust_remote_code

_REMOTE_CONFIG = '''
from pathlib import Path

from transformers import Qwen3Config

Path({marker!r}).write_text("remote code ran")


class MarkerConfig(Qwen3Config):
    model_type = "qwen3"
'''

_REMOTE_MODEL = '''
from transformers import Qwen3ForCausalLM

from .marker_config import MarkerConfig


class MarkerForCausalLM(Qwen3ForCausalLM):
    config_class = MarkerConfig
'''


@pytest.fixture
def remote_code_model(tiny_model_dir, tmp_path):
    """The tiny model plus custom code in `auto_map` that leaves a marker file when it is executed."""
    folder = tmp_path / "remote-code-model"
    shutil.copytree(tiny_model_dir, folder)
    marker = tmp_path / "REMOTE_CODE_RAN"
    (folder / "marker_config.py").write_text(_REMOTE_CONFIG.format(marker=str(marker)))
    (folder / "marker_model.py").write_text(_REMOTE_MODEL)
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoConfig": "marker_config.MarkerConfig",
                          "AutoModelForCausalLM": "marker_model.MarkerForCausalLM"}
    (folder / "config.json").write_text(json.dumps(config))
    return folder, marker


def test_trust_remote_code_is_off_by_default():
    assert ModelConfig().trust_remote_code is False


def test_model_loading_runs_no_remote_code_unless_configured(remote_code_model, tiny_model_config):
    from coplay.models.loading import load_base_model

    folder, marker = remote_code_model
    off = tiny_model_config.model_copy(update={"name": str(folder)})
    model, _ = load_base_model(off)
    assert type(model).__name__ == "Qwen3ForCausalLM" and not marker.exists()

    on = off.model_copy(update={"trust_remote_code": True})
    model, _ = load_base_model(on)
    assert type(model).__name__ == "MarkerForCausalLM" and marker.read_text() == "remote code ran"


def test_every_model_loader_in_coplay_passes_trust_remote_code_from_the_config():
    """transformers' Auto*.from_pretrained and vLLM's engine args may run code shipped with a model: each call
    in coplay/ must pass `trust_remote_code=` explicitly, and never a literal True."""
    import ast

    loaders = {"AsyncEngineArgs", "EngineArgs", "LLM"}
    root = Path(__file__).resolve().parents[2] / "coplay"
    calls, offenders = 0, []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            owner = (func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                     else "")
            if not (name in loaders or (name == "from_pretrained" and owner.startswith("Auto"))):
                continue
            calls += 1
            given = {kw.arg: kw.value for kw in node.keywords}
            value = given.get("trust_remote_code")
            if value is None or (isinstance(value, ast.Constant) and value.value is True):
                offenders.append(f"{path.relative_to(root.parent)}:{node.lineno} {name}")
    assert calls >= 3, "expected the tokenizer, model and vLLM loaders in coplay/"
    assert not offenders, f"loader calls without trust_remote_code from the config: {offenders}"
