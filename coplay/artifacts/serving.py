"""What a rollout worker serves (docs/architecture.md), decided without Ray: which adapter versions to load,
which to keep and which to retire for a serving set, and whether a delivered bank version is the published
one.

A worker serves exactly the serving set the driver names, except that a loaded version stays while a newer
version of the same adapter was refused (the worker keeps serving the previous version and reports the
refusal). The Ray shell is `coplay/actors/rollout_worker.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from coplay.artifacts.bundle import ArtifactError
from coplay.files import sha256_bytes
from coplay.types import BankVersion


@dataclass(frozen=True)
class Refusal:
    """A delivered artifact a worker would not serve, and why."""

    kind: str  # "adapter" | "bank"
    name: str
    version: int
    error: str

    @property
    def label(self) -> str:
        return (f"{self.name}@v{self.version}" if self.kind == "adapter"
                else f"bank:{self.name}@v{self.version}")


@dataclass
class SyncReport:
    """What one worker's sync did: versions loaded (engine names, `bank:<key>@v<n>`) and refusals."""

    loaded: list[str] = field(default_factory=list)
    failed: list[Refusal] = field(default_factory=list)
    held: list[str] = field(default_factory=list)  # every adapter the engine holds after the sync
    pulled_bytes: int = 0  # adapter bytes pulled from Ray's object store (coplay/actors/adapter_pull.py)
    pull_seconds: float = 0.0
    resealed: int = 0  # pulls whose object was lost and put anew from the run folder


def engine_label(adapter: str, version: int) -> str:
    return f"{adapter}@v{version}"


def adapters_to_load(wanted: list[tuple[str, int]], loaded: list[str]) -> list[tuple[str, int]]:
    """The wanted versions not loaded yet, in the order given."""
    have = set(loaded)
    return [(a, v) for a, v in wanted if engine_label(a, v) not in have]


def adapters_to_retire(loaded: list[str], wanted: list[tuple[str, int]], refused: list[Refusal]) -> list[str]:
    """Loaded versions outside the serving set, except those of an adapter whose new version was refused."""
    keep = {engine_label(a, v) for a, v in wanted}
    refused_adapters = {r.name for r in refused if r.kind == "adapter"}
    return [label for label in loaded
            if label not in keep and label.split("@v", 1)[0] not in refused_adapters]


def check_bank_delivery(data: bytes, record: BankVersion) -> None:
    """A delivered bank version must hash to its published checksum."""
    if sha256_bytes(data) != record.sha256:
        raise ArtifactError(f"bank {record.bank_key} v{record.version}: sha256 of the delivered bytes "
                            f"does not match the published {record.sha256[:12]}")
