"""Learner steps reach the served policy: the exported adapter carries the optimizer's float32 master (a
bf16 module would round a small update away), each step's served change is measured (weight change, share
of elements, KL on prompts), and one GRPO step at the SmolLM2 configs' dtypes and learning-rate scale moves
the served log-probs by more than the engine's run-to-run noise."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from scenarios import batch, lora_specs, model_config

from coplay.config import LearnerConfig, load_config
from coplay.learn.update_size import as_served, serving_dtype, token_kl, weight_change

REPO = Path(__file__).resolve().parents[2]
SMOLLM2_CONFIG = REPO / "launch" / "configs" / "demo-2048-smollm2.yaml"


@pytest.fixture(scope="module")
def cache(tiny_model_config) -> str:
    return tiny_model_config.tiny.cache_dir


def test_weight_change_on_hand_examples():
    prev = {"a": torch.tensor([1.0, 0.0, 2.0, 2.0])}
    new = {"a": torch.tensor([1.0, 0.0, 2.0, 4.0])}
    rel, share = weight_change(prev, new)
    assert rel == pytest.approx(2.0 / 3.0) and share == pytest.approx(0.25)
    assert weight_change(prev, prev) == (0.0, 0.0)
    with pytest.raises(ValueError, match="different tensors"):
        weight_change(prev, {"b": new["a"]})


def test_a_change_below_bf16_spacing_vanishes_when_served_in_bf16():
    w = {"a": torch.full((64,), 1e-2)}
    tiny_step = {"a": w["a"] * (1 + 1e-4)}  # far below bf16's relative half-spacing 2^-9
    assert weight_change(w, tiny_step)[1] == 1.0
    assert weight_change(as_served(w, torch.bfloat16), as_served(tiny_step, torch.bfloat16)) == (0.0, 0.0)
    assert serving_dtype("bfloat16") is torch.bfloat16 and serving_dtype("auto", "cpu") is torch.float32


def test_token_kl_is_zero_for_equal_and_positive_for_different_distributions():
    p = torch.log_softmax(torch.tensor([[[1.0, 2.0, 3.0]], [[0.0, 0.0, 0.0]]]), -1)
    q = torch.log_softmax(torch.tensor([[[3.0, 2.0, 1.0]], [[0.0, 0.0, 0.0]]]), -1)
    mask = torch.tensor([[1], [0]])
    assert torch.equal(token_kl(p, p, mask), torch.zeros(1))
    kl = token_kl(p, q, mask)
    expected = float((p[0, 0].exp() * (p[0, 0] - q[0, 0])).sum())
    assert kl.shape == (1,) and float(kl[0]) == pytest.approx(expected) and expected > 0
    # a constrained answer's masked tokens (-inf in both) add nothing; the KL stays finite
    masked_p, masked_q = p.clone(), q.clone()
    masked_p[..., 2] = masked_q[..., 2] = float("-inf")
    masked_p, masked_q = masked_p.log_softmax(-1), masked_q.log_softmax(-1)
    kl = token_kl(masked_p, masked_q, mask)
    assert torch.isfinite(kl).all() and float(kl[0]) > 0


def bf16_model(cache: str):
    """The tiny model in bfloat16 even on a CPU that only emulates it: these tests stand for the bf16 path."""
    return model_config(cache).model_copy(update={"cpu_bf16": "keep"})


def _smollm2_scale_learner(cache: str):
    """A DeepSpeed learner with the SmolLM2 configs' learner dtype and learning rate, its `act` adapter first
    moved off zero at the configs' SFT learning rate (a cold start's scale)."""
    from coplay.learn.learner import Learner

    cfg = load_config(SMOLLM2_CONFIG)
    learner_cfg = LearnerConfig(backend=cfg.learner.backend, bf16=cfg.learner.bf16, lr=cfg.learner.lr,
                                micro_batch_size=8, kl_beta=0.0)
    learner = Learner(bf16_model(cache), lora_specs(("act",)), learner_cfg, adapter_names=("act",))
    learner.trainers["act"].set_lr(cfg.sft.lr)
    for step in range(8):
        learner.train_step(*batch(step, ("act",), n=6))
    learner.trainers["act"].set_lr(cfg.learner.lr)
    return cfg, learner


def test_one_grpo_step_at_the_smollm2_scale_changes_the_served_adapter_and_policy(cache, tmp_path):
    from coplay.artifacts import AdapterBundle
    from coplay.config import EngineConfig
    from coplay.engines.factory import make_engine

    cfg, learner = _smollm2_scale_learner(cache)
    assert learner.bf16 and cfg.engine.dtype == "bfloat16"  # what this test stands for
    before = learner.publish(tmp_path)[0]
    samples, adv = batch(100, ("act",), n=6)
    learner.train_step(samples, adv)
    after = learner.publish(tmp_path)[0]
    assert after.version == before.version + 1
    old = AdapterBundle.read(tmp_path / "act" / f"v{before.version}")
    new = AdapterBundle.read(tmp_path / "act" / f"v{after.version}")
    assert old.files["adapter_model.safetensors"] != new.files["adapter_model.safetensors"]

    size = learner.measure_update(["act"], {"act": samples}, serving_dtype(cfg.engine.dtype), 4)["act"]
    assert size.rel_change > 0 and size.changed_share > 0 and size.kl is not None and size.kl > 0
    assert size.kl_prompts == 4 and size.kl_tokens > 0 and math.isfinite(size.kl_max)

    engine = make_engine(bf16_model(cache), EngineConfig(backend="hf", dtype=cfg.engine.dtype,
                                                           max_loras=4, max_lora_rank=8))
    try:
        engine.load_adapter("act", before.version, old.files, old.sha256)
        engine.load_adapter("act", after.version, new.files, new.sha256)
        moved = noise = 0.0
        for s in samples:
            first = engine.score(s.prompt_ids, s.completion_ids, f"act@v{before.version}")
            again = engine.score(s.prompt_ids, s.completion_ids, f"act@v{before.version}")
            stepped = engine.score(s.prompt_ids, s.completion_ids, f"act@v{after.version}")
            noise = max(noise, *(abs(a - b) for a, b in zip(first, again, strict=True)))
            moved = max(moved, *(abs(a - b) for a, b in zip(first, stepped, strict=True)))
    finally:
        engine.close()
    assert moved > noise, f"one GRPO step moved the served log-probs by {moved}, the noise is {noise}"


def test_exports_carry_the_float32_master_not_the_bf16_module(cache, tmp_path):
    """Under DeepSpeed bf16 the module's LoRA tensors are the master rounded to bfloat16; the export must
    be the master itself, so an update below bf16's spacing still reaches a float32 server."""
    from safetensors.torch import load_file

    _, learner = _smollm2_scale_learner(cache)
    published = learner.publish(tmp_path)[0]
    exported = load_file(str(tmp_path / "act" / f"v{published.version}" / "adapter_model.safetensors"))
    master = learner.trainers["act"].master_weights()
    assert all(t.dtype == torch.float32 for t in exported.values())
    module = {n: p.detach() for n, p in learner.trainers["act"].named_params.items()}
    assert any(p.dtype == torch.bfloat16 for p in module.values())
    from coplay.models.lora import saved_name

    assert {saved_name(n, "act"): v for n, v in master.items()}.keys() == exported.keys()
    for name, value in master.items():
        assert torch.equal(exported[saved_name(name, "act")], value)
