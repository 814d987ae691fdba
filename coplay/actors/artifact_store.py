"""The ArtifactStore actor: adapters and banks by version, bytes served through Ray's object store,
a copy in the run folder, acknowledgements and failure counts (DESIGN.md §6). Logic: `ArtifactLedger`."""

from __future__ import annotations

from pathlib import Path

import ray

from coplay.artifacts import ArtifactLedger
from coplay.runs import RunDir
from coplay.types import AdapterVersion, BankVersion


@ray.remote(num_cpus=0, max_restarts=-1)
class ArtifactStore:
    """Holds every published version; workers pull by version and acknowledge the checksum they loaded."""

    def __init__(self, run_root: str | None, max_failures: int = 3) -> None:
        self.ledger = ArtifactLedger(RunDir.open(Path(run_root)) if run_root else None, max_failures)

    def put_adapter(self, adapter: str, version: int, files: dict[str, bytes], sha256: str,
                    learner_step: int) -> AdapterVersion:
        return self.ledger.put_adapter(adapter, version, files, sha256, learner_step)

    def get_adapter(self, adapter: str, version: int) -> tuple[dict[str, bytes], AdapterVersion]:
        return self.ledger.get_adapter(adapter, version)

    def republish_adapter(self, adapter: str, version: int) -> AdapterVersion:
        return self.ledger.reload_adapter(adapter, version)[1]

    def put_bank(self, bank_key: str, version: int, data: bytes, iteration: int) -> BankVersion:
        return self.ledger.put_bank(bank_key, version, data, iteration)

    def get_bank(self, bank_key: str, version: int) -> tuple[bytes, BankVersion]:
        return self.ledger.get_bank(bank_key, version)

    def acknowledge(self, worker: str, kind: str, name: str, version: int, sha256: str) -> None:
        self.ledger.acknowledge(worker, kind, name, version, sha256)

    def acknowledged_by(self, kind: str, name: str, version: int) -> dict[str, str]:
        return self.ledger.acknowledged_by(kind, name, version)

    def report_failure(self, kind: str, name: str, version: int, error: str) -> int:
        return self.ledger.report_failure(kind, name, version, error)
