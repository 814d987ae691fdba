"""The ArtifactStore actor: adapters and banks by version, bytes served through Ray's object store, a copy
in the run folder, acknowledgements (docs/architecture.md). The logic is
`coplay.artifacts.ledger.ArtifactLedger`.

Adapter traffic (docs/gpu-clusters.md): each adapter version enters Ray's object store once. The learner's
rank 0 puts the bundle there and the store is handed the `ObjectRef` (`publish_adapter_ref`); a version
published by value (`publish_adapter`) or read back from the run folder is put by the store itself. The
store holds the ref, never a heap copy, and workers pull the bundle by that ref (`adapter_ref`,
`coplay.actors.adapter_pull`): Ray copies it to each node once, however many workers there pull it, instead
of serializing it anew into every worker's reply. A ref whose owner died (the learner rank that put it) is
replaced from the run-folder copy on request (`reseal_adapter`, counted).

Besides the ledger it remembers the *serving set* (the adapter and bank versions the driver last asked every
worker to serve), so a restarted or newly added RolloutWorker pulls the current versions by itself; the
serving set's bytes stay held, other versions only within `cluster.store_window_mb` (older ones are read
back from the run folder on demand). The serving set is also written to the run folder (`serving.json`).

A restarted store (Ray restarts it, `max_restarts=-1`) rebuilds its ledger from the run folder's manifests
and its serving set from `serving.json`, so every later pull succeeds.

Test hook: `testing_corrupt_deliveries(kind, name, version, count)` makes the next `count` deliveries of one
version hand out flipped bytes (the run-folder copy and the recorded checksum stay intact), to exercise the
corrupt-artifact protocol on a real cluster. Nothing in a run calls it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray

from coplay.actors.connect import actor_restarted
from coplay.artifacts import ADAPTER_WEIGHTS, AdapterBundle, ArtifactLedger
from coplay.artifacts.ledger import DEFAULT_WINDOW_BYTES
from coplay.files import write_json_atomic
from coplay.runs import RunDir
from coplay.types import AdapterVersion, BankVersion


def _flipped(data: bytes) -> bytes:
    """The same bytes with one bit flipped in the middle (a corrupt delivery)."""
    if not data:
        return b"\x01"
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1:]


@dataclass(frozen=True)
class AdapterDelivery:
    """One adapter version for a worker: the `ObjectRef` of its `AdapterBundle` in Ray's object store (the
    worker gets it with `ray.get`, a pull from the nearest node holding it), its record and its size."""

    ref: Any
    record: AdapterVersion
    nbytes: int


@ray.remote(num_cpus=0, max_restarts=-1)
class ArtifactStore:
    """Holds every published version; workers pull by version and acknowledge the checksum they loaded."""

    def __init__(self, run_root: str | None, window_bytes: int = DEFAULT_WINDOW_BYTES) -> None:
        run = RunDir.open(Path(run_root)) if run_root else None
        self.restarted = actor_restarted()
        self.serving_adapters: list[tuple[str, int]] = []
        self.serving_banks: dict[str, int] = {}
        self.corrupt_next: dict[tuple[str, str, int], int] = {}  # test hook: deliveries left to corrupt
        self.puts = self.reseals = 0  # bundles this store put into the object store; lost refs replaced
        seal = {"seal": self._seal, "unseal": ray.get}
        if run is not None and self.restarted:
            self.ledger = ArtifactLedger.from_run(run, window_bytes, **seal)
            self._load_serving(run)
        else:
            self.ledger = ArtifactLedger(run, window_bytes, **seal)

    def _seal(self, bundle: AdapterBundle) -> Any:
        """Put a bundle into Ray's object store (this store owns it); counted."""
        self.puts += 1
        return ray.put(bundle)

    def _serving_path(self) -> Path | None:
        return self.ledger.run.root / "serving.json" if self.ledger.run is not None else None

    def _load_serving(self, run: RunDir) -> None:
        path = run.root / "serving.json"
        if path.exists():
            data = json.loads(path.read_text())
            self.set_serving([(a, int(v)) for a, v in data["adapters"]],
                             {k: int(v) for k, v in data["banks"].items()})

    def ping(self) -> bool:
        return True

    def pid(self) -> int:
        """The actor's process id (memory measurements)."""
        return os.getpid()

    def storage_probe(self, run_root: str, token: str) -> Any:
        """Write this actor's probe file into the run folder (`coplay.actors.storage_probe`)."""
        from coplay.actors.storage_probe import write_probe

        return write_probe(run_root, "the artifact store", token)

    def memory(self) -> dict[str, int]:
        """What the store holds: payload bytes held (adapters in Ray's object store, banks in memory),
        versions held, versions known, reads from the run folder, bundles it put into the object store, lost
        refs it replaced, whether this incarnation is a restart."""
        return {"held_bytes": self.ledger.held_bytes(), "held_versions": len(self.ledger.held),
                "versions": len(self.ledger.adapters) + len(self.ledger.banks), "reads": self.ledger.reads,
                "puts": self.puts, "reseals": self.reseals, "restarted": int(self.restarted)}

    # ------------------------------------------------------------------ adapters
    def publish_adapter(self, adapter: str, version: int, files: dict[str, bytes], sha256: str,
                        learner_step: int) -> AdapterVersion:
        """Publish by value (tools, tests): the store puts the bundle into the object store itself."""
        return self.ledger.publish_adapter(adapter, version, files, sha256, learner_step)

    def publish_adapter_ref(self, adapter: str, version: int, refs: list[Any], sha256: str,
                            learner_step: int) -> AdapterVersion:
        """Publish a bundle its publisher already put into the object store (`refs`: [its ObjectRef], in a
        list so Ray hands over the ref, not the value): its bytes are read once here for the run-folder
        copy and the checksum, and the ref itself is what workers pull."""
        (ref,) = refs
        bundle: AdapterBundle = ray.get(ref)
        return self.ledger.publish_adapter(adapter, version, bundle.files, sha256, learner_step, sealed=ref)

    def adapter_ref(self, adapter: str, version: int) -> AdapterDelivery:
        """A version by reference (what workers pull); read back from the run folder and put anew when it
        is outside the window."""
        ref, record = self.ledger.holding(adapter, version)
        if self._corrupt_this("adapter", adapter, version):
            bundle = ray.get(ref)
            files = {**bundle.files, ADAPTER_WEIGHTS: _flipped(bundle.files[ADAPTER_WEIGHTS])}
            ref = ray.put(AdapterBundle(files, bundle.sha256))  # the announced checksum no longer matches
        key = ("adapter", adapter, version)
        return AdapterDelivery(ref, record, self.ledger.sizes.get(key, 0))

    def reseal_adapter(self, adapter: str, version: int) -> AdapterDelivery:
        """A worker could not get a version's ref (its owner, the learner rank that put it, died): the
        bundle is read back from its run-folder copy and put by this store; counted in `reseals`."""
        self.reseals += 1
        self.ledger.republish_adapter(adapter, version)
        return self.adapter_ref(adapter, version)

    def get_adapter(self, adapter: str, version: int) -> tuple[AdapterBundle, AdapterVersion]:
        """A version by value (the driver's tools and tests; workers pull by reference)."""
        bundle, record = self.ledger.get_adapter(adapter, version)
        if self._corrupt_this("adapter", adapter, version):
            files = {**bundle.files, ADAPTER_WEIGHTS: _flipped(bundle.files[ADAPTER_WEIGHTS])}
            bundle = AdapterBundle(files, bundle.sha256)  # the announced checksum no longer matches
        return bundle, record

    def republish_adapter(self, adapter: str, version: int) -> AdapterVersion:
        return self.ledger.republish_adapter(adapter, version)

    def restore_adapter(self, adapter: str, version: int) -> AdapterVersion:
        return self.ledger.restore_adapter(adapter, version)

    # ------------------------------------------------------------------ banks
    def publish_bank(self, bank_key: str, version: int, data: bytes, iteration: int) -> BankVersion:
        return self.ledger.publish_bank(bank_key, version, data, iteration)

    def get_bank(self, bank_key: str, version: int) -> tuple[bytes, BankVersion]:
        data, record = self.ledger.get_bank(bank_key, version)
        if self._corrupt_this("bank", bank_key, version):
            data = _flipped(data)
        return data, record

    def republish_bank(self, bank_key: str, version: int) -> BankVersion:
        return self.ledger.republish_bank(bank_key, version)

    def restore_bank(self, bank_key: str, version: int) -> BankVersion:
        return self.ledger.restore_bank(bank_key, version)

    def bank_versions(self) -> list[tuple[str, int]]:
        return sorted(self.ledger.banks)

    def adapter_versions(self) -> list[tuple[str, int]]:
        return sorted(self.ledger.adapters)

    # ------------------------------------------------------------------ serving set, acks
    def set_serving(self, adapters: list[tuple[str, int]], banks: dict[str, int]) -> None:
        """What every worker must serve now (recorded by the driver before each sync)."""
        self.serving_adapters, self.serving_banks = [(str(a), int(v)) for a, v in adapters], dict(banks)
        self.ledger.pin(self.serving_adapters, self.serving_banks)
        path = self._serving_path()
        if path is not None:
            write_json_atomic(path, {"adapters": self.serving_adapters, "banks": self.serving_banks})

    def serving(self) -> tuple[list[tuple[str, int]], dict[str, int]]:
        return list(self.serving_adapters), dict(self.serving_banks)

    def acknowledge(self, worker: str, kind: str, name: str, version: int, sha256: str) -> None:
        self.ledger.acknowledge(worker, kind, name, version, sha256)

    def acknowledged_by(self, kind: str, name: str, version: int) -> dict[str, str]:
        return self.ledger.acknowledged_by(kind, name, version)

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
