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


@pytest.fixture(scope="session")
def tiny_bank_engine(tiny_model_config):
    """The tiny model on the `hf` engine, shared by the bank's and the curriculum's callers."""
    from coplay.config import EngineConfig
    from coplay.engines.factory import make_engine

    engine = make_engine(tiny_model_config, EngineConfig(backend="hf", max_model_len=4096))
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def tiny_caller(tiny_bank_engine):
    """The tiny model on the `hf` engine answering the bank's prompts (mostly garbage: it is untrained)."""
    from coplay.skills import FunctionCaller
    from tests.helpers import bank_generate

    return FunctionCaller(bank_generate(tiny_bank_engine, cap=48), pass_max_tokens=True)


@pytest.fixture(scope="session")
def constrained_tiny_caller(tiny_bank_engine):
    """The same, sampling under the constraints the bank asks for (the SkillBankActor's caller does)."""
    from coplay.skills import FunctionCaller
    from tests.helpers import bank_generate

    return FunctionCaller(bank_generate(tiny_bank_engine, cap=2048), pass_max_tokens=True, pass_regex=True)
