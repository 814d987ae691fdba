"""Memory at scale (issue 18 part 6): gradient checkpointing trains to the same loss as without it, and the
per-rank memory estimate counts the real model's parameters, tells an 8B Diplomacy-length config that it
needs checkpointing, and refuses a config over budget (a small `learner.memory_budget_gib`) in one line."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from scenarios import batch, make_learner

from coplay.config import ADAPTER_NAMES, CoplayConfig
from coplay.learn.memory import (
    GIB,
    LearnerMemoryError,
    ModelDims,
    check_learner_memory,
    estimate_memory,
    model_dims,
)

QWEN3_8B = ModelDims(hidden=4096, layers=36, intermediate=12288, heads=32, kv_heads=8, head_dim=128,
                     vocab=151936, tied_embeddings=False, qk_norm=True)


@pytest.fixture(scope="module")
def cfg(tiny_model_config) -> CoplayConfig:
    return CoplayConfig.model_validate({"model": tiny_model_config.model_dump(mode="json")})


def test_the_estimate_counts_exactly_the_parameters_of_the_real_model_and_its_five_adapters(cfg):
    from coplay.models.loading import load_base_model
    from coplay.models.lora import attach_adapters

    dims = model_dims(cfg)
    base, _ = load_base_model(cfg.model)
    assert sum(p.numel() for p in base.parameters()) == dims.base_parameters()
    policy = attach_adapters(base, dict(cfg.adapters.items()), cfg.active_adapters)
    lora = sum(p.numel() for n, p in policy.named_parameters() if "lora_" in n)
    estimate = estimate_memory(cfg, dims, world_size=1, on_gpu=False)
    assert estimate.lora_weights == 4 * lora  # float32 on CPU: the five adapters, no proposer
    assert estimate.base_weights == 4 * dims.base_parameters()  # float32 on CPU


def test_the_proposer_counts_only_when_the_curriculum_is_on(cfg):
    dims = model_dims(cfg)
    on = cfg.model_copy(update={"curriculum": cfg.curriculum.model_copy(update={"enabled": True})})
    off_lora = estimate_memory(cfg, dims, world_size=1, on_gpu=False).lora_weights
    assert estimate_memory(on, dims, world_size=1, on_gpu=False).lora_weights == off_lora * 6 // 5


def test_adapting_only_the_top_layers_counts_their_lora_weights_and_activations_only(cfg):
    from coplay.models.loading import load_base_model
    from coplay.models.lora import attach_adapters

    dims = model_dims(cfg)
    top = cfg.with_values({f"adapters.{a}.top_layers": 1 for a in ADAPTER_NAMES})
    base, _ = load_base_model(top.model)
    policy = attach_adapters(base, dict(top.adapters.items()), ADAPTER_NAMES)
    lora = sum(p.numel() for n, p in policy.named_parameters() if "lora_" in n)
    assert lora == sum(dims.lora_parameters(s.r, list(s.target_modules), 1) for _, s in top.adapters.items())
    assert dims.layers == 2 and 2 * lora == sum(dims.lora_parameters(s.r, list(s.target_modules))
                                                for _, s in cfg.adapters.items())
    deep = dataclasses.replace(dims, layers=4)

    def activations(top_layers):
        spec = cfg.with_values({f"adapters.{a}.top_layers": top_layers for a in ADAPTER_NAMES})
        return estimate_memory(spec, deep, 1, False).activations

    one, two, four = activations(1), activations(2), activations(4)
    assert one < two < four == activations(None) == activations(64)  # top_layers >= the model's: all
    assert four - two == 2 * (two - one)  # each adapted layer keeps the same activations; the rest none


def test_an_8b_model_on_2k_tokens_with_micro_batch_8_needs_checkpointing_on_an_80_gib_gpu(cfg):
    assert 8.1e9 < QWEN3_8B.base_parameters() < 8.3e9  # Qwen3-8B's published size
    big = cfg.model_copy(update={"engine": cfg.engine.model_copy(update={"max_model_len": 2048})})
    plain = estimate_memory(big, QWEN3_8B, world_size=8, on_gpu=True)
    on = big.learner.model_copy(update={"gradient_checkpointing": True})
    checkpointed = estimate_memory(big.model_copy(update={"learner": on}), QWEN3_8B, world_size=8,
                                   on_gpu=True)
    assert plain.total > 80 * GIB > checkpointed.total
    assert plain.base_weights == checkpointed.base_weights == 2 * QWEN3_8B.base_parameters()  # bf16


def test_a_config_over_its_memory_budget_is_refused_in_one_line_naming_the_fixes(cfg, capsys):
    estimate = check_learner_memory(cfg, 1, "cpu")  # the host's available memory holds the tiny model
    assert f"learner memory per rank ~{estimate.total / GIB:.2f} GiB" in capsys.readouterr().out
    small = cfg.model_copy(update={"learner": cfg.learner.model_copy(update={"memory_budget_gib": 0.01})})
    with pytest.raises(LearnerMemoryError) as info:
        check_learner_memory(small, 1, "cpu")
    message = str(info.value)
    assert "\n" not in message and "exceeds learner.memory_budget_gib 0.01 GiB" in message
    assert "learner.gradient_checkpointing=true" in message and "activations" in message


def test_the_standalone_learner_refuses_it_with_exit_2(cfg, tmp_path, capsys):
    from coplay.learn.standalone import train_from_shards

    (tmp_path / "shards").mkdir()
    (tmp_path / "shards" / "step-0.msgpack").write_bytes(b"")
    code = train_from_shards(tmp_path / "shards", tmp_path / "out", None,
                             [f"model.tiny.cache_dir={cfg.model.tiny.cache_dir}",
                              "learner.memory_budget_gib=0.01"], False)
    assert code == 2 and "exceeds learner.memory_budget_gib" in capsys.readouterr().err


@pytest.mark.parametrize("backend", ["torch", "deepspeed"])
def test_gradient_checkpointing_recomputes_layers_and_gives_the_same_step(cfg, backend):
    cache = cfg.model.tiny.cache_dir
    results = {}
    for checkpointing in (False, True):
        learner = make_learner(cache, backend, gradient_checkpointing=checkpointing, kl_beta=0.0)
        layer = learner.policy.get_base_model().model.layers[0]
        # a pre-hook: the recomputation stops once it has what backward needs, before any post-hook runs
        calls: list[int] = []
        handle = layer.register_forward_pre_hook(lambda *_, seen=calls: seen.append(1))
        samples, adv = batch(0, ("act",), n=6)
        metrics = learner.train_step(samples, adv)
        handle.remove()
        results[checkpointing] = (metrics.adapters["act"]["loss"], learner.adapter_weights("act"), len(calls))
    (loss_off, w_off, calls_off), (loss_on, w_on, calls_on) = results[False], results[True]
    assert calls_on == 2 * calls_off  # each layer ran again in the backward pass
    assert loss_on == pytest.approx(loss_off, rel=1e-5, abs=1e-7)
    for name in w_off:
        torch.testing.assert_close(w_on[name], w_off[name], rtol=1e-5, atol=1e-6)
