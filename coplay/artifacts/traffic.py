"""The adapter traffic of one iteration, estimated at start from the model's shapes and the adapters' specs
(docs/gpu-clusters.md), so an operator sees what the object store and the network will carry before the
first learner step sends it.

A LoRA of rank r on a linear layer with `in` and `out` features is two matrices, A (r x in) and B (out x r):
r x (in + out) elements. An adapter spans `LoraSpec.top_layers` decoder layers (all by default) and its
`target_modules`; its bundle holds them in float32 (`Learner.export` writes the optimizer's float32 master,
so an update is never rounded away before it is served), 4 bytes per element. A learner step publishes a
new version of every adapter that had samples, at most all of `cfg.active_adapters`: that sum is the
bytes per iteration. Each version enters Ray's object store once and crosses the network once per node
that runs rollout workers (coplay/actors/adapter_pull.py), so the network carries at most that times the
number of such nodes (at most `rollout.workers`).

Example: a Llama-3-8B-shaped model (hidden 4096, intermediate 14336, 32 layers, 8 KV heads of 128), r 16
on all seven projections: 41.9 M elements, 168 MB per adapter in float32 (84 MB in bf16); five adapters
make 839 MB per iteration. Standard library only; the shapes come from `coplay.learn.memory.ModelDims`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

EXPORT_BYTES_PER_ELEMENT = 4  # bundles hold the float32 master weights (coplay.artifacts.bundle)
MB = 1_000_000
MIB = 1 << 20


@dataclass(frozen=True)
class TrafficEstimate:
    """Bytes of one version of each adapter, their sum per iteration, and what the store window holds."""

    per_adapter: dict[str, int]
    workers: int
    window_bytes: int

    @property
    def per_iteration(self) -> int:
        return sum(self.per_adapter.values())

    @property
    def window_versions(self) -> int:
        """About how many versions of the mean size fit the store window besides the serving set."""
        mean = self.per_iteration / max(1, len(self.per_adapter))
        return int(self.window_bytes // mean) if mean else 0

    def describe(self) -> str:
        sizes = sorted(set(self.per_adapter.values()))
        each = (f"~{sizes[0] / MB:.1f} MB each" if len(sizes) == 1
                else f"{sizes[0] / MB:.1f}-{sizes[-1] / MB:.1f} MB each")
        return (f"adapter traffic: {len(self.per_adapter)} adapters, {each} (float32) = "
                f"~{self.per_iteration / MB:.1f} MB per iteration at most, put into Ray's object store once "
                f"and pulled once per node with rollout workers (at most {self.workers} "
                f"node{'s' if self.workers != 1 else ''}: "
                f"~{self.per_iteration * self.workers / MB:.1f} MB over the network); the store window of "
                f"{self.window_bytes / MIB:.0f} MiB holds ~{self.window_versions} more versions "
                f"(cluster.store_window_mb)")

    def as_dict(self) -> dict[str, Any]:
        return {"per_adapter_bytes": dict(self.per_adapter), "per_iteration_bytes": self.per_iteration,
                "workers": self.workers, "window_bytes": self.window_bytes,
                "window_versions": self.window_versions}


def adapter_bytes(dims: Any, rank: int, targets: list[str], top_layers: int | None) -> int:
    """Bytes of one exported version of a LoRA (`dims`: a `ModelDims`)."""
    return dims.lora_parameters(rank, targets, top_layers) * EXPORT_BYTES_PER_ELEMENT


def estimate_traffic(cfg: Any, dims: Any) -> TrafficEstimate:
    """The estimate for a `CoplayConfig` on a model of `dims`."""
    per_adapter = {name: adapter_bytes(dims, cfg.adapters[name].r, list(cfg.adapters[name].target_modules),
                                       cfg.adapters[name].top_layers)
                   for name in cfg.active_adapters}
    return TrafficEstimate(per_adapter, cfg.rollout.workers, int(cfg.cluster.store_window_mb * MIB))


def traffic_line(cfg: Any) -> str:
    """The estimate's line for the console at start; when the model's `config.json` cannot be read here (a
    driver without the model or the network), a line saying so instead: the run goes on without it."""
    from coplay.learn.memory import model_dims

    try:
        return estimate_traffic(cfg, model_dims(cfg)).describe()
    except (OSError, ValueError) as exc:
        detail = (str(exc).strip().splitlines() or [""])[0][:160]
        return (f"adapter traffic: no estimate, the model's config could not be read "
                f"({type(exc).__name__}: {detail})")
