"""bfloat16 on a CPU that only emulates it runs as float32 (`coplay.models.precision`): a bfloat16 config on
an AVX2-only laptop would otherwise run hundreds of times slower. The CPU's answer is read from /proc/cpuinfo;
these tests pin it with monkeypatch to check what each component then runs in."""

from __future__ import annotations

import logging

import pytest
import torch

from coplay.config import CoplayConfig, EngineConfig, ModelConfig
from coplay.engines.hf_engine import resolve_dtype
from coplay.learn.memory import estimate_memory, model_dims
from coplay.models import precision
from coplay.models.loading import load_base_model, torch_dtype

AVX2_EPYC = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B13
flags\t\t: fpu vme de pse sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 bmi2
"""
SAPPHIRE_RAPIDS = """processor\t: 0
flags\t\t: fpu sse2 avx avx2 avx512f avx512bw avx512_bf16 amx_bf16 amx_tile
"""
AVX512_NO_BF16 = "flags\t\t: fpu sse2 avx avx2 avx512f avx512bw avx512vl\n"
GRAVITON3 = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics bf16 i8mm sve\n"
GRAVITON2 = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics\n"


@pytest.mark.parametrize(("cpuinfo", "machine", "native"), [
    (AVX2_EPYC, "x86_64", False),
    (SAPPHIRE_RAPIDS, "x86_64", True),
    (AVX512_NO_BF16, "x86_64", False),
    (GRAVITON3, "aarch64", True),
    (GRAVITON2, "aarch64", False),
])
def test_native_bfloat16_is_read_from_the_cpu_flags(cpuinfo, machine, native):
    assert precision.has_native_bf16(cpuinfo, machine) is native


@pytest.fixture
def emulated_bf16(monkeypatch):
    """This process believes it runs on a CPU without native bfloat16."""
    monkeypatch.setattr(precision, "native_cpu_bf16", lambda: False)


@pytest.fixture
def native_bf16(monkeypatch):
    monkeypatch.setattr(precision, "native_cpu_bf16", lambda: True)


def test_emulated_bfloat16_runs_as_float32_with_a_warning_unless_kept(emulated_bf16, caplog):
    precision._warn_once.cache_clear()
    with caplog.at_level(logging.WARNING, logger="coplay.models.precision"):
        assert precision.cpu_dtype("bfloat16", "auto", "model.dtype") == "float32"
    assert "model.cpu_bf16=keep" in caplog.text and "model.dtype" in caplog.text
    assert precision.cpu_dtype("bfloat16", "keep") == "bfloat16"
    assert precision.cpu_dtype("float16", "auto") == "float16"  # only bfloat16 is second-guessed
    assert precision.cpu_dtype("float32", "auto") == "float32"
    with pytest.raises(ValueError, match="cpu_bf16"):
        precision.cpu_dtype("bfloat16", "sometimes")


def test_native_bfloat16_runs_as_configured(native_bf16):
    assert precision.cpu_dtype("bfloat16", "auto") == "bfloat16"
    assert resolve_dtype(ModelConfig(dtype="bfloat16"), EngineConfig(), on_gpu=False) == "bfloat16"


def test_engines_and_loaders_fall_back_on_cpu_but_never_on_gpu(emulated_bf16):
    model = ModelConfig(dtype="bfloat16")
    assert resolve_dtype(model, EngineConfig(), on_gpu=False) == "float32"
    assert resolve_dtype(ModelConfig(), EngineConfig(dtype="bfloat16"), on_gpu=False) == "float32"
    assert resolve_dtype(model, EngineConfig(), on_gpu=True) == "bfloat16"
    kept = ModelConfig(dtype="bfloat16", cpu_bf16="keep")
    assert resolve_dtype(kept, EngineConfig(), on_gpu=False) == "bfloat16"
    assert torch_dtype("bfloat16", "cpu") is torch.float32
    assert torch_dtype("bfloat16", "cuda") is torch.bfloat16
    assert torch_dtype("bfloat16", "cpu", "keep") is torch.bfloat16


def test_a_bfloat16_model_config_loads_float32_weights_on_an_emulating_cpu(emulated_bf16, tiny_model_config):
    base, _ = load_base_model(tiny_model_config.model_copy(update={"dtype": "bfloat16"}))
    assert {p.dtype for p in base.parameters()} == {torch.float32}


def test_the_learner_memory_estimate_counts_float32_weights_when_bf16_falls_back(emulated_bf16,
                                                                              tiny_model_config):
    cfg = CoplayConfig.model_validate({"model": tiny_model_config.model_dump(mode="json"),
                                       "learner": {"bf16": True}})
    dims = model_dims(cfg)
    assert estimate_memory(cfg, dims, world_size=1, on_gpu=False).base_weights == 4 * dims.base_parameters()
    kept = cfg.model_copy(update={"model": cfg.model.model_copy(update={"cpu_bf16": "keep"})})
    assert estimate_memory(kept, dims, world_size=1, on_gpu=False).base_weights == 2 * dims.base_parameters()
