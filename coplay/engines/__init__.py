"""Token-in/token-out inference engines over one base model and many LoRA adapter versions.

`base` (the interface) and `adapters` (bundle verification, the adapter registry) import only the standard
library; `hf_engine` imports torch/transformers/peft; `vllm_engine` is the only module importing vllm.
Build engines with `coplay.engines.factory.make_engine`.
"""

from coplay.engines.base import (
    AdapterNotLoaded,
    AdapterRejected,
    Completion,
    Engine,
    GenerationRequest,
    SamplingParams,
    engine_name,
    parse_engine_name,
)

__all__ = [
    "AdapterNotLoaded", "AdapterRejected", "Completion", "Engine", "GenerationRequest", "SamplingParams",
    "engine_name", "parse_engine_name",
]
