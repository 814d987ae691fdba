"""Security defaults of a run (docs/architecture.md): how Ray is started, and the no-pickle-on-disk rule.

- `ray_init_kwargs(cluster)`: the arguments for `ray.init`. A local run (no `cluster.address`) starts a fresh
  single-node Ray whose every socket is bound to 127.0.0.1 and which starts no dashboard unless the config
  asks for one (then on 127.0.0.1 only); a run with an address connects to that cluster and nothing else.
- `find_pickles(run_dir)` / `assert_no_pickle_on_disk(run_dir)`: scan a run folder for anything that needs
  the pickle machinery to load: pickle files, pickle-named files, torch archives that `torch.load(...,
  weights_only=True)` refuses, and numpy arrays of Python objects.

Never imports ray (only `coplay/actors/` and `coplay/loop.py` do); torch and numpy are imported only when a
file that needs them is found.
"""

from __future__ import annotations

import os
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coplay.config import ClusterConfig

LOOPBACK = "127.0.0.1"

# Ray picks the node address of a fresh local instance from this switch: when it is off, Ray treats the
# machine as a single-node installation and uses 127.0.0.1 as the node address, and its GCS, raylet, core
# workers and agents then bind 127.0.0.1 instead of every interface. It exists for Windows and macOS; on
# Linux it is on by default. Ray reads it into `ray._private.ray_constants.ENABLE_RAY_CLUSTER` at import.
RAY_MULTI_NODE_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
_RAY_CONSTANTS_MODULE = "ray._private.ray_constants"
_RAY_MULTI_NODE_ATTR = "ENABLE_RAY_CLUSTER"

PICKLE_SUFFIXES = (".pkl", ".pickle", ".joblib", ".dill", ".cloudpickle")
_PICKLE_PROTOCOL_BYTES = {2, 3, 4, 5}
_ZIP_MAGIC = b"PK\x03\x04"
_NPY_MAGIC = b"\x93NUMPY"


class PickleOnDiskError(RuntimeError):
    """A run folder holds files that need pickle to load (docs/architecture.md: no pickle on disk)."""


def ray_init_kwargs(cluster: ClusterConfig) -> dict[str, Any]:
    """Keyword arguments for `ray.init(**kwargs)` under the security defaults.

    `cluster.address` set (`auto`, `ray://...`, `host:port`): connect to that cluster; resources and the
    dashboard belong to it. Unset: start a fresh local instance (`address="local"`, so a stray `RAY_ADDRESS`
    never redirects a local run) bound to loopback, with the dashboard only if `cluster.include_dashboard`,
    and then on 127.0.0.1. Call it before `ray.init` in the same process; it pins Ray to loopback for the
    local case (see `RAY_MULTI_NODE_ENV`), whether or not ray is already imported.
    """
    if cluster.address is not None:
        _set_ray_multi_node(True)
        return {"address": cluster.address}
    _set_ray_multi_node(False)
    kwargs: dict[str, Any] = {
        "address": "local",
        "include_dashboard": cluster.include_dashboard,
        "dashboard_host": LOOPBACK,
    }
    if cluster.num_cpus is not None:
        kwargs["num_cpus"] = cluster.num_cpus
    if cluster.num_gpus is not None:
        kwargs["num_gpus"] = cluster.num_gpus
    return kwargs


_NOT_PINNED = object()
_env_before_pin: object = _NOT_PINNED  # the variable's value before we pinned (None: unset)


def _set_ray_multi_node(enabled: bool) -> None:
    """Switch Ray's multi-node mode for the Ray started next from this process (and its children).

    Turning it off is what binds a local instance to loopback. Turning it back on only undoes our own
    change (restoring the variable as it was), so a connection to a real cluster after a local run in the
    same process resolves this node's address again; without a pin of ours nothing is touched.
    """
    global _env_before_pin
    if not enabled:
        if _env_before_pin is _NOT_PINNED:
            _env_before_pin = os.environ.get(RAY_MULTI_NODE_ENV)
        os.environ[RAY_MULTI_NODE_ENV] = "0"
    elif _env_before_pin is not _NOT_PINNED:
        if _env_before_pin is None:
            os.environ.pop(RAY_MULTI_NODE_ENV, None)
        else:
            os.environ[RAY_MULTI_NODE_ENV] = str(_env_before_pin)
        _env_before_pin = _NOT_PINNED
    else:
        return
    constants = sys.modules.get(_RAY_CONSTANTS_MODULE)
    if constants is None:
        return  # ray reads the variable when it is imported
    if not hasattr(constants, _RAY_MULTI_NODE_ATTR):
        version = getattr(sys.modules.get("ray"), "__version__", "?")
        raise RuntimeError(
            f"ray {version}: {_RAY_CONSTANTS_MODULE}.{_RAY_MULTI_NODE_ATTR} is gone, so coplay cannot bind a "
            f"local Ray to loopback after ray was imported; set {RAY_MULTI_NODE_ENV}=0 before importing ray"
        )
    value = os.environ.get(RAY_MULTI_NODE_ENV)
    default = sys.platform not in ("darwin", "win32")  # Ray's own default
    setattr(constants, _RAY_MULTI_NODE_ATTR, default if value is None else value.lower() in ("1", "true"))


# ------------------------------------------------------------------------------------------- no pickle


@dataclass(frozen=True)
class PickleFinding:
    """One file that needs pickle to load, and why."""

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def find_pickles(run_dir: str | Path) -> list[PickleFinding]:
    """Every file under `run_dir` that needs the pickle machinery to load, sorted by path.

    Allowed: JSON, msgpack, safetensors, text, and torch archives that load with `weights_only=True`
    (tensors, plain containers and numbers only). Flagged: files named like pickles, raw pickle streams
    (protocol 2-5 magic), torch archives whose pickle refers to anything `weights_only` refuses, numpy
    arrays of Python objects (`.npy`, and inside `.npz`).
    """
    root = Path(run_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"run folder {root} does not exist")
    findings = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        reason = _pickle_reason(path)
        if reason is not None:
            findings.append(PickleFinding(path, reason))
    return findings


def assert_no_pickle_on_disk(run_dir: str | Path) -> None:
    """Raise `PickleOnDiskError` listing every offending file under `run_dir` (see `find_pickles`)."""
    findings = find_pickles(run_dir)
    if findings:
        listing = "\n  ".join(str(f) for f in findings)
        raise PickleOnDiskError(
            f"{len(findings)} file(s) under {run_dir} need pickle to load (docs/architecture.md allows "
            f"msgpack, JSON, safetensors and torch tensors loaded with weights_only):\n  {listing}"
        )


def _pickle_reason(path: Path) -> str | None:
    if path.suffix.lower() in PICKLE_SUFFIXES:
        return f"named like a pickle ({path.suffix})"
    with path.open("rb") as f:
        head = f.read(9)
    if _is_safetensors(head, path):
        return None  # its 8-byte header length may start with the same bytes as a pickle
    if len(head) >= 2 and head[0] == 0x80 and head[1] in _PICKLE_PROTOCOL_BYTES:
        return f"raw pickle stream (protocol {head[1]})"
    if head.startswith(_NPY_MAGIC):
        with path.open("rb") as f:
            return _npy_object_reason(f, path.name)
    if head.startswith(_ZIP_MAGIC):
        return _zip_reason(path)
    return None


def _is_safetensors(head: bytes, path: Path) -> bool:
    """safetensors: a little-endian u64 header length N, then N bytes of JSON starting with `{`."""
    if len(head) < 9 or head[8:9] != b"{":
        return False
    header_len = int.from_bytes(head[:8], "little")
    return 8 + header_len <= path.stat().st_size


def _zip_reason(path: Path) -> str | None:
    """Torch archives (`<name>/data.pkl` inside) must load with weights_only; `.npy` members must not hold
    Python objects; any other pickle-named member is flagged."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            for name in names:
                if name.endswith(".npy"):
                    with archive.open(name) as member:
                        reason = _npy_object_reason(member, f"{path.name}:{name}")
                    if reason is not None:
                        return reason
    except zipfile.BadZipFile as exc:
        return f"zip magic but unreadable archive ({exc}); cannot show it holds no pickle"
    pickled = [n for n in names if n.endswith(PICKLE_SUFFIXES)]
    if not pickled:
        return None
    if any(n.endswith("/data.pkl") or n == "data.pkl" for n in pickled):
        return _torch_weights_only_reason(path)
    return f"zip archive holding pickle member(s) {pickled[:3]}"


def _torch_weights_only_reason(path: Path) -> str | None:
    import pickle

    import torch

    try:
        torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except pickle.UnpicklingError as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"torch archive that torch.load(weights_only=True) refuses: {first_line}"
    except RuntimeError as exc:
        return f"torch archive that torch.load(weights_only=True, mmap=True) cannot read: {exc}"
    return None


def _npy_object_reason(stream: Any, name: str) -> str | None:
    """`.npy` header parse (no data read): object dtypes need pickle (`allow_pickle=True`) to load."""
    import numpy as np

    version = np.lib.format.read_magic(stream)
    if version == (1, 0):
        _, _, dtype = np.lib.format.read_array_header_1_0(stream)
    else:  # 2.0 and 3.0 share the 4-byte header length; 3.0's utf-8 names still parse
        _, _, dtype = np.lib.format.read_array_header_2_0(stream)
    if dtype.hasobject:
        return f"numpy array of Python objects in {name} (needs allow_pickle=True)"
    return None
