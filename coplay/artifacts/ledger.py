"""The artifact ledger: every published adapter and bank version of a run, with its bytes, its checksum
and its run-folder copy (docs/architecture.md), and the acknowledgements workers send back with the checksum
they loaded. The `ArtifactStore` actor (coplay/actors/artifact_store.py) is this class behind Ray.

Publishing a version = writing its run-folder copy with a manifest (`coplay.artifacts.manifest`) and
keeping its bytes for delivery. Versions are immutable: publishing the same version again with the same
bytes is a no-op, with other bytes an error. Republishing re-reads a version from its run-folder copy (after
a worker refused a corrupt delivery); restoring adopts a version from the run folder into a fresh ledger
(`coplay train --resume`). No ray here, so it is testable on its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from coplay.artifacts.bundle import AdapterBundle, ArtifactError
from coplay.artifacts.manifest import (
    check_bank_json,
    read_adapter_version,
    read_bank_version,
    write_adapter_version,
    write_bank_version,
)
from coplay.files import sha256_bytes
from coplay.runs import RunDir
from coplay.types import AdapterVersion, BankVersion


@dataclass
class ArtifactLedger:
    """Published versions (bytes and records) and acknowledgements. `run` None: in memory only (tests)."""

    run: RunDir | None
    adapters: dict[tuple[str, int], tuple[AdapterBundle, AdapterVersion]] = field(default_factory=dict)
    banks: dict[tuple[str, int], tuple[bytes, BankVersion]] = field(default_factory=dict)
    # (kind, name, v) -> worker -> sha
    acks: dict[tuple[str, str, int], dict[str, str]] = field(default_factory=dict)

    # ------------------------------------------------------------------ adapters
    def publish_adapter(self, adapter: str, version: int, files: dict[str, bytes], sha256: str,
                        learner_step: int) -> AdapterVersion:
        """Publish an adapter bundle; the announced checksum must match its bytes (a transfer that changed
        them is refused)."""
        bundle = AdapterBundle.of(files)
        if bundle.sha256 != sha256:
            raise ArtifactError(f"adapter {adapter}@v{version}: checksum {sha256[:12]} does not match its "
                                f"bytes ({bundle.sha256[:12]}); not published")
        key = (adapter, version)
        if key in self.adapters:
            if self.adapters[key][1].sha256 != sha256:
                raise ArtifactError(f"adapter {adapter}@v{version} is already published with other bytes")
            return self.adapters[key][1]
        if self.run is not None:
            record = write_adapter_version(self.run.adapter_dir(adapter, version), bundle, adapter, version,
                                           learner_step)
        else:
            record = AdapterVersion(adapter, version, sha256, learner_step, "")
        self.adapters[key] = (bundle, record)
        return record

    def get_adapter(self, adapter: str, version: int) -> tuple[AdapterBundle, AdapterVersion]:
        try:
            return self.adapters[(adapter, version)]
        except KeyError:
            raise ArtifactError(f"adapter {adapter}@v{version} was never published") from None

    def republish_adapter(self, adapter: str, version: int) -> AdapterVersion:
        """Re-read a published adapter from its run-folder copy (after a refused delivery); the copy must
        still match the recorded checksum."""
        _, record = self.get_adapter(adapter, version)
        if not record.path:
            return record  # in memory only: the bytes held are the published ones
        bundle, _ = read_adapter_version(record.path)
        if bundle.sha256 != record.sha256:
            raise ArtifactError(f"adapter copy {record.path} no longer matches sha256 {record.sha256[:12]}")
        self.adapters[(adapter, version)] = (bundle, record)
        return record

    def restore_adapter(self, adapter: str, version: int) -> AdapterVersion:
        """Adopt `adapters/<adapter>/v<version>/` of the run folder (checked against its manifest)."""
        folder = self._run("restore_adapter").adapter_dir(adapter, version)
        bundle, record = read_adapter_version(folder)
        if (record.adapter, record.version) != (adapter, version):
            raise ArtifactError(f"{folder}: its manifest names {record.engine_name}, "
                                f"expected {adapter}@v{version}")
        self.adapters[(adapter, version)] = (bundle, record)
        return record

    # ------------------------------------------------------------------ banks
    def publish_bank(self, bank_key: str, version: int, data: bytes, iteration: int) -> BankVersion:
        """Publish a bank version (its JSON bytes); the run folder keeps `banks/<key>/v<n>.json` and its
        manifest. A bank that is not JSON is never published."""
        sha = sha256_bytes(data)
        key = (bank_key, version)
        if key in self.banks:
            if self.banks[key][1].sha256 != sha:
                raise ArtifactError(f"bank {bank_key} v{version} is already published with other bytes")
            return self.banks[key][1]
        check_bank_json(data, bank_key, version)
        if self.run is not None:
            record = write_bank_version(self.run.bank_path(bank_key, version), data, bank_key, version,
                                        iteration)
        else:
            record = BankVersion(bank_key, version, sha, iteration, "")
        self.banks[key] = (data, record)
        return record

    def get_bank(self, bank_key: str, version: int) -> tuple[bytes, BankVersion]:
        try:
            return self.banks[(bank_key, version)]
        except KeyError:
            raise ArtifactError(f"bank {bank_key} v{version} was never published") from None

    def republish_bank(self, bank_key: str, version: int) -> BankVersion:
        """Re-read a bank version from its run-folder copy; it must still match the recorded sha256."""
        _, record = self.get_bank(bank_key, version)
        if not record.path:
            return record
        data, _ = read_bank_version(record.path)
        if sha256_bytes(data) != record.sha256:
            raise ArtifactError(f"bank copy {record.path} no longer matches sha256 {record.sha256[:12]}")
        self.banks[(bank_key, version)] = (data, record)
        return record

    def restore_bank(self, bank_key: str, version: int) -> BankVersion:
        """Adopt `banks/<key>/v<version>.json` of the run folder (checked against its manifest)."""
        data, record = read_bank_version(self._run("restore_bank").bank_path(bank_key, version))
        self.banks[(bank_key, version)] = (data, record)
        return record

    def latest_bank_version(self, bank_key: str, at_most: int) -> int | None:
        versions = [v for (k, v) in self.banks if k == bank_key and v <= at_most]
        return max(versions) if versions else None

    # ------------------------------------------------------------------ acknowledgements
    def acknowledge(self, worker: str, kind: str, name: str, version: int, sha256: str) -> None:
        """A worker loaded `name` v`version` and reports the checksum it verified."""
        expected = (self.get_adapter(name, version)[1].sha256 if kind == "adapter"
                    else self.get_bank(name, version)[1].sha256)
        if sha256 != expected:
            raise ArtifactError(f"worker {worker} acknowledged {kind} {name} v{version} with sha256 "
                                f"{sha256[:12]}, published {expected[:12]}")
        self.acks.setdefault((kind, name, version), {})[worker] = sha256

    def acknowledged_by(self, kind: str, name: str, version: int) -> dict[str, str]:
        return dict(self.acks.get((kind, name, version), {}))

    def _run(self, what: str) -> RunDir:
        if self.run is None:
            raise ArtifactError(f"{what} needs a ledger with a run folder")
        return self.run

