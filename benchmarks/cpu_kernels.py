"""CPU kernel microbenchmarks for `benchmarks.smollm2_throughput`: the machine's matmul peak (the yardstick
every throughput figure there is divided by) and the cost of vLLM's CPU LoRA ops on SmolLM2's shapes.

Why the LoRA ops: vLLM's CPU build runs LoRA through `vllm.lora.ops.torch_ops` (`bgmv_shrink`,
`bgmv_expand_slice`; the V1 runner always takes the `sgmv_*` "prefill" path, which explodes the per-request
slot index into a per-token one and calls the same `bgmv_*`). Each call gathers a copy of the slot's A or B
matrix for every token (`weights[token_indices]`: tokens x out x rank floats) and multiplies row by row
(`einsum("bi,boi->bo")`), so its cost grows with tokens x (in + out) x max_lora_rank in memory traffic, for
every LoRA-wrapped projection of every layer, even where the adapter's weights are zero. `grouped_lora` is
the alternative measured beside it: one matmul per run of tokens sharing a slot (no per-token copies).

Imports torch (and vllm for its LoRA ops) inside the functions only.
"""

from __future__ import annotations

import os
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


def grouped_lora(x: Any, a: Any, b: Any, out: Any, slot_runs: list[tuple[int, int, int]],
                 scale: float) -> None:
    """out[s:e] += scale * x[s:e] @ a[slot].T @ b[slot].T for each (start, end, slot) run of tokens: the same
    result as vLLM's shrink + expand, without a per-token copy of the weights."""
    for start, end, slot in slot_runs:
        if slot < 0:
            continue
        out[start:end] += scale * ((x[start:end] @ a[slot, 0].T) @ b[slot, 0].T)


def lora_op_costs(tokens: int, rank: int, dtype: str, threads: int, max_loras: int = 2,
                  min_seconds: float = 1.0) -> dict[str, float]:
    """Milliseconds per token, summed over SmolLM2's 30 layers x 7 projections, of: the base projections
    (`x @ W.T`), vLLM's CPU LoRA ops (`bgmv_shrink` + `bgmv_expand_slice` with per-token slot indices, as
    `sgmv_*` call them) and `grouped_lora`, for `tokens` tokens of one request on LoRA slot 0 with stacked
    weights padded to `rank` (= `max_lora_rank`)."""
    import torch
    from vllm.lora.ops.torch_ops import bgmv_expand_slice, bgmv_shrink

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
            totals["grouped_lora"] += _median_seconds(
                lambda x=x, a=a, b=b, out=out: grouped_lora(x, a, b, out, [(0, tokens, 0)], 1.0),
                min_seconds / 7)
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


def _grouped_runs(seq_starts: Any, seq_lens: Any, slots: Any, batches: int) -> list[tuple[int, int, int]]:
    starts, lens, idx = seq_starts[:batches].tolist(), seq_lens[:batches].tolist(), slots[:batches].tolist()
    return [(s, s + n, i) for s, n, i in zip(starts, lens, idx, strict=True)]


def patch_vllm_cpu_lora(marker: str) -> None:
    """Replace the `sgmv_*` ops of vLLM's CPU LoRA wrapper (the ones the V1 runner calls) by grouped matmuls:
    one `x @ A.T` / `y @ B.T` per request instead of a copy of the weights per token. Rows without a LoRA
    (slot -1) get zero from the shrink and nothing from the expand (vLLM's op would read the last slot).
    Touches `marker` on the first call, so the caller can tell the patch reached the engine's process."""
    from vllm.lora.punica_wrapper import punica_cpu

    def _touch() -> None:
        if not os.path.exists(marker):
            with open(marker, "w") as f:
                f.write(str(os.getpid()))

    def _weights(w: Any, slot: int) -> Any:
        return w[slot, 0] if w.dim() == 4 else w[slot]

    def sgmv_shrink(inputs, lora_a_weights, output_tensor, b_seq_start_loc, seq_len_tensor,
                    lora_indices_tensor, batches, max_seq_length, token_nums, scaling) -> None:
        _touch()
        for start, end, slot in _grouped_runs(b_seq_start_loc, seq_len_tensor, lora_indices_tensor, batches):
            if slot < 0:
                output_tensor[start:end] = 0
                continue
            a = _weights(lora_a_weights, slot).to(output_tensor.dtype)
            out = inputs[start:end].to(output_tensor.dtype) @ a.T
            output_tensor[start:end, : out.shape[1]] = scaling * out

    def _expand(inputs, lora_b_weights, output_tensor, runs, offset, size, add_inputs) -> None:
        for start, end, slot in runs:
            if slot < 0:
                if not add_inputs:
                    output_tensor[start:end, offset:offset + size] = 0
                continue
            b = _weights(lora_b_weights, slot).to(output_tensor.dtype)
            out = inputs[start:end].to(output_tensor.dtype) @ b.T
            width = min(out.shape[1], size)
            if add_inputs:
                output_tensor[start:end, offset:offset + width] += out[:, :width]
            else:
                output_tensor[start:end, offset:offset + width] = out[:, :width]

    def sgmv_expand(inputs, lora_b_weights, output_tensor, b_seq_start_loc, seq_len_tensor,
                    lora_indices_tensor, batches, max_seq_length, token_nums, add_inputs=False) -> None:
        _touch()
        runs = _grouped_runs(b_seq_start_loc, seq_len_tensor, lora_indices_tensor, batches)
        _expand(inputs, lora_b_weights, output_tensor, runs, 0, output_tensor.shape[1], add_inputs)

    def sgmv_expand_slice(inputs, lora_b_weights, output_tensor, b_seq_start_loc, seq_len_tensor,
                          lora_indices_tensor, batches, max_seq_length, token_nums, slice_offset, slice_size,
                          add_inputs=False) -> None:
        _touch()
        runs = _grouped_runs(b_seq_start_loc, seq_len_tensor, lora_indices_tensor, batches)
        _expand(inputs, lora_b_weights, output_tensor, runs, slice_offset, slice_size, add_inputs)

    punica_cpu.sgmv_shrink = sgmv_shrink
    punica_cpu.sgmv_expand = sgmv_expand
    punica_cpu.sgmv_expand_slice = sgmv_expand_slice
