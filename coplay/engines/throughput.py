"""Raw engine throughput: generated tokens per second for a fixed list of requests, all submitted at once
through `agenerate` (the way episode runners submit), median over repeats.

This is the baseline the runner's throughput is compared against (docs/architecture.md: runner vs raw engine
on the same prompts). Imports only the standard library; the engine is passed in.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import asdict, dataclass

from coplay.engines.base import Engine, GenerationRequest


@dataclass
class Throughput:
    """Median figures over `repeats` timed runs (after untimed warm-up runs)."""

    backend: str
    requests: int
    repeats: int
    tokens: int  # generated tokens in one run (median)
    seconds: float  # wall time of one run (median)
    tokens_per_s: float  # median of per-run tokens / seconds
    requests_per_s: float

    def as_dict(self) -> dict[str, float | int | str]:
        return asdict(self)


def _run_once(engine: Engine, requests: list[GenerationRequest], mode: str) -> tuple[int, float]:
    start = time.perf_counter()
    if mode == "concurrent":
        async def submit_all():
            return await asyncio.gather(*(engine.agenerate(r) for r in requests))

        completions = asyncio.run(submit_all())
    else:
        completions = engine.generate(requests)
    seconds = time.perf_counter() - start
    return sum(len(c.token_ids) for c in completions), seconds


def measure_throughput(engine: Engine, requests: list[GenerationRequest], repeats: int = 3,
                       mode: str = "concurrent", warmup_runs: int = 1) -> Throughput:
    """Tokens/s of `engine` on `requests`: `mode` "concurrent" (all via agenerate at once) or "batch"
    (one `generate` call), after `warmup_runs` untimed runs. Seeded requests make every repeat generate the
    same tokens. Call it from synchronous code (it runs its own event loop for "concurrent").

    The `hf` engine on CPU needs a few warm-up runs (the first runs of a fresh process are 5-15x slower)."""
    if mode not in ("concurrent", "batch"):
        raise ValueError(f"mode={mode!r}: expected 'concurrent' or 'batch'")
    if not requests or repeats < 1:
        raise ValueError(f"need requests and repeats >= 1 (got {len(requests)} requests, repeats={repeats})")
    for _ in range(warmup_runs):
        _run_once(engine, requests, mode)
    runs = [_run_once(engine, requests, mode) for _ in range(repeats)]
    seconds = statistics.median(s for _, s in runs)
    return Throughput(
        backend=engine.backend, requests=len(requests), repeats=repeats,
        tokens=int(statistics.median(t for t, _ in runs)), seconds=seconds,
        tokens_per_s=statistics.median(t / s for t, s in runs), requests_per_s=len(requests) / seconds,
    )
