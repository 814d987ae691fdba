"""The `hf` backend on its own: batching does not change results, seeds reproduce, log-probs are those of
the sampling distribution, concurrent calls are batched, adapters hot-swap and retire safely."""

from __future__ import annotations

import asyncio

import pytest
import torch

from coplay.engines.base import AdapterNotLoaded, AdapterRejected, GenerationRequest, SamplingParams

GREEDY = SamplingParams(temperature=0.0, max_tokens=10)


def _mixed(prompts, sampling=GREEDY, seed=None):
    adapters = [None, "act@v1", "retrieve@v1"]
    return [GenerationRequest(p, adapters[i % 3], sampling, seed=None if seed is None else seed + i,
                              request_id=f"r{i}") for i, p in enumerate(prompts)]


def test_a_mixed_adapter_batch_equals_each_request_alone(hf_engine, prompts):
    requests = _mixed(prompts[:4])
    batched = hf_engine.generate(requests)
    for request, completion in zip(requests, batched, strict=True):
        alone = hf_engine.generate([request])[0]
        assert completion.token_ids == alone.token_ids
        assert completion.logprobs == pytest.approx(alone.logprobs, abs=1e-4)
        assert completion.adapter == request.adapter and completion.request_id == request.request_id
    base = hf_engine.generate([GenerationRequest(prompts[0], None, GREEDY)])[0]
    adapted = hf_engine.generate([GenerationRequest(prompts[0], "act@v1", GREEDY)])[0]
    assert base.logprobs != pytest.approx(adapted.logprobs, abs=1e-2), "the adapter must change the model"


def test_logprobs_are_those_of_the_tempered_and_truncated_distribution(hf_engine, prompts):
    for sampling in (SamplingParams(temperature=0.7, max_tokens=8),
                     SamplingParams(temperature=1.6, max_tokens=8),
                     SamplingParams(temperature=1.0, top_p=0.5, max_tokens=8)):
        for completion, request in zip(hf_engine.generate(_mixed(prompts, sampling, seed=1)),
                                       _mixed(prompts, sampling, seed=1), strict=True):
            table = hf_engine.logprob_table(request.prompt_ids, completion.token_ids, request.adapter,
                                            temperature=sampling.temperature, top_p=sampling.top_p)
            expected = table.gather(1, torch.tensor(completion.token_ids).unsqueeze(1)).squeeze(1)
            assert completion.logprobs == pytest.approx(expected.tolist(), abs=1e-4)
            if sampling.top_p < 1.0:  # every sampled token lies in the nucleus
                assert all(lp > float("-inf") for lp in completion.logprobs)


def test_seeds_reproduce_and_differ(hf_engine, prompts):
    sampling = SamplingParams(temperature=1.0, max_tokens=12)
    first = hf_engine.generate(_mixed(prompts, sampling, seed=100))
    again = hf_engine.generate(_mixed(prompts, sampling, seed=100))
    other = hf_engine.generate(_mixed(prompts, sampling, seed=200))
    assert [c.token_ids for c in first] == [c.token_ids for c in again]
    assert [c.token_ids for c in first] != [c.token_ids for c in other]


def test_stop_tokens_end_a_completion_and_are_kept(hf_engine, prompts):
    free = hf_engine.generate([GenerationRequest(prompts[1], "act@v1", GREEDY)])[0]
    assert free.finish_reason == "length" and len(free.token_ids) == GREEDY.max_tokens
    stop_at = free.token_ids[3]
    stopped = hf_engine.generate([GenerationRequest(
        prompts[1], "act@v1", SamplingParams(temperature=0.0, max_tokens=10, stop_token_ids=(stop_at,)))])[0]
    first = free.token_ids.index(stop_at)
    assert stopped.token_ids == free.token_ids[: first + 1] and stopped.finish_reason == "stop"


def test_completions_stay_within_max_model_len(hf_engine, prompts):
    long_prompt = (prompts[0] * 200)[:1020]  # engine max_model_len is 1024
    cut = hf_engine.generate([GenerationRequest(long_prompt, None, GREEDY)])[0]
    assert len(cut.token_ids) == 4 and cut.finish_reason == "length"
    with pytest.raises(ValueError, match="max_model_len=1024"):
        hf_engine.generate([GenerationRequest((prompts[0] * 200)[:1024], None, GREEDY)])


def test_concurrent_agenerate_calls_give_the_batched_results(hf_engine, prompts):
    requests = _mixed(prompts * 2)

    async def run_all():
        return await asyncio.gather(*(hf_engine.agenerate(r) for r in requests))

    concurrent = asyncio.run(run_all())
    assert [c.token_ids for c in concurrent] == [c.token_ids for c in hf_engine.generate(requests)]


def test_hot_swap_rejects_corrupt_versions_and_retires_drained_ones(hf_engine, bundles, prompts):
    files, sha = bundles["act@v2"]
    before = hf_engine.generate([GenerationRequest(prompts[0], "act@v1", GREEDY)])[0]
    with pytest.raises(AdapterRejected, match="checksum mismatch"):
        hf_engine.load_adapter("segment", 1, files, bundles["act@v1"][1])
    assert "segment@v1" not in hf_engine.loaded_adapters()
    held = len(hf_engine.model.peft_config)
    assert hf_engine.load_adapter("segment", 1, files, sha) == sha
    assert len(hf_engine.model.peft_config) == held + 1
    assert (hf_engine.generate([GenerationRequest(prompts[0], "act@v1", GREEDY)])[0].token_ids
            == before.token_ids)
    hf_engine.retire_adapter("segment@v1")
    assert "segment@v1" not in hf_engine.loaded_adapters()
    assert len(hf_engine.model.peft_config) == held  # its weights are gone from the model
    with pytest.raises(AdapterNotLoaded):
        hf_engine.generate([GenerationRequest(prompts[0], "segment@v1", GREEDY)])


def test_a_version_retired_mid_flight_finishes_its_requests(hf_engine, bundles, prompts):
    files, sha = bundles["retrieve@v1"]
    hf_engine.load_adapter("contract", 1, files, sha)
    requests = [GenerationRequest(p, "contract@v1", SamplingParams(temperature=0.0, max_tokens=16))
                for p in prompts]

    async def retire_while_running():
        tasks = [asyncio.ensure_future(hf_engine.agenerate(r)) for r in requests]
        while hf_engine.in_flight("contract@v1") == 0:
            await asyncio.sleep(0.001)
        hf_engine.retire_adapter("contract@v1")
        with pytest.raises(AdapterNotLoaded, match="retired"):
            await hf_engine.agenerate(requests[0])
        return await asyncio.gather(*tasks)

    done = asyncio.run(retire_while_running())
    assert [len(c.token_ids) for c in done] == [16] * len(requests)
    assert hf_engine.in_flight("contract@v1") == 0 and "contract@v1" not in hf_engine.loaded_adapters()
