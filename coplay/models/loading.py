"""Load the frozen base model and its tokenizer from a Hugging Face id, a local folder, or `tiny`.

`trust_remote_code` stays off unless the config turns it on (docs/architecture.md). Weights are never fetched
here beyond what transformers' own loader does for a hub id; tests use the tiny model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from coplay.config import ModelConfig


def resolve_model_path(cfg: ModelConfig, serve_dtype: str | None = None) -> str:
    """`tiny` -> the built tiny model folder; a catalogue name -> its folder in the model cache (each built
    on first use); anything else (a hub id, a local folder) is returned as given. `serve_dtype`: the dtype
    the caller runs the weights in, for a loader that does not cast quietly (vLLM warns once per weight it
    narrows, 122 lines for SmolLM2 in bfloat16): a catalogue model is then served from its build in that
    dtype when the cache builds one (`model_cache.BUILD_DTYPES`), the same values as casting the
    `model.cache_dtype` build (the cast happens once, at the build, rounding to nearest even)."""
    if cfg.name == "tiny":
        from coplay.models.tiny import build_tiny_model

        return str(build_tiny_model(cfg.tiny))
    from coplay.models.catalogue import catalogue_entry

    entry = catalogue_entry(cfg.name)
    if entry is not None:
        from coplay.models.model_cache import BUILD_DTYPES, prepare_entry

        dtype = serve_dtype if serve_dtype in BUILD_DTYPES else cfg.cache_dtype
        return str(prepare_entry(entry, dtype, cfg.cache_dir))
    return cfg.name


def torch_dtype(name: str, device: str = "cpu", cpu_bf16: str = "auto") -> Any:
    """Config dtype -> torch dtype; `auto` is float32 on CPU (exact parity tests) and bfloat16 on GPU; on a
    CPU without native bfloat16, bfloat16 runs as float32 unless `cpu_bf16` is `keep`
    (`coplay.models.precision`)."""
    import torch

    if name == "auto":
        return torch.float32 if device == "cpu" else torch.bfloat16
    if device == "cpu":
        from coplay.models.precision import cpu_dtype

        name = cpu_dtype(name, cpu_bf16, "model.dtype")
    return getattr(torch, name)


def load_tokenizer(cfg: ModelConfig) -> Any:
    from coplay.models import default_device

    default_device()
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(cfg),
                                              trust_remote_code=cfg.trust_remote_code)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    # read by coplay.agent.prompts.template_kwargs wherever this tokenizer renders a chat (engines, SFT)
    tokenizer.coplay_enable_thinking = cfg.enable_thinking
    return tokenizer


def load_base_model(cfg: ModelConfig, device: str = "cpu") -> tuple[Any, Any]:
    """(model, tokenizer), model in eval mode with every base weight frozen."""
    from coplay.models import default_device

    default_device()
    from transformers import AutoModelForCausalLM

    path = resolve_model_path(cfg)
    if not Path(path).exists() and "/" not in path:
        raise FileNotFoundError(f"model.name={path!r} is neither a local folder nor a hub id (org/name)")
    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=torch_dtype(cfg.dtype, device, cfg.cpu_bf16), trust_remote_code=cfg.trust_remote_code
    )
    model.to(device)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model, load_tokenizer(cfg)
