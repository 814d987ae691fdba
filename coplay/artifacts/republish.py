"""The driver's policy for refused artifacts (docs/architecture.md): a worker that refuses a corrupt delivery
keeps serving the previous version and reports it; the driver counts the failure, has the store republish the
version from its run-folder copy and syncs the worker again; after `max_failures` failed deliveries of one
version the run stops with an `ArtifactError` naming it. No ray: the sync loop that applies it is
`System.sync_worker` (coplay/actors/system.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from coplay.artifacts.bundle import ArtifactError
from coplay.artifacts.serving import Refusal


@dataclass
class RepublishPolicy:
    """Counts failed deliveries per version; says stop once one reaches `max_failures`."""

    max_failures: int = 3
    failures: dict[tuple[str, str, int], int] = field(default_factory=dict)

    def refused(self, refusal: Refusal) -> int:
        """Count one failed delivery; raises `ArtifactError` at the limit, else returns the count (the
        caller then republishes and retries)."""
        key = (refusal.kind, refusal.name, refusal.version)
        self.failures[key] = self.failures.get(key, 0) + 1
        if self.failures[key] >= self.max_failures:
            raise ArtifactError(f"{refusal.kind} {refusal.name} v{refusal.version} failed to load "
                                f"{self.failures[key]} times (last error: {refusal.error}); stopping the run")
        return self.failures[key]

    def counts(self) -> dict[str, int]:
        return {f"{kind}:{name}@v{version}": n for (kind, name, version), n in self.failures.items()}
