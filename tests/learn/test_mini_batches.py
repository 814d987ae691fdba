"""Several optimizer updates per learner step (`learner.mini_batches`, verl's PPO mini-batches): the step's
samples are cut into mini-batches that keep a same-state group whole, each normalised on its own and
followed by an update, and every mini-batch's ratio is taken against the policy that sampled it (scored
before the first update), not against the weights the earlier mini-batches already moved."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from scenarios import batch, make_learner

from coplay.config import LearnerConfig
from coplay.learn.batching import TrainItem, mini_batch_items
from coplay.learn.logprobs import make_token_batch


def _item(prompt: list[int], k: int) -> TrainItem:
    return TrainItem(prompt, [k + 10], [-1.0], 1.0, float(k))


def test_mini_batches_keep_each_groups_answers_together_and_split_evenly():
    groups = [[_item([g, g + 1], k) for k in range(16)] for g in range(8)]  # 8 states x 16 answers
    minis = mini_batch_items([item for group in groups for item in group], 4)
    assert [len(m) for m in minis] == [32, 32, 32, 32]
    owners = [{tuple(i.prompt_ids) for i in m} for m in minis]
    assert all(len(o) == 2 for o in owners) and len(set().union(*owners)) == 8  # no group cut in two
    six = mini_batch_items([item for group in groups[:6] for item in group], 4)
    assert [len(m) for m in six] == [32, 16, 32, 16]  # every update used, no group cut
    singles = [_item([k], k) for k in range(5)]
    assert sorted(len(m) for m in mini_batch_items(singles, 2)) == [2, 3]
    assert mini_batch_items(singles, 1) == [singles]
    assert len(mini_batch_items(singles[:2], 4)) == 2  # never more mini-batches than prompts


def test_a_config_needs_at_least_one_mini_batch():
    with pytest.raises(ValueError):
        LearnerConfig(mini_batches=0)


def _weights(learner) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in learner.adapter_weights("act").items()}


def _own_logprobs(learner, samples):
    """The samples with the engine's log-probs replaced by `learner`'s own (its current weights)."""
    out = []
    with torch.no_grad():
        for s in samples:
            tokens = make_token_batch([s.prompt_ids], [s.completion_ids], 0)
            lp = learner.trainers["act"].forward(tokens, torch.tensor([s.temperature]))[0]
            out.append(replace(s, logprobs=lp[: len(s.completion_ids)].tolist()))
    return out


@pytest.mark.parametrize("backend", ["torch", "deepspeed"])
def test_each_mini_batch_is_one_update_against_the_sampling_policys_log_probs(tiny_model_config, backend):
    cache = tiny_model_config.tiny.cache_dir
    samples, adv = batch(1, ("act",), n=6)
    kw = {"names": ("act",), "epochs": 1, "kl_beta": 0.0, "lr": 5e-2, "mini_batches": 2}
    learner = make_learner(cache, backend, **kw)
    metrics = learner.train_step(samples, adv).adapters["act"]
    assert metrics["updates"] == 2.0 and learner.updates["act"] == 2
    assert abs(metrics["ratio_mean"] - 1.0) > 1e-6  # the second update sees the first one's weights
    # the same step with the old policy's log-probs handed in as the engine's gives the same weights
    reference = make_learner(cache, backend, old_logprobs="engine", **kw)
    reference.train_step(_own_logprobs(make_learner(cache, backend, **kw), samples), adv)
    for name, tensor in _weights(reference).items():
        assert torch.allclose(tensor, _weights(learner)[name], atol=1e-4), name  # rounding x lr
    one = make_learner(cache, backend, **{**kw, "mini_batches": 1})
    assert one.train_step(samples, adv).adapters["act"]["updates"] == 1.0 and one.updates["act"] == 1
