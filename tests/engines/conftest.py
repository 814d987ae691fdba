"""Engine fixtures: LoRA adapters with random non-zero B weights, one `hf` engine and ONE `vllm` engine per
test session (vLLM start-up costs tens of seconds; it spawns processes, so it is built here, not at import).
"""

from __future__ import annotations

import pytest

from coplay.config import EngineConfig, LoraSpec

LORA = LoraSpec(r=8, alpha=16, dropout=0.0)


def engine_config(backend: str) -> EngineConfig:
    """Small settings that fit the 2-core CPU test machine."""
    return EngineConfig(backend=backend, max_loras=4, max_lora_rank=8, max_model_len=1024, max_num_seqs=8,
                        cpu_kvcache_gib=1, dtype="float32", enforce_eager=True)


def make_adapter(model_cfg, out_dir, seed: int, scale: float = 0.1):
    """A PEFT adapter folder for the tiny model whose B matrices are random (so it changes the outputs)."""
    import torch

    from coplay.models.loading import load_base_model
    from coplay.models.lora import attach_adapters, save_adapter

    base, _ = load_base_model(model_cfg)
    model = attach_adapters(base, {"act": LORA}, names=("act",))
    generator = torch.Generator().manual_seed(seed)
    for name, param in model.named_parameters():
        if "lora_A" in name:
            param.data.uniform_(-0.2, 0.2, generator=generator)
        if "lora_B" in name:
            param.data.normal_(0.0, scale, generator=generator)
    return save_adapter(model, "act", out_dir)


@pytest.fixture(scope="session")
def adapter_dirs(tiny_model_config, tmp_path_factory):
    """Three different non-zero adapters: act v1, act v2 and retrieve v1."""
    root = tmp_path_factory.mktemp("adapters")
    return {label: make_adapter(tiny_model_config, root / label, seed)
            for label, seed in (("act@v1", 11), ("act@v2", 12), ("retrieve@v1", 13))}


@pytest.fixture(scope="session")
def bundles(adapter_dirs):
    from coplay.engines.adapters import adapter_bundle

    return {label: adapter_bundle(folder) for label, folder in adapter_dirs.items()}


def _load_v1(engine, bundles) -> None:
    for label in ("act@v1", "retrieve@v1"):
        files, sha = bundles[label]
        name, version = label.split("@v")
        assert engine.load_adapter(name, int(version), files, sha) == sha


@pytest.fixture(scope="session")
def hf_engine(tiny_model_config, bundles):
    from coplay.engines.factory import make_engine

    engine = make_engine(tiny_model_config, engine_config("hf"))
    _load_v1(engine, bundles)
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def vllm_engine(tiny_model_config, bundles):
    pytest.importorskip("vllm")
    from coplay.engines.factory import make_engine

    engine = make_engine(tiny_model_config, engine_config("vllm"))
    _load_v1(engine, bundles)
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def prompts(tiny_model_config):
    """Prompts of different lengths (mixed batches pad differently per row)."""
    from coplay.models.loading import load_tokenizer

    tokenizer = load_tokenizer(tiny_model_config)
    texts = [
        "Observation: 2 4 8 16\nLegal actions: up down left right",
        "You are player 3. Vote approve or reject the quest team.",
        "A PAR - BUR",
        "Board:\n..##..\n.####.\nINTENTION:",
        "The next piece is T; place it to clear lines.",
        "merge tiles",
    ]
    return [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
