"""Versioned artifacts of a run, in one place (docs/architecture.md): how adapter weights and skill banks
travel from the learner and the skill-bank actor to the rollout workers.

    bundle.py     an adapter version's bytes (PEFT folder <-> bytes), its canonical config, its checksum;
                  `ArtifactError`, the one error of this package
    manifest.py   the one manifest format (adapters and banks) and the version folder layout
    ledger.py     every published version, its run-folder copy, acknowledgements (the ArtifactStore's logic)
    serving.py    the worker's side: what to load, keep or retire; checking a delivered bank
    republish.py  the driver's side: a refused delivery is republished, and stops the run after N failures

The Ray shells stay in `coplay/actors/` (ArtifactStore, RolloutWorker.sync, System.sync_worker). Standard
library only at import time; never ray.
"""

from coplay.artifacts.bundle import (
    ADAPTER_CONFIG,
    ADAPTER_WEIGHTS,
    BUNDLE_FILES,
    AdapterBundle,
    ArtifactError,
    bundle_sha256,
    canonical_adapter_config,
)
from coplay.artifacts.ledger import ArtifactLedger
from coplay.artifacts.manifest import (
    Manifest,
    bank_manifest_path,
    read_adapter_version,
    read_bank_version,
    write_adapter_version,
    write_bank_version,
)
from coplay.artifacts.republish import RepublishPolicy
from coplay.artifacts.serving import Refusal, SyncReport

__all__ = [
    "ADAPTER_CONFIG", "ADAPTER_WEIGHTS", "BUNDLE_FILES", "AdapterBundle", "ArtifactError", "ArtifactLedger",
    "Manifest", "Refusal", "RepublishPolicy", "SyncReport", "bank_manifest_path", "bundle_sha256",
    "canonical_adapter_config", "read_adapter_version", "read_bank_version", "write_adapter_version",
    "write_bank_version",
]
