"""The one manifest format of a run's versioned artifacts, adapters and banks alike, and the folder layout
they are written in (the run folder's `adapters/<a>/v<n>/` and `banks/<key>/v<n>.json`, or any other root).

    adapters/<adapter>/v<n>/adapter_config.json, adapter_model.safetensors, manifest.json
    banks/<key>/v<n>.json, v<n>.manifest.json

A manifest (`manifest.json`, `v<n>.manifest.json`) is JSON:
    {"format": "coplay-artifact/1", "kind": "adapter" | "bank", "name": <adapter or bank key>,
     "version": n, "sha256": <the artifact's checksum: `bundle_sha256` of an adapter bundle, sha256 of a
     bank's JSON bytes>, "files": {file name: sha256 of that file},
     "learner_step": k (adapters), "iteration": j (banks)}
Writers make the files first and the manifest last, each atomically (an adapter version folder is built
under a temporary name and renamed), so a manifest never names a file that is not whole. Readers check
every file against it and raise `ArtifactError` naming the file. Versions are never overwritten.
Standard library only.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from coplay.artifacts.bundle import BUNDLE_FILES, AdapterBundle, ArtifactError
from coplay.files import sha256_bytes, write_bytes_atomic, write_json_atomic
from coplay.types import AdapterVersion, BankVersion

MANIFEST_FORMAT = "coplay-artifact/1"
ADAPTER_MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Manifest:
    """What a version is: its kind, name, version, checksum and the checksum of each of its files."""

    kind: str
    name: str
    version: int
    sha256: str
    files: dict[str, str] = field(default_factory=dict)
    learner_step: int | None = None
    iteration: int | None = None
    format: str = MANIFEST_FORMAT

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def read(cls, path: Path, kind: str) -> Manifest:
        """Parse and check a manifest file; `ArtifactError` names the file and what is wrong."""
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ArtifactError(f"manifest {path} is missing or unreadable: {exc}") from None
        if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
            got = data.get("format") if isinstance(data, dict) else type(data).__name__
            raise ArtifactError(f"manifest {path}: format {got!r}, expected {MANIFEST_FORMAT!r}")
        if data.get("kind") != kind:
            raise ArtifactError(f"manifest {path}: kind {data.get('kind')!r}, expected {kind!r}")
        try:
            return cls(kind=kind, name=str(data["name"]), version=int(data["version"]),
                       sha256=str(data["sha256"]), files={str(k): str(v) for k, v in data["files"].items()},
                       learner_step=None if data.get("learner_step") is None else int(data["learner_step"]),
                       iteration=None if data.get("iteration") is None else int(data["iteration"]))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ArtifactError(f"manifest {path}: malformed entry ({type(exc).__name__}: {exc})") from None


def _check_file(path: Path, expected: str) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ArtifactError(f"{path} is missing or unreadable: {exc}") from None
    if sha256_bytes(data) != expected:
        raise ArtifactError(f"{path}: sha256 {sha256_bytes(data)[:12]} does not match {expected[:12]} in its "
                            "manifest (truncated or corrupt)")
    return data


# ------------------------------------------------------------------------------------------- adapters
def write_adapter_version(folder: str | Path, bundle: AdapterBundle, adapter: str, version: int,
                          learner_step: int) -> AdapterVersion:
    """Write `folder` (…/<adapter>/v<version>) with the bundle's files and the manifest, atomically: a
    reader sees the whole version or none. An existing folder is never overwritten."""
    folder = Path(folder)
    if folder.exists():
        raise ArtifactError(f"adapter version folder {folder} already exists; versions are never overwritten")
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".tmp", dir=folder.parent))
    try:
        for name in BUNDLE_FILES:
            write_bytes_atomic(tmp / name, bundle.files[name])
        manifest = Manifest("adapter", adapter, version, bundle.sha256,
                            {n: sha256_bytes(bundle.files[n]) for n in BUNDLE_FILES},
                            learner_step=learner_step)
        write_json_atomic(tmp / ADAPTER_MANIFEST, manifest.to_json())
        tmp.rename(folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return AdapterVersion(adapter, version, bundle.sha256, learner_step, str(folder))


def read_adapter_version(folder: str | Path) -> tuple[AdapterBundle, AdapterVersion]:
    """The bundle of a version folder, every file checked against its manifest."""
    folder = Path(folder)
    manifest = Manifest.read(folder / ADAPTER_MANIFEST, "adapter")
    if set(manifest.files) != set(BUNDLE_FILES):
        raise ArtifactError(f"manifest {folder / ADAPTER_MANIFEST} lists {sorted(manifest.files)}, "
                            f"expected {list(BUNDLE_FILES)}")
    bundle = AdapterBundle.of({name: _check_file(folder / name, manifest.files[name])
                               for name in BUNDLE_FILES})
    if bundle.sha256 != manifest.sha256:
        raise ArtifactError(f"adapter {folder}: bundle sha256 {bundle.sha256[:12]} does not match "
                            f"{manifest.sha256[:12]} in {folder / ADAPTER_MANIFEST}")
    return bundle, AdapterVersion(manifest.name, manifest.version, manifest.sha256,
                                  manifest.learner_step or 0, str(folder))


# ------------------------------------------------------------------------------------------- banks
def bank_manifest_path(bank_path: str | Path) -> Path:
    """`banks/<key>/v<n>.json` -> `banks/<key>/v<n>.manifest.json`."""
    path = Path(bank_path)
    return path.with_name(f"{path.stem}.manifest.json")


def check_bank_json(data: bytes, bank_key: str, version: int) -> None:
    """A bank that is not JSON is never published."""
    try:
        json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArtifactError(f"bank {bank_key} v{version}: not JSON ({exc}); not published") from None


def write_bank_version(path: str | Path, data: bytes, bank_key: str, version: int,
                       iteration: int) -> BankVersion:
    """Write a bank version's JSON bytes and its manifest (the file first). Never overwrites a version."""
    path = Path(path)
    if path.exists():
        raise ArtifactError(f"{path} already exists: bank {bank_key} v{version} was already published")
    check_bank_json(data, bank_key, version)
    sha = sha256_bytes(data)
    write_bytes_atomic(path, data)
    write_json_atomic(bank_manifest_path(path),
                      Manifest("bank", bank_key, version, sha, {path.name: sha},
                               iteration=iteration).to_json())
    return BankVersion(bank_key, version, sha, iteration, str(path))


def read_bank_version(path: str | Path) -> tuple[bytes, BankVersion]:
    """A bank version's bytes, checked against its manifest."""
    path = Path(path)
    manifest = Manifest.read(bank_manifest_path(path), "bank")
    data = _check_file(path, manifest.sha256)
    return data, BankVersion(manifest.name, manifest.version, manifest.sha256, manifest.iteration or 0,
                             str(path))
