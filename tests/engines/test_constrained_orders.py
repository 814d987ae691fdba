"""Constrained Diplomacy orders (issue 19, item 3): both engines sample only legal order lines under the
constraint, and the learner's log-probs (its own batching path, the same masks rebuilt from the sample's
regex) equal the engines' behaviour log-probs of the constrained distribution."""

from __future__ import annotations

import pytest
import torch

import coplay_envs
from coplay.agent.constraint import constraint_for
from coplay.agent.parsing import parse_act
from coplay.engines.base import GenerationRequest, SamplingParams
from coplay.engines.token_masks import TokenMasks
from coplay.learn.batching import TrainItem, to_micro_batch
from coplay.learn.logprobs import batch_logprobs

TOL = 1e-3


@pytest.fixture(scope="module")
def orders_info():
    env = coplay_envs.make_env("diplomacy", negotiation_rounds=0)
    _, infos = env.reset(seed=5)
    info = infos["FRANCE"]
    assert constraint_for("diplomacy", info) is not None
    return info


@pytest.fixture(scope="module")
def learner(tiny_model_config, adapter_dirs):
    """A learner-style model (one PeftModel, adapters by name) and its token masks."""
    from coplay.models.loading import load_base_model
    from coplay.models.lora import attach_adapters, load_adapter
    from tests.helpers import LORA

    base, tokenizer = load_base_model(tiny_model_config)
    model = attach_adapters(base, {"act": LORA}, names=("act",))
    load_adapter(model, "act", adapter_dirs["act@v1"])
    model.eval()
    return model, TokenMasks(tokenizer, int(model.get_output_embeddings().weight.shape[0]))


def _requests(engine, info, seeds):
    prompt = engine.tokenizer.encode("You are FRANCE. Give your orders.\n", add_special_tokens=False)
    regex = constraint_for("diplomacy", info)
    sampling = SamplingParams(temperature=1.0, max_tokens=400)
    return [GenerationRequest(prompt, "act@v1", sampling, seed=s, regex=regex) for s in seeds]


def _learner_logprobs(learner, request, token_ids, constrained: bool):
    model, masks = learner
    item = TrainItem(request.prompt_ids, token_ids, [0.0] * len(token_ids), 1.0, 0.0,
                     regex=request.regex if constrained else None)
    batch = to_micro_batch([item], 0, masks)
    with torch.no_grad():
        model.set_adapter("act")
        return batch_logprobs(model, batch.tokens, batch.temperatures)[0].tolist()


def _check(engine, learner, info):
    requests = _requests(engine, info, seeds=(1, 2))
    gap = 0.0
    for request, completion in zip(requests, engine.generate(requests), strict=True):
        assert completion.finish_reason == "stop", completion.text
        parsed = parse_act(completion.text, list(info["legal_actions"]), multi_line=True)
        lines = completion.text.split("ORDERS:\n", 1)[1].splitlines()
        assert all(line in orders for line, orders in zip(lines, info["legal_orders"].values(), strict=True))
        assert len(lines) == len(info["legal_orders"]) and not parsed.error, (completion.text, parsed.error)
        expected = _learner_logprobs(learner, request, completion.token_ids, constrained=True)
        assert completion.logprobs == pytest.approx(expected, abs=TOL)
        free = _learner_logprobs(learner, request, completion.token_ids, constrained=False)
        gap = max(gap, max(abs(a - b) for a, b in zip(completion.logprobs, free, strict=True)))
    assert gap > 10 * TOL, "unmasked log-probs would have passed too: the test shows nothing"


def test_hf_samples_legal_orders_and_the_learner_matches_its_logprobs(hf_engine, learner, orders_info):
    _check(hf_engine, learner, orders_info)


def test_vllm_samples_legal_orders_and_the_learner_matches_its_logprobs(vllm_engine, learner, orders_info):
    _check(vllm_engine, learner, orders_info)


def test_negotiation_and_other_games_are_not_constrained():
    env = coplay_envs.make_env("diplomacy")
    _, infos = env.reset(seed=5)
    assert constraint_for("diplomacy", infos["FRANCE"]) is None  # negotiation: free messages
    assert constraint_for("avalon", {"legal_orders": {"x": ["y"]}}) is None


def test_the_learner_step_sees_ratio_one_on_constrained_samples_at_step_0(hf_engine, tiny_model_config,
                                                                         orders_info):
    """The learner's own batching path (`train_step`, masks rebuilt from `Sample.meta["regex"]`): a fresh
    adapter is the base model, so the first ratio of constrained samples from the base model is 1."""
    from coplay.types import Sample
    from tests.learn.scenarios import make_learner

    requests = [GenerationRequest(r.prompt_ids, None, r.sampling, seed=r.seed, regex=r.regex)
                for r in _requests(hf_engine, orders_info, seeds=(4, 5))]
    samples = [Sample("act", 0, r.prompt_ids, c.token_ids, c.logprobs, "g", temperature=1.0,
                      sample_id=f"s{i}", meta={"regex": r.regex})
               for i, (r, c) in enumerate(zip(requests, hf_engine.generate(requests), strict=True))]
    learner = make_learner(tiny_model_config.tiny.cache_dir, "torch", names=("act",), lr=1e-9,
                           old_logprobs="engine")  # the ratio against the engine's log-probs is the check
    metrics = learner.train_step(samples, {"s0": 1.0, "s1": -1.0}).adapters["act"]
    assert metrics["ratio_mean"] == pytest.approx(1.0, abs=1e-3) and metrics["clip_fraction"] == 0.0
    unmasked = [Sample(**{**s.__dict__, "meta": {}, "sample_id": s.sample_id + "-free"}) for s in samples]
    free = learner.train_step(unmasked, {"s0-free": 1.0, "s1-free": -1.0}).adapters["act"]
    assert free["ratio_mean"] < 0.9, "without the mask the learner's log-probs are lower: the test shows it"


@pytest.fixture(scope="module")
def candy_info():
    env = coplay_envs.make_env("candy_crush")
    _, info = env.reset(seed=5)
    return info


def _check_actions(engine, learner, info):
    """`rollout.constrained_actions`: every sampled answer parses clean with a legal action, and the learner's
    masked log-probs are the engine's."""
    regex = constraint_for("candy_crush", info, actions=True)
    prompt = engine.tokenizer.encode("Swap two candies.\n", add_special_tokens=False)
    requests = [GenerationRequest(prompt, "act@v1", SamplingParams(temperature=1.0, max_tokens=200), seed=s,
                                  regex=regex) for s in (1, 2, 3)]
    for request, completion in zip(requests, engine.generate(requests), strict=True):
        assert completion.finish_reason == "stop", completion.text
        parsed = parse_act(completion.text, list(info["legal_actions"]))
        assert parsed.error == "" and parsed.action in info["legal_actions"], (completion.text, parsed.error)
        expected = _learner_logprobs(learner, request, completion.token_ids, constrained=True)
        assert completion.logprobs == pytest.approx(expected, abs=TOL)


def test_hf_samples_legal_actions_under_constrained_actions(hf_engine, learner, candy_info):
    _check_actions(hf_engine, learner, candy_info)


def test_vllm_samples_legal_actions_under_constrained_actions(vllm_engine, learner, candy_info):
    _check_actions(vllm_engine, learner, candy_info)


def test_vllm_contract_answers_under_the_protocol_grammar_validate_and_match_the_learner(vllm_engine,
                                                                                        learner):
    """`skill_bank.constrained_contracts` on the vLLM engine: a finished answer validates as a protocol, and
    the learner's masked log-probs are vLLM's (the same path trains the contract adapter)."""
    from coplay.skills.contract_grammar import contract_regex
    from coplay.skills.prompts import parse_protocol

    features = {"corner_max": "bool", "empty_cells": "number", "max_tile": "number", "merges": "number"}
    prompt = vllm_engine.tokenizer.encode("Write the protocol.\n", add_special_tokens=False)
    requests = [GenerationRequest(prompt, "act@v1", SamplingParams(temperature=1.0, max_tokens=1500), seed=s,
                                  regex=contract_regex(features)) for s in (1, 2)]
    for request, completion in zip(requests, vllm_engine.generate(requests), strict=True):
        assert completion.finish_reason == "stop", completion.text[-120:]
        parse_protocol(completion.text, features)  # raises AnswerError when it does not validate
        expected = _learner_logprobs(learner, request, completion.token_ids, constrained=True)
        assert completion.logprobs == pytest.approx(expected, abs=TOL)
