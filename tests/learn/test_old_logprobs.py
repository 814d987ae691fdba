"""The PPO ratio's denominator (`learner.old_logprobs`): on-policy samples (of the adapter version the learner
holds) are scored by the learner before its update, so the ratio starts at exactly 1 and the step does not
depend on the low bits of the engine's log-probs (what made two same-seed synchronous runs differ); stale
samples keep the engine's log-probs, whose ratio corrects for the version gap."""

from __future__ import annotations

import torch
from scenarios import batch, make_learner


def _weights(learner) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in learner.adapter_weights("act").items()}


def _jitter(samples, scale: float):
    """The samples with the engine's log-probs moved by `scale` (what batching does to their low bits)."""
    from dataclasses import replace

    return [replace(s, logprobs=[p + scale * (1 if i % 2 else -1) for i, p in enumerate(s.logprobs)])
            for s in samples]


def test_on_policy_samples_start_at_ratio_one_and_ignore_the_engines_low_bits(tiny_model_config):
    cache = tiny_model_config.tiny.cache_dir
    samples, adv = batch(1, ("act",))
    trained = []
    for scale in (0.0, 1e-5):
        learner = make_learner(cache, "torch", names=("act",), epochs=1, kl_beta=0.0)
        metrics = learner.train_step(_jitter(samples, scale), adv).adapters["act"]
        assert abs(metrics["ratio_mean"] - 1.0) < 1e-6 and metrics["clip_fraction"] == 0.0  # sums' rounding
        trained.append(_weights(learner))
    for name, tensor in trained[0].items():
        assert torch.equal(tensor, trained[1][name]), name


def test_the_engine_setting_and_stale_samples_use_the_engines_log_probs(tiny_model_config):
    cache = tiny_model_config.tiny.cache_dir
    samples, adv = batch(1, ("act",))  # behaviour log-probs near -7.6, not the model's own
    engine = make_learner(cache, "torch", names=("act",), epochs=1, kl_beta=0.0, old_logprobs="engine")
    assert abs(engine.train_step(samples, adv).adapters["act"]["ratio_mean"] - 1.0) > 1e-3
    learner = make_learner(cache, "torch", names=("act",), epochs=1, kl_beta=0.0)
    learner.train_step(samples, adv)  # now at version 1: version-0 samples are stale
    stale, stale_adv = batch(2, ("act",))
    assert abs(learner.train_step(stale, stale_adv).adapters["act"]["ratio_mean"] - 1.0) > 1e-3


def test_later_epochs_keep_the_first_forwards_log_probs(tiny_model_config):
    """With 2 epochs the second pass sees the updated weights against the old policy's log-probs: its ratio
    moves away from 1 (and it is the one reported)."""
    samples, adv = batch(1, ("act",))
    learner = make_learner(tiny_model_config.tiny.cache_dir, "torch", names=("act",), epochs=2, kl_beta=0.0,
                           lr=5e-2)
    metrics = learner.train_step(samples, adv).adapters["act"]
    assert abs(metrics["ratio_mean"] - 1.0) > 1e-6
