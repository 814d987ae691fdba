"""The ArtifactStore actor: adapters and banks by version, bytes served through Ray's object store,
a copy in the run folder, acknowledgements and failure counts (DESIGN.md §6). Logic: `ArtifactLedger`.

Besides the ledger it remembers the *serving set* (the adapter and bank versions the driver last asked every
worker to serve), so a restarted or newly added RolloutWorker pulls the current versions by itself, and it
can re-adopt versions from the run folder into a fresh store (`coplay train --resume`).

Test hook: `testing_corrupt_deliveries(kind, name, version, count)` makes the next `count` deliveries of one
version hand out flipped bytes (the run-folder copy and the recorded checksum stay intact), to exercise the
corrupt-artifact protocol on a real cluster. Nothing in a run calls it.
"""

from __future__ import annotations

import json
from pathlib import Path

import ray

from coplay.artifacts import ArtifactError, ArtifactLedger
from coplay.engines.adapters import ADAPTER_WEIGHTS, BUNDLE_FILES
from coplay.runs import RunDir
from coplay.types import AdapterVersion, BankVersion


def _flipped(data: bytes) -> bytes:
    """The same bytes with one bit flipped in the middle (a corrupt delivery)."""
    if not data:
        return b"\x01"
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1:]


@ray.remote(num_cpus=0, max_restarts=-1)
class ArtifactStore:
    """Holds every published version; workers pull by version and acknowledge the checksum they loaded."""

    def __init__(self, run_root: str | None, max_failures: int = 3) -> None:
        self.run = RunDir.open(Path(run_root)) if run_root else None
        self.ledger = ArtifactLedger(self.run, max_failures)
        self.serving_adapters: list[tuple[str, int]] = []
        self.serving_banks: dict[str, int] = {}
        self.corrupt_next: dict[tuple[str, str, int], int] = {}  # test hook: deliveries left to corrupt

    # ------------------------------------------------------------------ adapters
    def put_adapter(self, adapter: str, version: int, files: dict[str, bytes], sha256: str,
                    learner_step: int) -> AdapterVersion:
        return self.ledger.put_adapter(adapter, version, files, sha256, learner_step)

    def get_adapter(self, adapter: str, version: int) -> tuple[dict[str, bytes], AdapterVersion]:
        files, record = self.ledger.get_adapter(adapter, version)
        if self._corrupt_this("adapter", adapter, version):
            files = {**files, ADAPTER_WEIGHTS: _flipped(files[ADAPTER_WEIGHTS])}
        return files, record

    def republish_adapter(self, adapter: str, version: int) -> AdapterVersion:
        """Reload a version from its run-folder copy (after a refused delivery)."""
        return self.ledger.reload_adapter(adapter, version)[1]

    def restore_adapter(self, adapter: str, version: int) -> AdapterVersion:
        """Adopt `adapters/<adapter>/v<version>/` of the run folder into this (fresh) store; the files must
        match the sha256 of their manifest."""
        if self.run is None:
            raise ArtifactError("restore_adapter needs a store with a run folder")
        folder = self.run.adapter_dir(adapter, version)
        try:
            manifest = json.loads((folder / "manifest.json").read_text())
            files = {name: (folder / name).read_bytes() for name in BUNDLE_FILES}
        except (OSError, json.JSONDecodeError) as exc:
            raise ArtifactError(f"cannot restore adapter {adapter}@v{version} from {folder}: {exc}") from None
        return self.ledger.put_adapter(adapter, version, files, manifest["sha256"], int(manifest["learner_step"]))

    # ------------------------------------------------------------------ banks
    def put_bank(self, bank_key: str, version: int, data: bytes, iteration: int) -> BankVersion:
        return self.ledger.put_bank(bank_key, version, data, iteration)

    def get_bank(self, bank_key: str, version: int) -> tuple[bytes, BankVersion]:
        data, record = self.ledger.get_bank(bank_key, version)
        if self._corrupt_this("bank", bank_key, version):
            data = _flipped(data)
        return data, record

    def republish_bank(self, bank_key: str, version: int) -> BankVersion:
        """Reload a bank version from its run-folder copy; it must still match the recorded sha256."""
        from coplay.artifacts import bank_sha256

        _, record = self.ledger.get_bank(bank_key, version)
        data = Path(record.path).read_bytes() if record.path else self.ledger.banks[(bank_key, version)][0]
        if bank_sha256(data) != record.sha256:
            raise ArtifactError(f"bank copy {record.path} no longer matches sha256 {record.sha256[:12]}")
        self.ledger.banks[(bank_key, version)] = (data, record)
        return record

    def restore_bank(self, bank_key: str, version: int, iteration: int) -> BankVersion:
        """Adopt `banks/<key>/v<version>.json` of the run folder into this (fresh) store."""
        if self.run is None:
            raise ArtifactError("restore_bank needs a store with a run folder")
        path = self.run.bank_path(bank_key, version)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ArtifactError(f"cannot restore bank {bank_key} v{version} from {path}: {exc}") from None
        return self.ledger.put_bank(bank_key, version, data, iteration)

    def bank_versions(self) -> list[tuple[str, int]]:
        return sorted(self.ledger.banks)

    # ------------------------------------------------------------------ serving set, acks, failures
    def set_serving(self, adapters: list[tuple[str, int]], banks: dict[str, int]) -> None:
        """What every worker must serve now (recorded by the driver before each sync)."""
        self.serving_adapters, self.serving_banks = [tuple(a) for a in adapters], dict(banks)

    def serving(self) -> tuple[list[tuple[str, int]], dict[str, int]]:
        return list(self.serving_adapters), dict(self.serving_banks)

    def acknowledge(self, worker: str, kind: str, name: str, version: int, sha256: str) -> None:
        self.ledger.acknowledge(worker, kind, name, version, sha256)

    def acknowledged_by(self, kind: str, name: str, version: int) -> dict[str, str]:
        return self.ledger.acknowledged_by(kind, name, version)

    def report_failure(self, kind: str, name: str, version: int, error: str) -> int:
        return self.ledger.report_failure(kind, name, version, error)

    def failures(self) -> dict[str, int]:
        return {f"{kind}:{name}@v{version}": n for (kind, name, version), n in self.ledger.failures.items()}

    # ------------------------------------------------------------------ test hook
    def testing_corrupt_deliveries(self, kind: str, name: str, version: int, count: int) -> None:
        """TEST HOOK: the next `count` deliveries of `kind` (`adapter` | `bank`) `name` v`version` carry one
        flipped bit. The stored bytes, the run-folder copy and the checksum are untouched."""
        self.corrupt_next[(kind, name, version)] = count

    def _corrupt_this(self, kind: str, name: str, version: int) -> bool:
        left = self.corrupt_next.get((kind, name, version), 0)
        if left <= 0:
            return False
        self.corrupt_next[(kind, name, version)] = left - 1
        return True
