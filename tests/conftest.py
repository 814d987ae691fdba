"""Fixtures shared by the whole suite: one tiny model per test session (built once, ~5 s)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def tiny_model_config(tmp_path_factory):
    """A `ModelConfig` for the tiny model, built into a session temp cache (never the user's cache)."""
    from coplay.config import ModelConfig, TinyModelConfig
    from coplay.models.tiny import build_tiny_model

    cfg = ModelConfig(name="tiny", dtype="float32",
                      tiny=TinyModelConfig(cache_dir=str(tmp_path_factory.mktemp("tiny-cache"))))
    build_tiny_model(cfg.tiny)
    return cfg


@pytest.fixture(scope="session")
def tiny_model_dir(tiny_model_config):
    from coplay.models.tiny import tiny_model_dir

    return tiny_model_dir(tiny_model_config.tiny)
