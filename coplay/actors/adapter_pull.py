"""How a worker gets one adapter version: by `ObjectRef` from the ArtifactStore (docs/gpu-clusters.md).

The store answers with a small `AdapterDelivery` (the ref, the record, the size); the bundle itself comes
with `ray.get(ref)`, which Ray serves from the object store of the worker's own node when another worker
there has already pulled it, else from the nearest node holding a copy. So an 87 MB adapter crosses the
network once per node, not once per worker, and the store's process never serializes it per request.

A ref whose object is lost (its owner, the learner rank that put it, died; or the object store lost it)
raises `ObjectLostError` at `ray.get`: the worker asks the store to put the version anew from its run-folder
copy (`ArtifactStore.reseal_adapter`) and tries once more; `PullStats.resealed` counts it. What still fails
is the caller's refusal (the corrupt-artifact protocol: republished, retried, and the run stops after
`cluster.artifact_max_failures`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import ObjectLostError

from coplay.artifacts import AdapterBundle, ArtifactError
from coplay.types import AdapterVersion


@dataclass
class PullStats:
    """One pull: payload bytes, seconds from asking the store to holding the bundle, lost refs replaced."""

    nbytes: int = 0
    seconds: float = 0.0
    resealed: int = 0


def pull_adapter(store: Any, adapter: str, version: int) -> tuple[AdapterBundle, AdapterVersion, PullStats]:
    """The bundle and record of `adapter` v`version` from `store` (an ArtifactStore handle), by reference."""
    started = time.perf_counter()
    stats = PullStats()
    delivery = ray.get(store.adapter_ref.remote(adapter, version))
    try:
        bundle = ray.get(delivery.ref)
    except ObjectLostError:
        stats.resealed += 1
        delivery = ray.get(store.reseal_adapter.remote(adapter, version))
        try:
            bundle = ray.get(delivery.ref)
        except ObjectLostError as exc:
            raise ArtifactError(f"adapter {adapter}@v{version}: its object was lost twice in Ray's object "
                                f"store ({type(exc).__name__})") from None
    if not isinstance(bundle, AdapterBundle):
        raise ArtifactError(f"adapter {adapter}@v{version}: the store delivered a {type(bundle).__name__}, "
                            f"not an adapter bundle")
    stats.nbytes = sum(len(b) for b in bundle.files.values())
    stats.seconds = time.perf_counter() - started
    return bundle, delivery.record, stats
