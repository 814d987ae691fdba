"""Publishing adapter versions: what the engines' hot swap consumes (DESIGN.md §2, §6).

After a learner step, every adapter that step changed is exported by rank 0 as a new version folder
`<run>/adapters/<adapter>/v<n>/` holding a standard PEFT folder (`adapter_model.safetensors`,
`adapter_config.json`) and `version.json` {adapter, version, learner_step, sha256 of the safetensors file}.
The folder is written under a temporary name and renamed, so a reader never sees half a version. All ranks
call `publish_adapters` (under ZeRO-3 the weights are gathered collectively); only rank 0 writes and gets the
`AdapterVersion`s back. `verify_adapter_folder` re-hashes a folder and refuses a corrupt one, naming the file.
Standard library at import time (safetensors/peft through `coplay.models.lora` when exporting); never ray.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from coplay.atomic import write_json_atomic
from coplay.types import AdapterVersion

WEIGHTS_FILE = "adapter_model.safetensors"
VERSION_FILE = "version.json"


class AdapterArtifactError(ValueError):
    """A published adapter folder that cannot be trusted; the message names the file."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def adapter_version_dir(adapters_root: Path, adapter: str, version: int) -> Path:
    """`<adapters_root>/<adapter>/v<version>` (the same path `RunDir.adapter_dir` gives)."""
    return Path(adapters_root) / adapter / f"v{version}"


def export_adapter(policy: Any, adapter: str, version: int, learner_step: int, out_dir: Path) -> AdapterVersion:
    """Write one version folder atomically (the adapter's weights must be whole on this rank)."""
    from coplay.models.lora import save_adapter

    out_dir = Path(out_dir)
    if out_dir.exists():
        raise FileExistsError(f"adapter version folder {out_dir} already exists; versions are never overwritten")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".tmp", dir=out_dir.parent))
    try:
        save_adapter(policy, adapter, tmp)
        digest = sha256_file(tmp / WEIGHTS_FILE)
        write_json_atomic(tmp / VERSION_FILE, {"adapter": adapter, "version": version, "learner_step": learner_step,
                                               "sha256": digest})
        tmp.rename(out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return AdapterVersion(adapter=adapter, version=version, sha256=digest, learner_step=learner_step, path=str(out_dir))


def publish_adapters(learner: Any, adapters: list[str], adapters_root: str | Path) -> list[AdapterVersion]:
    """Export each adapter of `adapters` at its current version (call on every rank; rank 0 returns them)."""
    out: list[AdapterVersion] = []
    for adapter in adapters:
        with learner.trainers[adapter].gathered():
            if learner.rank == 0:
                folder = adapter_version_dir(Path(adapters_root), adapter, learner.versions[adapter])
                out.append(export_adapter(learner.policy, adapter, learner.versions[adapter], learner.learner_step, folder))
    return out


def verify_adapter_folder(folder: str | Path) -> AdapterVersion:
    """Read `version.json`, re-hash the weights; `AdapterArtifactError` names the file when they disagree."""
    folder = Path(folder)
    meta_path = folder / VERSION_FILE
    try:
        meta = json.loads(meta_path.read_text())
        expected = meta["sha256"]
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise AdapterArtifactError(f"adapter version file {meta_path} is missing or unreadable: {exc}") from None
    weights = folder / WEIGHTS_FILE
    if not weights.is_file():
        raise AdapterArtifactError(f"adapter weights {weights} are missing")
    actual = sha256_file(weights)
    if actual != expected:
        raise AdapterArtifactError(f"adapter weights {weights}: sha256 {actual} does not match {expected} in {meta_path}")
    return AdapterVersion(adapter=meta["adapter"], version=int(meta["version"]), sha256=actual,
                          learner_step=int(meta["learner_step"]), path=str(folder))
