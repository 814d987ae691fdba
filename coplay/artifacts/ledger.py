"""The artifact ledger: every published adapter and bank version of a run, with its bytes, its checksum
and its run-folder copy (docs/architecture.md), and the acknowledgements workers send back with the checksum
they loaded. The `ArtifactStore` actor (coplay/actors/artifact_store.py) is this class behind Ray.

Publishing a version = writing its run-folder copy with a manifest (`coplay.artifacts.manifest`) and
keeping its bytes for delivery. Versions are immutable: publishing the same version again with the same
bytes is a no-op, with other bytes an error. Republishing re-reads a version from its run-folder copy (after
a worker refused a corrupt delivery); restoring adopts a version from the run folder into a fresh ledger
(`coplay train --resume`).

Bounded memory: the records of every version stay (a few hundred bytes each), but the *bytes* are held only
for the pinned versions (the serving set, `pin`) and the most recently published or delivered other versions
whose payloads together fit `window_bytes` (a byte budget, not a count: one 8B adapter version weighs as much
as thousands of tiny ones); an older version is read back from its run-folder copy on demand, checked against
its manifest and its recorded checksum. A ledger without a run folder (tests) has nowhere to read from and
keeps everything.

Sealing: what the ledger holds for an adapter version is `seal(bundle)`, by default the bundle itself. The
ArtifactStore seals into Ray's object store (an `ObjectRef`, put once per version, which workers pull by
reference), so the bytes live in shared memory rather than in the store's heap; `unseal` turns a held value
back into the bundle. `holding` hands out the held value itself (the store's delivery by reference).

Rebuilding: `ArtifactLedger.from_run(run)` reads the records of every version the run folder holds from
their manifests (no bytes), so a restarted ArtifactStore serves every version published before it died.
Manifests that do not parse are skipped and listed in `skipped` (a version folder half written when the
store died has no manifest yet and is not a version). Acknowledgements are not on disk: after a rebuild
they start empty (workers acknowledge again at their next load). No ray here, so it is testable on its own.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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
DEFAULT_WINDOW_BYTES = 1 << 30  # 1 GiB: `cluster.store_window_mb`'s default


def _same(value: Any) -> Any:
    return value


@dataclass
class ArtifactLedger:
    """Published versions (records, and the bytes of a bounded window) and acknowledgements. `run` None: in
    memory only (tests). `window_bytes`: payload bytes held besides the pinned versions. `seal` / `unseal`:
    how an adapter bundle is held and read back (module docstring)."""

    run: RunDir | None
    window_bytes: int = DEFAULT_WINDOW_BYTES
    seal: Callable[[AdapterBundle], Any] = _same
    unseal: Callable[[Any], AdapterBundle] = _same
    adapters: dict[tuple[str, int], AdapterVersion] = field(default_factory=dict)
    banks: dict[tuple[str, int], BankVersion] = field(default_factory=dict)
    # (kind, name, v) -> worker -> sha
    acks: dict[Key, dict[str, str]] = field(default_factory=dict)
    held: OrderedDict[Key, Any] = field(default_factory=OrderedDict)  # oldest use first: sealed or bytes
    sizes: dict[Key, int] = field(default_factory=dict)  # payload bytes of each held version
    pinned: set[Key] = field(default_factory=set)
    reads: int = 0  # versions read back from the run folder on demand
    skipped: list[str] = field(default_factory=list)  # manifests a rebuild could not read

    @classmethod
    def from_run(cls, run: RunDir, window_bytes: int = DEFAULT_WINDOW_BYTES, seal: Callable = _same,
                 unseal: Callable = _same) -> ArtifactLedger:
        """The records of every version in the run folder, from their manifests (bytes read on demand)."""
        ledger = cls(run, window_bytes, seal, unseal)
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

    def _hold(self, key: Key, payload: AdapterBundle | bytes, sealed: Any = None) -> Any:
        """Hold a payload (an adapter bundle is sealed first, unless `sealed` is given), most recently used
        last; returns what is held (it may be let go at once when it alone exceeds the window)."""
        if isinstance(payload, AdapterBundle):
            self.sizes[key] = sum(len(b) for b in payload.files.values())
            value = self.seal(payload) if sealed is None else sealed
        else:
            self.sizes[key], value = len(payload), payload
        self.held[key] = value
        self.held.move_to_end(key)
        self._evict()
        return value

    def _touch(self, key: Key) -> None:
        self.held.move_to_end(key)
        self._evict()

    def _evict(self) -> None:
        """Drop the least recently used unpinned payloads until the rest fit `window_bytes`."""
        if self.run is None:
            return  # nothing to read back from
        unpinned = [k for k in self.held if k not in self.pinned]
        over = sum(self.sizes[k] for k in unpinned) - self.window_bytes
        for key in unpinned:
            if over <= 0:
                break
            over -= self.sizes.pop(key)
            del self.held[key]

    def held_bytes(self) -> int:
        """Bytes of artifact payloads held now (in memory, or in Ray's object store once sealed there)."""
        return sum(self.sizes[k] for k in self.held)

    # ------------------------------------------------------------------ adapters
    def publish_adapter(self, adapter: str, version: int, files: dict[str, bytes], sha256: str,
                        learner_step: int, sealed: Any = None) -> AdapterVersion:
        """Publish an adapter bundle; the announced checksum must match its bytes (a transfer that changed
        them is refused). `sealed`: the bundle already sealed by its publisher (the learner put it into Ray's
        object store), held instead of sealing it again."""
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
        self._hold(("adapter", adapter, version), bundle, sealed)
        return record

    def holding(self, adapter: str, version: int) -> tuple[Any, AdapterVersion]:
        """What the ledger holds for a version (sealed) and its record; read back from the run folder and
        sealed anew when outside the window."""
        record = self.adapters.get((adapter, version))
        if record is None:
            raise ArtifactError(f"adapter {adapter}@v{version} was never published")
        key: Key = ("adapter", adapter, version)
        if key in self.held:
            value = self.held[key]
            self._touch(key)
            return value, record
        self.reads += 1
        return self._hold(key, self._read_adapter(record)), record

    def get_adapter(self, adapter: str, version: int) -> tuple[AdapterBundle, AdapterVersion]:
        """The bundle and record of a version; read back from the run folder when outside the window."""
        sealed, record = self.holding(adapter, version)
        return self.unseal(sealed), record

    def _read_adapter(self, record: AdapterVersion) -> AdapterBundle:
        bundle, _ = read_adapter_version(record.path)
        if bundle.sha256 != record.sha256:
            raise ArtifactError(f"adapter copy {record.path} no longer matches sha256 {record.sha256[:12]}")
        return bundle

    def republish_adapter(self, adapter: str, version: int) -> AdapterVersion:
        """Re-read a published adapter from its run-folder copy (after a refused delivery); the copy must
        still match the recorded checksum."""
        record = self.adapters.get((adapter, version))  # not `get_adapter`: what is held may be lost
        if record is None:
            raise ArtifactError(f"adapter {adapter}@v{version} was never published")
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
        else:
            self._touch(key)
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
