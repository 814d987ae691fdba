"""The artifact ledger: every published adapter and bank version of a run, with its bytes, its checksum
and its run-folder copy (docs/architecture.md), and the acknowledgements workers send back with the checksum
they loaded. The `ArtifactStore` actor (coplay/actors/artifact_store.py) is this class behind Ray.

Publishing a version = writing its run-folder copy with a manifest (`coplay.artifacts.manifest`) and
keeping its bytes for delivery. Versions are immutable: publishing the same version again with the same
bytes is a no-op, with other bytes an error. Republishing re-reads a version from its run-folder copy (after
a worker refused a corrupt delivery); restoring adopts a version from the run folder into a fresh ledger
(`coplay train --resume`).

Bounded memory: the records of every version stay (a few hundred bytes each), but the *bytes* are held only
for the pinned versions (the serving set, `pin`) and the `window` most recently published or delivered other
versions; an older version is read back from its run-folder copy on demand, checked against its manifest and
its recorded checksum. A ledger without a run folder (tests) has nowhere to read from and keeps everything.

Rebuilding: `ArtifactLedger.from_run(run)` reads the records of every version the run folder holds from
their manifests (no bytes), so a restarted ArtifactStore serves every version published before it died.
Manifests that do not parse are skipped and listed in `skipped` (a version folder half written when the
store died has no manifest yet and is not a version). Acknowledgements are not on disk: after a rebuild
they start empty (workers acknowledge again at their next load). No ray here, so it is testable on its own.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass, field

from coplay.artifacts.bundle import AdapterBundle, ArtifactError
from coplay.artifacts.manifest import (
    ADAPTER_MANIFEST,
    Manifest,
    check_bank_json,
    read_adapter_version,
    read_bank_version,
    write_adapter_version,
    write_bank_version,
)
from coplay.files import sha256_bytes
from coplay.runs import RunDir
from coplay.types import AdapterVersion, BankVersion

Key = tuple[str, str, int]  # (kind, name, version)
_VERSION_DIR = re.compile(r"^v(\d+)$")
_BANK_MANIFEST = re.compile(r"^v(\d+)\.manifest\.json$")
DEFAULT_WINDOW = 8


@dataclass
class ArtifactLedger:
    """Published versions (records, and the bytes of a bounded window) and acknowledgements. `run` None: in
    memory only (tests). `window`: versions held in memory besides the pinned ones."""

    run: RunDir | None
    window: int = DEFAULT_WINDOW
    adapters: dict[tuple[str, int], AdapterVersion] = field(default_factory=dict)
    banks: dict[tuple[str, int], BankVersion] = field(default_factory=dict)
    # (kind, name, v) -> worker -> sha
    acks: dict[Key, dict[str, str]] = field(default_factory=dict)
    held: OrderedDict[Key, AdapterBundle | bytes] = field(default_factory=OrderedDict)  # oldest use first
    pinned: set[Key] = field(default_factory=set)
    reads: int = 0  # versions read back from the run folder on demand
    skipped: list[str] = field(default_factory=list)  # manifests a rebuild could not read

    @classmethod
    def from_run(cls, run: RunDir, window: int = DEFAULT_WINDOW) -> ArtifactLedger:
        """The records of every version in the run folder, from their manifests (bytes read on demand)."""
        ledger = cls(run, window)
        for folder in sorted(run.root.glob("adapters/*/v*")):
            if folder.is_dir() and _VERSION_DIR.match(folder.name):
                try:
                    m = Manifest.read(folder / ADAPTER_MANIFEST, "adapter")
                except ArtifactError as exc:
                    ledger.skipped.append(str(exc))
                    continue
                ledger.adapters[(m.name, m.version)] = AdapterVersion(m.name, m.version, m.sha256,
                                                                      m.learner_step or 0, str(folder))
        banks = run.root / "banks"
        for path in sorted(banks.rglob("v*.manifest.json")) if banks.is_dir() else []:
            match = _BANK_MANIFEST.match(path.name)
            if match:
                try:
                    m = Manifest.read(path, "bank")
                except ArtifactError as exc:
                    ledger.skipped.append(str(exc))
                    continue
                ledger.banks[(m.name, m.version)] = BankVersion(
                    m.name, m.version, m.sha256, m.iteration or 0, str(path.with_name(f"v{m.version}.json")))
        return ledger

    # ------------------------------------------------------------------ the window of held bytes
    def pin(self, adapters: list[tuple[str, int]], banks: dict[str, int]) -> None:
        """The serving set: these versions' bytes stay in memory whatever the window."""
        self.pinned = ({("adapter", a, v) for a, v in adapters}
                       | {("bank", k, v) for k, v in banks.items()})
        self._evict()

    def _hold(self, key: Key, payload: AdapterBundle | bytes) -> None:
        self.held[key] = payload
        self.held.move_to_end(key)
        self._evict()

    def _evict(self) -> None:
        if self.run is None:
            return  # nothing to read back from
        unpinned = [k for k in self.held if k not in self.pinned]
        for key in unpinned[:max(0, len(unpinned) - self.window)]:
            del self.held[key]

    def held_bytes(self) -> int:
        """Bytes of artifact payloads held in memory now."""
        return sum(sum(len(b) for b in p.files.values()) if isinstance(p, AdapterBundle) else len(p)
                   for p in self.held.values())

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
            if self.adapters[key].sha256 != sha256:
                raise ArtifactError(f"adapter {adapter}@v{version} is already published with other bytes")
            return self.adapters[key]
        if self.run is not None:
            record = write_adapter_version(self.run.adapter_dir(adapter, version), bundle, adapter, version,
                                           learner_step)
        else:
            record = AdapterVersion(adapter, version, sha256, learner_step, "")
        self.adapters[key] = record
        self._hold(("adapter", adapter, version), bundle)
        return record

    def get_adapter(self, adapter: str, version: int) -> tuple[AdapterBundle, AdapterVersion]:
        """The bundle and record of a version; read back from the run folder when outside the window."""
        record = self.adapters.get((adapter, version))
        if record is None:
            raise ArtifactError(f"adapter {adapter}@v{version} was never published")
        key: Key = ("adapter", adapter, version)
        bundle = self.held.get(key)
        if bundle is None:
            bundle = self._read_adapter(record)
            self.reads += 1
        self._hold(key, bundle)
        assert isinstance(bundle, AdapterBundle)
        return bundle, record

    def _read_adapter(self, record: AdapterVersion) -> AdapterBundle:
        bundle, _ = read_adapter_version(record.path)
        if bundle.sha256 != record.sha256:
            raise ArtifactError(f"adapter copy {record.path} no longer matches sha256 {record.sha256[:12]}")
        return bundle

    def republish_adapter(self, adapter: str, version: int) -> AdapterVersion:
        """Re-read a published adapter from its run-folder copy (after a refused delivery); the copy must
        still match the recorded checksum."""
        _, record = self.get_adapter(adapter, version)
        if not record.path:
            return record  # in memory only: the bytes held are the published ones
        self._hold(("adapter", adapter, version), self._read_adapter(record))
        return record

    def restore_adapter(self, adapter: str, version: int) -> AdapterVersion:
        """Adopt `adapters/<adapter>/v<version>/` of the run folder (checked against its manifest)."""
        folder = self._run("restore_adapter").adapter_dir(adapter, version)
        bundle, record = read_adapter_version(folder)
        if (record.adapter, record.version) != (adapter, version):
            raise ArtifactError(f"{folder}: its manifest names {record.engine_name}, "
                                f"expected {adapter}@v{version}")
        self.adapters[(adapter, version)] = record
        self._hold(("adapter", adapter, version), bundle)
        return record

    # ------------------------------------------------------------------ banks
    def publish_bank(self, bank_key: str, version: int, data: bytes, iteration: int) -> BankVersion:
        """Publish a bank version (its JSON bytes); the run folder keeps `banks/<key>/v<n>.json` and its
        manifest. A bank that is not JSON is never published."""
        sha = sha256_bytes(data)
        key = (bank_key, version)
        if key in self.banks:
            if self.banks[key].sha256 != sha:
                raise ArtifactError(f"bank {bank_key} v{version} is already published with other bytes")
            return self.banks[key]
        check_bank_json(data, bank_key, version)
        if self.run is not None:
            record = write_bank_version(self.run.bank_path(bank_key, version), data, bank_key, version,
                                        iteration)
        else:
            record = BankVersion(bank_key, version, sha, iteration, "")
        self.banks[key] = record
        self._hold(("bank", bank_key, version), data)
        return record

    def get_bank(self, bank_key: str, version: int) -> tuple[bytes, BankVersion]:
        """A bank version's bytes and record; read back from the run folder when outside the window."""
        record = self.banks.get((bank_key, version))
        if record is None:
            raise ArtifactError(f"bank {bank_key} v{version} was never published")
        key: Key = ("bank", bank_key, version)
        data = self.held.get(key)
        if data is None:
            data = self._read_bank(record)
            self.reads += 1
        self._hold(key, data)
        assert isinstance(data, bytes)
        return data, record

    def _read_bank(self, record: BankVersion) -> bytes:
        data, _ = read_bank_version(record.path)
        if sha256_bytes(data) != record.sha256:
            raise ArtifactError(f"bank copy {record.path} no longer matches sha256 {record.sha256[:12]}")
        return data

    def republish_bank(self, bank_key: str, version: int) -> BankVersion:
        """Re-read a bank version from its run-folder copy; it must still match the recorded sha256."""
        _, record = self.get_bank(bank_key, version)
        if not record.path:
            return record
        self._hold(("bank", bank_key, version), self._read_bank(record))
        return record

    def restore_bank(self, bank_key: str, version: int) -> BankVersion:
        """Adopt `banks/<key>/v<version>.json` of the run folder (checked against its manifest)."""
        data, record = read_bank_version(self._run("restore_bank").bank_path(bank_key, version))
        self.banks[(bank_key, version)] = record
        self._hold(("bank", bank_key, version), data)
        return record

    def latest_bank_version(self, bank_key: str, at_most: int) -> int | None:
        versions = [v for (k, v) in self.banks if k == bank_key and v <= at_most]
        return max(versions) if versions else None

    # ------------------------------------------------------------------ acknowledgements
    def acknowledge(self, worker: str, kind: str, name: str, version: int, sha256: str) -> None:
        """A worker loaded `name` v`version` and reports the checksum it verified."""
        record = self.adapters.get((name, version)) if kind == "adapter" else self.banks.get((name, version))
        if record is None:
            raise ArtifactError(f"worker {worker} acknowledged {kind} {name} v{version}, never published")
        if sha256 != record.sha256:
            raise ArtifactError(f"worker {worker} acknowledged {kind} {name} v{version} with sha256 "
                                f"{sha256[:12]}, published {record.sha256[:12]}")
        self.acks.setdefault((kind, name, version), {})[worker] = sha256

    def acknowledged_by(self, kind: str, name: str, version: int) -> dict[str, str]:
        return dict(self.acks.get((kind, name, version), {}))

    def _run(self, what: str) -> RunDir:
        if self.run is None:
            raise ArtifactError(f"{what} needs a ledger with a run folder")
        return self.run
