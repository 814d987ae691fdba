"""Grouped LoRA ops for vLLM's CPU build (`engine.cpu_lora_ops: grouped`, the default on CPU).

Why: vLLM's CPU LoRA wrapper (`vllm.lora.punica_wrapper.punica_cpu`) runs every LoRA-wrapped projection
through `vllm.lora.ops.torch_ops`; the V1 runner always takes its `sgmv_*` path, which expands the
per-request slot index into a per-token one and gathers a copy of the slot's A or B matrix for every token
(`weights[token_indices]`) before multiplying row by row. On SmolLM2 that made a LoRA request about 6x slower
than a base request on the same prompts (`python -m benchmarks.smollm2_throughput --parts lora_vllm`). The
replacement below does one `x @ A.T` and one `y @ B.T` per run of tokens that share a slot: the same sums,
without the copies.

How it reaches the model: vLLM starts its engine core in a spawned process and calls its general plugins
(`vllm.general_plugins` entry points, pyproject.toml) there, as in every vLLM process. `register` is that
plugin: it patches the CPU wrapper when `COPLAY_VLLM_CPU_LORA=grouped` is in the environment, which
`VllmEngine` sets from its config before the engine starts (one process-wide setting: the last engine
started in a process decides for the engine cores started after it). With `COPLAY_VLLM_CPU_LORA_MARKER` set
to a path, the first grouped call writes its process id there, so a test or benchmark can tell the patch
reached the process that runs the model. GPUs keep vLLM's Triton kernels: nothing here runs there.
"""

from __future__ import annotations

import os
from typing import Any

MODE_ENV = "COPLAY_VLLM_CPU_LORA"  # grouped | vllm
MARKER_ENV = "COPLAY_VLLM_CPU_LORA_MARKER"
MODES = ("grouped", "vllm")

OPS = ("sgmv_shrink", "sgmv_expand", "sgmv_expand_slice")
_originals: dict[str, Any] = {}


def register() -> None:
    """vLLM general plugin (runs in every vLLM process, possibly more than once): apply the mode the
    environment names, on the CPU platform only; without it vLLM's own ops stay. It also filters vLLM's
    known notices in this process (`coplay.engines.vllm_notices`): the plugin is coplay's one hook there."""
    from coplay.engines import vllm_notices

    vllm_notices.install()
    mode = os.environ.get(MODE_ENV)
    if mode not in MODES:
        return
    from vllm.platforms import current_platform

    if current_platform.is_cpu():
        apply(mode, os.environ.get(MARKER_ENV))


def apply(mode: str, marker: str | None = None) -> None:
    """`grouped`: patch the CPU wrapper (idempotent); `vllm`: put vLLM's own ops back."""
    if mode == "grouped":
        patch_punica_cpu(marker)
    elif _originals:
        from vllm.lora.punica_wrapper import punica_cpu

        for name, fn in _originals.items():
            setattr(punica_cpu, name, fn)
        _originals.clear()


def slot_runs(seq_starts: Any, seq_lens: Any, slots: Any, batches: int) -> list[tuple[int, int, int]]:
    """(start, end, slot) token ranges of the first `batches` requests, as the `sgmv_*` ops receive them."""
    starts, lens, idx = seq_starts[:batches].tolist(), seq_lens[:batches].tolist(), slots[:batches].tolist()
    return [(s, s + n, i) for s, n, i in zip(starts, lens, idx, strict=True)]


def _slot_weights(w: Any, slot: int) -> Any:
    return w[slot, 0] if w.dim() == 4 else w[slot]


def grouped_shrink(inputs: Any, lora_a_weights: Any, output: Any, runs: list[tuple[int, int, int]],
                   scaling: float) -> None:
    """output[s:e, :rank] = scaling * inputs[s:e] @ A[slot].T per run; rows without a LoRA (slot -1) get
    zero (vLLM's op would read the last slot's weights for them and the expand would add nothing)."""
    for start, end, slot in runs:
        if slot < 0:
            output[start:end] = 0
            continue
        a = _slot_weights(lora_a_weights, slot).to(output.dtype)
        out = inputs[start:end].to(output.dtype) @ a.T
        output[start:end, : out.shape[1]] = scaling * out


def grouped_expand(inputs: Any, lora_b_weights: Any, output: Any, runs: list[tuple[int, int, int]],
                   offset: int, size: int, add_inputs: bool) -> None:
    """output[s:e, offset:offset + size] (+)= inputs[s:e] @ B[slot].T per run; slot -1 rows are left alone
    when adding, zeroed otherwise."""
    for start, end, slot in runs:
        if slot < 0:
            if not add_inputs:
                output[start:end, offset:offset + size] = 0
            continue
        b = _slot_weights(lora_b_weights, slot).to(output.dtype)
        out = inputs[start:end].to(output.dtype) @ b.T
        width = min(out.shape[1], size)
        if add_inputs:
            output[start:end, offset:offset + width] += out[:, :width]
        else:
            output[start:end, offset:offset + width] = out[:, :width]


def patch_punica_cpu(marker: str | None = None) -> None:
    """Replace the `sgmv_*` functions the CPU wrapper calls (module globals of `punica_cpu`, looked up at
    call time) by the grouped ones. Idempotent."""
    if _originals:
        return
    from vllm.lora.punica_wrapper import punica_cpu

    def touch() -> None:
        if marker and not os.path.exists(marker):
            with open(marker, "w") as f:
                f.write(str(os.getpid()))

    def sgmv_shrink(inputs, lora_a_weights, output_tensor, b_seq_start_loc, seq_len_tensor,
                    lora_indices_tensor, batches, max_seq_length, token_nums, scaling) -> None:
        touch()
        runs = slot_runs(b_seq_start_loc, seq_len_tensor, lora_indices_tensor, batches)
        grouped_shrink(inputs, lora_a_weights, output_tensor, runs, scaling)

    def sgmv_expand(inputs, lora_b_weights, output_tensor, b_seq_start_loc, seq_len_tensor,
                    lora_indices_tensor, batches, max_seq_length, token_nums, add_inputs=False) -> None:
        touch()
        runs = slot_runs(b_seq_start_loc, seq_len_tensor, lora_indices_tensor, batches)
        grouped_expand(inputs, lora_b_weights, output_tensor, runs, 0, output_tensor.shape[1], add_inputs)

    def sgmv_expand_slice(inputs, lora_b_weights, output_tensor, b_seq_start_loc, seq_len_tensor,
                          lora_indices_tensor, batches, max_seq_length, token_nums, slice_offset, slice_size,
                          add_inputs=False) -> None:
        touch()
        runs = slot_runs(b_seq_start_loc, seq_len_tensor, lora_indices_tensor, batches)
        grouped_expand(inputs, lora_b_weights, output_tensor, runs, slice_offset, slice_size, add_inputs)

    _originals.update({name: getattr(punica_cpu, name) for name in OPS})
    punica_cpu.sgmv_shrink = sgmv_shrink
    punica_cpu.sgmv_expand = sgmv_expand
    punica_cpu.sgmv_expand_slice = sgmv_expand_slice
