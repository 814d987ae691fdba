"""CPU kernel microbenchmarks for `benchmarks.smollm2_throughput`: the machine's matmul peak (the yardstick
every throughput figure there is divided by) and the cost of vLLM's CPU LoRA ops on SmolLM2's shapes.

Why the LoRA ops: vLLM's CPU build runs LoRA through `vllm.lora.ops.torch_ops` (`bgmv_shrink`,
`bgmv_expand_slice`; the V1 runner always takes the `sgmv_*` "prefill" path, which explodes the per-request
slot index into a per-token one and calls the same `bgmv_*`). Each call gathers a copy of the slot's A or B
matrix for every token (`weights[token_indices]`: tokens x out x rank floats) and multiplies row by row
(`einsum("bi,boi->bo")`), so its cost grows with tokens x (in + out) x max_lora_rank in memory traffic, for
every LoRA-wrapped projection of every layer, even where the adapter's weights are zero. The alternative
measured beside it is what coplay's vLLM engine uses on CPU by default (`coplay.engines.cpu_lora`,
`engine.cpu_lora_ops`): one matmul per run of tokens sharing a slot (no per-token copies).

Imports torch (and vllm for its LoRA ops) inside the functions only.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

# SmolLM2-135M: hidden 576, intermediate 1536, 9 query heads and 3 KV heads of 64, 30 layers. vLLM splits
# the packed qkv and gate_up projections into slices, one shrink + one expand per slice.
SMOLLM2_LAYERS = 30
SMOLLM2_PROJECTIONS = (  # (name, in features, out features)
    ("q", 576, 576), ("k", 576, 192), ("v", 576, 192), ("o", 576, 576),
    ("gate", 576, 1536), ("up", 576, 1536), ("down", 1536, 576),
)


def _median_seconds(fn: Callable[[], Any], min_seconds: float, min_calls: int = 3) -> float:
    """Median seconds of one `fn()` after one untimed call, over at least `min_calls` calls and
    `min_seconds` of wall time."""
    fn()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_calls or time.perf_counter() - start < min_seconds:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def matmul_peak(dtype: str, threads: int, n: int = 2048, min_seconds: float = 2.0) -> dict[str, float]:
    """GFLOP/s of one n x n x n `torch.matmul` in `dtype` on `threads` threads (2 n^3 FLOP per call,
    median call time): the attainable peak that token throughputs are compared against."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        gen = torch.Generator().manual_seed(0)
        a = torch.randn(n, n, generator=gen).to(getattr(torch, dtype))
        b = torch.randn(n, n, generator=gen).to(getattr(torch, dtype))
        seconds = _median_seconds(lambda: torch.matmul(a, b), min_seconds)
    finally:
        torch.set_num_threads(previous)
    return {"dtype": dtype, "threads": threads, "n": n, "seconds_per_call": seconds,
            "gflops": 2 * n**3 / seconds / 1e9}


def lora_op_costs(tokens: int, rank: int, dtype: str, threads: int, max_loras: int = 2,
                  min_seconds: float = 1.0) -> dict[str, float]:
    """Milliseconds per token, summed over SmolLM2's 30 layers x 7 projections, of: the base projections
    (`x @ W.T`), vLLM's CPU LoRA ops (`bgmv_shrink` + `bgmv_expand_slice` with per-token slot indices, as
    `sgmv_*` call them) and coplay's grouped ops (`coplay.engines.cpu_lora`), for `tokens` tokens of one
    request on LoRA slot 0 with stacked weights padded to `rank` (= `max_lora_rank`)."""
    import torch
    from vllm.lora.ops.torch_ops import bgmv_expand_slice, bgmv_shrink

    from coplay.engines.cpu_lora import grouped_expand, grouped_shrink

    torch_dtype = getattr(torch, dtype)
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(0)
    totals = {"base": 0.0, "vllm_lora": 0.0, "grouped_lora": 0.0}
    try:
        indices = torch.zeros(tokens, dtype=torch.long)
        for _, fan_in, fan_out in SMOLLM2_PROJECTIONS:
            x = torch.randn(tokens, fan_in, generator=gen).to(torch_dtype)
            w = torch.randn(fan_out, fan_in, generator=gen).to(torch_dtype)
            a = torch.randn(max_loras, 1, rank, fan_in, generator=gen).to(torch_dtype)
            b = torch.randn(max_loras, 1, fan_out, rank, generator=gen).to(torch_dtype)
            out = torch.zeros(tokens, fan_out, dtype=torch_dtype)
            shrunk = torch.zeros(tokens, rank, dtype=torch.float32)  # vLLM's shrink buffer is float32

            def vllm_ops(x=x, a=a, b=b, out=out, shrunk=shrunk) -> None:
                bgmv_shrink(x, a, shrunk, indices, 1.0)
                bgmv_expand_slice(shrunk, b, out, indices, 0, out.shape[1], True)

            totals["base"] += _median_seconds(lambda x=x, w=w: x @ w.T, min_seconds / 7)
            totals["vllm_lora"] += _median_seconds(vllm_ops, min_seconds / 7)
            def grouped_ops(x=x, a=a, b=b, out=out, shrunk=shrunk) -> None:
                grouped_shrink(x, a, shrunk, [(0, tokens, 0)], 1.0)
                grouped_expand(shrunk, b, out, [(0, tokens, 0)], 0, out.shape[1], True)

            totals["grouped_lora"] += _median_seconds(grouped_ops, min_seconds / 7)
    finally:
        torch.set_num_threads(previous)
    per_token = {k: v * SMOLLM2_LAYERS / tokens * 1e3 for k, v in totals.items()}
    return {"tokens": tokens, "rank": rank, "dtype": dtype, "threads": threads,
            "base_ms_per_token": per_token["base"], "vllm_lora_ms_per_token": per_token["vllm_lora"],
            "grouped_lora_ms_per_token": per_token["grouped_lora"],
            "vllm_lora_over_base": per_token["vllm_lora"] / per_token["base"],
            "grouped_lora_over_base": per_token["grouped_lora"] / per_token["base"],
            "gathered_mib_per_token": SMOLLM2_LAYERS * rank * sum(i + o for _, i, o in SMOLLM2_PROJECTIONS)
            * torch.tensor([], dtype=torch_dtype).element_size() / 2**20}
