"""Hot swap on the `vllm` engine: a new version changes log-probs exactly as `hf` computes; corrupt versions
are refused (by our checks or by vLLM itself) while v1 keeps serving; retired versions drain, then go."""

from __future__ import annotations

import asyncio

import pytest

from coplay.artifacts import ADAPTER_WEIGHTS, bundle_sha256
from coplay.engines.base import AdapterNotLoaded, AdapterRejected, GenerationRequest, SamplingParams

GREEDY = SamplingParams(temperature=0.0, max_tokens=12)


def _fixed_completion(tokenizer) -> list[int]:
    ids = tokenizer("INTENTION: MERGE tiles in the corner\nACTION: left",
                    add_special_tokens=False)["input_ids"]
    return ids + [tokenizer.eos_token_id]


def test_loading_v2_changes_logprobs_by_what_hf_computes(vllm_engine, hf_engine, bundles, prompts):
    completion = _fixed_completion(vllm_engine.tokenizer)
    prompt = prompts[0]
    v1_vllm, v1_hf = (e.score(prompt, completion, "act@v1") for e in (vllm_engine, hf_engine))
    files, sha = bundles["act@v2"]
    assert vllm_engine.load_adapter("act", 2, files, sha) == sha
    assert hf_engine.load_adapter("act", 2, files, sha) == sha
    assert {"act@v1", "act@v2"} <= set(vllm_engine.loaded_adapters())
    v2_vllm, v2_hf = (e.score(prompt, completion, "act@v2") for e in (vllm_engine, hf_engine))
    change_vllm = [b - a for a, b in zip(v1_vllm, v2_vllm, strict=True)]
    change_hf = [b - a for a, b in zip(v1_hf, v2_hf, strict=True)]
    assert change_vllm == pytest.approx(change_hf, abs=1e-3)
    assert v2_vllm == pytest.approx(v2_hf, abs=1e-3)
    assert sum(abs(c) for c in change_hf) > 0.05, "v2 must differ from v1 for the check to mean anything"
    # v1 still serves what it served before v2 arrived
    assert vllm_engine.score(prompt, completion, "act@v1") == pytest.approx(v1_vllm, abs=1e-5)


def _wrong_shape_bundle(files):
    """Well-formed safetensors whose first lora_A has the wrong input width: only the model can tell."""
    from safetensors.torch import load, save

    tensors = load(files[ADAPTER_WEIGHTS])
    name = next(k for k in sorted(tensors) if "lora_A" in k)
    tensors[name] = tensors[name][:, : tensors[name].shape[1] // 2].contiguous()
    bad = dict(files)
    bad[ADAPTER_WEIGHTS] = save(tensors, metadata={"format": "pt"})
    return bad


@pytest.mark.parametrize("fault", ["checksum", "truncated", "wrong_shape"])
def test_a_corrupt_version_is_refused_and_v1_keeps_serving(vllm_engine, bundles, prompts, fault):
    request = GenerationRequest(prompts[2], "act@v1", GREEDY)
    before = vllm_engine.generate([request])[0]
    files, sha = bundles["act@v2"]
    if fault == "checksum":
        bad, bad_sha = files, bundles["act@v1"][1]
    elif fault == "truncated":
        bad = {**files, ADAPTER_WEIGHTS: files[ADAPTER_WEIGHTS][: len(files[ADAPTER_WEIGHTS]) // 2]}
        bad_sha = bundle_sha256(bad)
    else:
        bad = _wrong_shape_bundle(files)
        bad_sha = bundle_sha256(bad)
    loaded = vllm_engine.loaded_adapters()
    with pytest.raises(AdapterRejected, match="act@v3"):
        vllm_engine.load_adapter("act", 3, bad, bad_sha)
    assert vllm_engine.loaded_adapters() == loaded
    after = vllm_engine.generate([request])[0]
    assert after.token_ids == before.token_ids
    assert after.logprobs == pytest.approx(before.logprobs, abs=1e-5)
    with pytest.raises(AdapterNotLoaded):
        vllm_engine.generate([GenerationRequest(prompts[2], "act@v3", GREEDY)])


def test_a_retired_version_drains_its_requests_then_leaves_vllm(vllm_engine, bundles, prompts):
    files, sha = bundles["retrieve@v1"]
    vllm_engine.load_adapter("curator", 1, files, sha)
    requests = [GenerationRequest(p, "curator@v1", SamplingParams(temperature=0.0, max_tokens=48))
                for p in prompts]

    async def retire_while_running():
        tasks = [asyncio.ensure_future(vllm_engine.agenerate(r)) for r in requests]
        while vllm_engine.in_flight("curator@v1") == 0:
            await asyncio.sleep(0.001)
        vllm_engine.retire_adapter("curator@v1")
        assert "curator@v1" not in vllm_engine.loaded_adapters()
        with pytest.raises(AdapterNotLoaded, match="retired"):
            await vllm_engine.agenerate(requests[0])
        return await asyncio.gather(*tasks)

    ids_before = vllm_engine.resident_lora_ids()
    done = asyncio.run(retire_while_running())
    assert all(len(c.token_ids) > 0 for c in done)
    assert vllm_engine.in_flight("curator@v1") == 0
    assert len(vllm_engine.resident_lora_ids()) == len(ids_before) - 1


def test_base_rows_stay_the_base_model_when_every_lora_slot_is_full(vllm_engine, hf_engine, bundles, prompts):
    """Regression: the CPU build applied the last slot's adapter to base-model rows once all slots were
    full."""
    for version, source in ((1, "act@v2"), (2, "retrieve@v1")):
        vllm_engine.load_adapter("propose", version, *bundles[source])
    adapters = [None, "act@v1", "retrieve@v1", "propose@v1", "propose@v2"]  # max_loras = 4 adapters at once
    requests = [GenerationRequest(p, a, GREEDY) for p in prompts[:3] for a in adapters]
    served = vllm_engine.generate(requests)
    base_rows = [(r, c) for r, c in zip(requests, served, strict=True) if r.adapter is None]
    reference = hf_engine.generate([r for r, _ in base_rows])
    for (_, completion), expected in zip(base_rows, reference, strict=True):
        assert completion.token_ids == expected.token_ids
        assert completion.logprobs == pytest.approx(expected.logprobs, abs=1e-3)
    for version in (1, 2):
        vllm_engine.retire_adapter(f"propose@v{version}")
