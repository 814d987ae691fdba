"""Token-in/token-out inference engines over one base model and many LoRA adapter versions.

`base` (the interface) and `adapters` (bundles, checksums, the adapter registry) import only the standard
library; `hf_engine` imports torch/transformers/peft; `vllm_engine` is the only module importing vllm.
Build engines with `coplay.engines.factory.make_engine`.
"""

from coplay.engines.adapters import BUNDLE_FILES, adapter_bundle, bundle_sha256
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
    "BUNDLE_FILES", "AdapterNotLoaded", "AdapterRejected", "Completion", "Engine", "GenerationRequest",
    "SamplingParams", "adapter_bundle", "bundle_sha256", "engine_name", "parse_engine_name",
]
