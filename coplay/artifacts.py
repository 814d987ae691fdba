"""Versioned artifacts of a run: adapter bundles and skill banks, each with its sha256 (DESIGN.md §6).

`ArtifactLedger` is the bookkeeping behind the `ArtifactStore` actor: the bytes of every published
version (the actor hands them out through Ray's object store), a copy in the run folder
(`adapters/<a>/v<n>/` with a `manifest.json`, `banks/<key>/v<n>.json`), the acknowledgements workers send
back with the checksum they loaded, and the count of failed deliveries per version (after
`max_failures` the run must stop with a clear error). No ray here, so it is testable on its own.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from coplay.atomic import write_bytes_atomic, write_json_atomic
from coplay.engines.adapters import BUNDLE_FILES, bundle_sha256
from coplay.runs import RunDir
from coplay.types import AdapterVersion, BankVersion


class ArtifactError(RuntimeError):
    """An artifact that cannot be published or delivered (checksum mismatch, missing, failed too often)."""


def bank_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class ArtifactLedger:
    """Every published version, the acknowledgements, and failure counts."""

    run: RunDir | None
    max_failures: int = 3
    adapters: dict[tuple[str, int], tuple[dict[str, bytes], AdapterVersion]] = field(default_factory=dict)
    banks: dict[tuple[str, int], tuple[bytes, BankVersion]] = field(default_factory=dict)
    acks: dict[tuple[str, str, int], dict[str, str]] = field(default_factory=dict)  # (kind, name, v) -> worker -> sha
    failures: dict[tuple[str, str, int], int] = field(default_factory=dict)

    def put_adapter(self, adapter: str, version: int, files: dict[str, bytes], sha256: str,
                    learner_step: int) -> AdapterVersion:
        """Publish an adapter bundle; its checksum must match its bytes. Versions are immutable."""
        actual = bundle_sha256(files)
        if actual != sha256:
            raise ArtifactError(f"adapter {adapter}@v{version}: checksum {sha256[:12]} does not match its bytes "
                                f"({actual[:12]}); not published")
        key = (adapter, version)
        if key in self.adapters:
            if self.adapters[key][1].sha256 != sha256:
                raise ArtifactError(f"adapter {adapter}@v{version} is already published with other bytes")
            return self.adapters[key][1]
        path = ""
        if self.run is not None:
            folder = self.run.adapter_dir(adapter, version)
            for name in BUNDLE_FILES:
                write_bytes_atomic(folder / name, files[name])
            write_json_atomic(folder / "manifest.json", {"adapter": adapter, "version": version, "sha256": sha256,
                                                         "learner_step": learner_step})
            path = str(folder)
        record = AdapterVersion(adapter, version, sha256, learner_step, path)
        self.adapters[key] = ({n: files[n] for n in BUNDLE_FILES}, record)
        return record

    def get_adapter(self, adapter: str, version: int) -> tuple[dict[str, bytes], AdapterVersion]:
        try:
            return self.adapters[(adapter, version)]
        except KeyError:
            raise ArtifactError(f"adapter {adapter}@v{version} was never published") from None

    def reload_adapter(self, adapter: str, version: int) -> tuple[dict[str, bytes], AdapterVersion]:
        """Re-read a published adapter from its run-folder copy (the republish path after a corrupt delivery);
        the copy must still match the recorded checksum."""
        _, record = self.get_adapter(adapter, version)
        folder = Path(record.path)
        files = {name: (folder / name).read_bytes() for name in BUNDLE_FILES}
        if bundle_sha256(files) != record.sha256:
            raise ArtifactError(f"adapter copy {folder} no longer matches sha256 {record.sha256[:12]}")
        self.adapters[(adapter, version)] = (files, record)
        return files, record

    def put_bank(self, bank_key: str, version: int, data: bytes, iteration: int) -> BankVersion:
        """Publish a bank version (its JSON bytes); the run folder keeps `banks/<key>/v<n>.json`."""
        json.loads(data)  # a bank that is not JSON is never published
        sha = bank_sha256(data)
        key = (bank_key, version)
        if key in self.banks:
            if self.banks[key][1].sha256 != sha:
                raise ArtifactError(f"bank {bank_key} v{version} is already published with other bytes")
            return self.banks[key][1]
        path = ""
        if self.run is not None:
            path = str(write_bytes_atomic(self.run.bank_path(bank_key, version), data))
        record = BankVersion(bank_key, version, sha, iteration, path)
        self.banks[key] = (data, record)
        return record

    def get_bank(self, bank_key: str, version: int) -> tuple[bytes, BankVersion]:
        try:
            return self.banks[(bank_key, version)]
        except KeyError:
            raise ArtifactError(f"bank {bank_key} v{version} was never published") from None

    def latest_bank_version(self, bank_key: str, at_most: int) -> int | None:
        versions = [v for (k, v) in self.banks if k == bank_key and v <= at_most]
        return max(versions) if versions else None

    def acknowledge(self, worker: str, kind: str, name: str, version: int, sha256: str) -> None:
        """A worker loaded `name` v`version` and reports the checksum it verified."""
        expected = (self.adapters[(name, version)][1].sha256 if kind == "adapter"
                    else self.banks[(name, version)][1].sha256)
        if sha256 != expected:
            raise ArtifactError(f"worker {worker} acknowledged {kind} {name} v{version} with sha256 {sha256[:12]}, "
                                f"published {expected[:12]}")
        self.acks.setdefault((kind, name, version), {})[worker] = sha256

    def acknowledged_by(self, kind: str, name: str, version: int) -> dict[str, str]:
        return dict(self.acks.get((kind, name, version), {}))

    def report_failure(self, kind: str, name: str, version: int, error: str) -> int:
        """Count a failed delivery; raises `ArtifactError` once a version failed `max_failures` times."""
        key = (kind, name, version)
        self.failures[key] = self.failures.get(key, 0) + 1
        if self.failures[key] >= self.max_failures:
            raise ArtifactError(f"{kind} {name} v{version} failed to load {self.failures[key]} times "
                                f"(last error: {error}); stopping the run")
        return self.failures[key]
