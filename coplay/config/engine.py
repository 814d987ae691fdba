"""The `engine` section: the inference engines (token-in/token-out) in the rollout workers. Imports only
pydantic."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from coplay.config.base import Section


class EngineConfig(Section):
    """Inference engines (token-in/token-out) in the rollout workers."""

    backend: Literal["vllm", "hf"] = "vllm"
    max_loras: int = Field(
        12, ge=1, description="LoRA slots: current + previous version of each adapter + opponents")
    max_lora_rank: int = Field(16, ge=1)
    max_model_len: int = Field(8192, ge=128)
    max_num_seqs: int = Field(64, ge=1)
    enable_prefix_caching: bool = True
    enforce_eager: bool = False
    gpu_memory_utilization: float = Field(0.85, gt=0.0, le=1.0)
    cpu_kvcache_gib: int = Field(1, ge=1, description="VLLM_CPU_KVCACHE_SPACE on the CPU build")
    cpu_lora_ops: Literal["grouped", "vllm"] = Field(
        "grouped", description="vLLM CPU build only: LoRA as one matmul per request (grouped) or vLLM's own "
                               "ops, which copy the adapter's weights per token (coplay/engines/cpu_lora.py)")
    cpu_start: Literal["lean", "vllm"] = Field("lean", description="vLLM CPU build only: lean runs the model "
        "worker in vLLM's engine core process (one spawn fewer per start; same threads); vllm: vLLM's own")
    cpu_threads_bind: str | None = Field(
        None, pattern=r"^(all|nobind|[0-9,\-|]+)$",
        description="vLLM CPU build only: VLLM_CPU_OMP_THREADS_BIND for the engine: a "
                    "list such as 0-1, nobind, or all (every core this process may use: on 2 cores a probe "
                    "decision of the SmolLM2 demo took 2.52 s rather than 4.41 s); None: vLLM's automatic "
                    "binding, every core but one (left to the learner and the envs)")
    dtype: Literal["float32", "bfloat16", "float16", "auto"] = "auto"
