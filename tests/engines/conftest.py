"""Engine fixtures: LoRA adapters with random non-zero B weights, one `hf` engine and ONE `vllm` engine per
test session (vLLM start-up costs tens of seconds; it spawns processes, so it is built here, not at import).
"""

from __future__ import annotations

import os

import pytest

from tests.helpers import LORA, engine_config


def make_adapter(model_cfg, out_dir, seed: int, scale: float = 0.1):
    """A PEFT adapter folder for the tiny model whose weights are random (so it changes the outputs)."""
    from coplay.models.lora import random_adapter_folder

    return random_adapter_folder(model_cfg, out_dir, seed, LORA, scale=scale)


@pytest.fixture(scope="session")
def adapter_dirs(tiny_model_config, tmp_path_factory):
    """Three different non-zero adapters: act v1, act v2 and retrieve v1."""
    root = tmp_path_factory.mktemp("adapters")
    return {label: make_adapter(tiny_model_config, root / label, seed)
            for label, seed in (("act@v1", 11), ("act@v2", 12), ("retrieve@v1", 13))}


@pytest.fixture(scope="session")
def bundles(adapter_dirs):
    from coplay.artifacts import AdapterBundle

    return {label: (b.files, b.sha256) for label, b in
            ((label, AdapterBundle.read(folder)) for label, folder in adapter_dirs.items())}


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
def cpu_lora_marker(tmp_path_factory):
    """Where coplay's grouped CPU LoRA ops write the pid of the first process that runs them."""
    from coplay.engines import cpu_lora

    marker = tmp_path_factory.mktemp("cpu-lora") / "grouped.pid"
    os.environ[cpu_lora.MARKER_ENV] = str(marker)
    return marker


@pytest.fixture(scope="session")
def vllm_engine(tiny_model_config, bundles, cpu_lora_marker):
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
