"""`vllm` (the CPU build here) against `hf`, float32: the same greedy tokens for the base model and two
different non-zero adapters in ONE mixed batch, the same log-probs, and log-probs under the tempered
sampling distribution that match the learner's (`coplay.learn.logprobs.completion_logprobs`). The vLLM
engine runs its LoRA through coplay's grouped CPU ops (`engine.cpu_lora_ops` default), so these are also
the checks that those ops compute what HF's PEFT layers do."""

from __future__ import annotations

import asyncio
import json
import os

import pytest
import torch

from coplay.engines.base import GenerationRequest, SamplingParams

TIE = 1e-5  # a step whose top-two log-probs are this close may pick either token
LOGPROB_TOL = 1e-3


def _mixed(prompts, sampling, seed=None, repeat=1):
    adapters = [None, "act@v1", "retrieve@v1"]
    pairs = [(p, a) for p in prompts for a in adapters] * repeat
    return [GenerationRequest(p, a, sampling, seed=None if seed is None else seed + i, request_id=f"r{i}")
            for i, (p, a) in enumerate(pairs)]


def test_greedy_tokens_and_logprobs_match_hf_in_one_mixed_batch(vllm_engine, hf_engine, prompts):
    requests = _mixed(prompts, SamplingParams(temperature=0.0, max_tokens=24))
    from_vllm = vllm_engine.generate(requests)
    from_hf = hf_engine.generate(requests)
    ties = steps = diverged = 0
    for request, v, h in zip(requests, from_vllm, from_hf, strict=True):
        assert v.adapter == request.adapter and v.finish_reason in ("stop", "length")
        # hf's distribution at every step of vLLM's completion (teacher forcing, temperature 1)
        table = hf_engine.logprob_table(request.prompt_ids, v.token_ids, request.adapter)
        for t, token in enumerate(v.token_ids):
            steps += 1
            best = float(table[t].max())
            if token != int(table[t].argmax()):
                assert best - float(table[t, token]) <= TIE, f"{request.request_id} step {t}: not a tie"
                ties += 1
        picked = table.gather(1, torch.tensor(v.token_ids).unsqueeze(1)).squeeze(1).tolist()
        assert v.logprobs == pytest.approx(picked, abs=LOGPROB_TOL)
        common = next((t for t, (a, b) in enumerate(zip(v.token_ids, h.token_ids, strict=False)) if a != b),
                      None)
        if common is None:
            assert v.token_ids == h.token_ids, f"{request.request_id}: lengths differ without a tie"
            assert v.logprobs == pytest.approx(h.logprobs, abs=LOGPROB_TOL)
            assert (v.text, v.finish_reason) == (h.text, h.finish_reason)
        else:  # the two engines may only part ways at a tie
            diverged += 1
            row = table[common]
            assert float(row.max()) - float(row[h.token_ids[common]]) <= TIE
            assert v.logprobs[:common] == pytest.approx(h.logprobs[:common], abs=LOGPROB_TOL)
    by_adapter = {a: [c.token_ids for r, c in zip(requests, from_vllm, strict=True) if r.adapter == a]
                  for a in (None, "act@v1", "retrieve@v1")}
    assert by_adapter[None] != by_adapter["act@v1"] != by_adapter["retrieve@v1"], "adapters must matter"
    print(json.dumps({"parity_steps": steps, "tie_steps": ties, "diverged_requests": diverged,
                      "requests": len(requests)}))


def _learner_reference(tiny_model_config, adapter_dirs):
    """The learner's own log-prob function on a learner-style model (one PeftModel, adapters by name)."""
    from coplay.learn.logprobs import completion_logprobs
    from coplay.models.loading import load_base_model
    from coplay.models.lora import attach_adapters, load_adapter
    from tests.helpers import LORA

    base, _ = load_base_model(tiny_model_config)
    model = attach_adapters(base, {"act": LORA, "retrieve": LORA}, names=("act", "retrieve"))
    load_adapter(model, "act", adapter_dirs["act@v1"])
    load_adapter(model, "retrieve", adapter_dirs["retrieve@v1"])
    model.eval()

    def reference(adapter, prompt_ids, completion_ids, temperature):
        name = None if adapter is None else adapter.split("@")[0]
        return completion_logprobs(model, name, [prompt_ids], [completion_ids], temperature)[0]

    return reference


@pytest.mark.parametrize("temperature", [0.6, 1.7])
def test_sampled_logprobs_are_tempered_like_the_learners(vllm_engine, tiny_model_config, adapter_dirs,
                                                         prompts, temperature):
    reference = _learner_reference(tiny_model_config, adapter_dirs)
    requests = _mixed(prompts[:4], SamplingParams(temperature=temperature, max_tokens=12), seed=7)
    completions = vllm_engine.generate(requests)
    again = vllm_engine.generate(requests)
    assert [c.token_ids for c in completions] == [c.token_ids for c in again], "seeded sampling reproduces"
    worst = 0.0
    for request, completion in zip(requests, completions, strict=True):
        expected = reference(request.adapter, request.prompt_ids, completion.token_ids, temperature)
        assert completion.logprobs == pytest.approx(expected, abs=LOGPROB_TOL)
        untempered = reference(request.adapter, request.prompt_ids, completion.token_ids, 1.0)
        worst = max(worst, max(abs(a - b) for a, b in zip(completion.logprobs, untempered, strict=True)))
    assert worst > 10 * LOGPROB_TOL, "temperature-1 log-probs would have passed too: the test shows nothing"


def test_top_p_logprobs_are_those_of_the_truncated_distribution(vllm_engine, hf_engine, prompts):
    sampling = SamplingParams(temperature=1.0, top_p=0.6, max_tokens=8)
    requests = _mixed(prompts[:3], sampling, seed=3)
    for request, completion in zip(requests, vllm_engine.generate(requests), strict=True):
        table = hf_engine.logprob_table(request.prompt_ids, completion.token_ids, request.adapter, top_p=0.6)
        expected = table.gather(1, torch.tensor(completion.token_ids).unsqueeze(1)).squeeze(1).tolist()
        assert completion.logprobs == pytest.approx(expected, abs=LOGPROB_TOL)


def test_concurrent_requests_are_batched_and_match_the_sync_results(vllm_engine, prompts):
    requests = _mixed(prompts, SamplingParams(temperature=0.0, max_tokens=8))

    async def run_all():
        return await asyncio.gather(*(vllm_engine.agenerate(r) for r in requests))

    concurrent = asyncio.run(run_all())
    assert [c.token_ids for c in concurrent] == [c.token_ids for c in vllm_engine.generate(requests)]
    assert [c.request_id for c in concurrent] == [r.request_id for r in requests]


def test_an_adapter_on_the_top_layer_only_serves_identically_in_vllm_and_hf(vllm_engine, hf_engine,
                                                                             tiny_model_config, tmp_path,
                                                                             prompts):
    """LoRA placement (`top_layers`) travels in the bundle: vLLM serves only the layers the bundle has
    tensors for, hf rebuilds `layers_to_transform` from its config; both give the learner's model."""
    from coplay.artifacts import AdapterBundle
    from coplay.config import LoraSpec
    from coplay.models.lora import random_adapter_folder

    spec = LoraSpec(r=8, alpha=16, dropout=0.0, top_layers=1)
    bundle = AdapterBundle.read(random_adapter_folder(tiny_model_config, tmp_path / "top", 21, spec,
                                                      name="segment", scale=0.3))
    assert bundle.config["layers_to_transform"] == [1]
    from safetensors import safe_open

    with safe_open(tmp_path / "top" / "adapter_model.safetensors", "pt") as tensors:
        assert all(".layers.1." in name for name in tensors.keys())
    for engine in (vllm_engine, hf_engine):
        engine.load_adapter("segment", 7, bundle.files, bundle.sha256)
    greedy = SamplingParams(temperature=0.0, max_tokens=16)
    requests = [GenerationRequest(p, a, greedy) for p in prompts[:3] for a in (None, "segment@v7")]
    from_vllm, from_hf = vllm_engine.generate(requests), hf_engine.generate(requests)
    for v, h in zip(from_vllm, from_hf, strict=True):
        assert v.token_ids == h.token_ids
        assert v.logprobs == pytest.approx(h.logprobs, abs=LOGPROB_TOL)
    assert [c.token_ids for c in from_vllm[0::2]] != [c.token_ids for c in from_vllm[1::2]], "it must matter"


def test_lora_requests_run_through_coplays_grouped_ops_in_the_engine_core(vllm_engine, cpu_lora_marker,
                                                                          prompts):
    vllm_engine.generate(_mixed(prompts[:2], SamplingParams(temperature=0.0, max_tokens=4)))
    assert cpu_lora_marker.exists(), "vLLM's own CPU LoRA ops ran: the coplay vLLM plugin did not load"
    assert int(cpu_lora_marker.read_text()) != os.getpid()  # vLLM's engine core process, not this one
