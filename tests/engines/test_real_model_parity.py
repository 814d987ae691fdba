"""Parity on a real model (slow): SmolLM2-135M-Instruct in float32, greedy, vLLM's CPU build against the `hf`
engine in one mixed batch (base model and a random adapter on the top 8 layers): identical tokens except at
exact ties, log-probs within 1e-3."""

from __future__ import annotations

import pytest

from coplay.engines.base import GenerationRequest, SamplingParams
from tests.helpers import engine_config

LOGPROB_TOL = 1e-3
TIE = 1e-5

QUESTIONS = ["What is the capital of France?", "Name three colours.",
             "Board:\n2 4 . .\n. 2 . .\n. . . .\n. . . 8\nWhich move merges the 2s? Answer up, down, left "
             "or right.",
             "Write one sentence about chess."]


@pytest.mark.slow
def test_vllm_and_hf_agree_on_smollm2_greedy_with_a_top_layer_adapter(tmp_path):
    pytest.importorskip("vllm")
    from coplay.artifacts import AdapterBundle
    from coplay.config import LoraSpec, ModelConfig
    from coplay.engines.factory import make_engine
    from coplay.models.lora import random_adapter_folder

    model_cfg = ModelConfig(name="smollm2-135m-instruct", dtype="float32")
    spec = LoraSpec(r=8, alpha=16, dropout=0.0, top_layers=8)
    bundle = AdapterBundle.read(random_adapter_folder(model_cfg, tmp_path / "act", 5, spec, scale=0.05))
    engines = [make_engine(model_cfg, engine_config(b)) for b in ("vllm", "hf")]
    try:
        for engine in engines:
            engine.load_adapter("act", 1, bundle.files, bundle.sha256)
        tok = engines[1].tokenizer
        greedy = SamplingParams(temperature=0.0, max_tokens=32)
        prompts = [tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True,
                                           tokenize=True, return_dict=True)["input_ids"] for q in QUESTIONS]
        requests = [GenerationRequest(list(p), a, greedy) for p in prompts for a in (None, "act@v1")]
        from_vllm, from_hf = (e.generate(requests) for e in engines)
        for v, h in zip(from_vllm, from_hf, strict=True):
            pairs = zip(v.token_ids, h.token_ids, strict=False)
            split = next((t for t, (a, b) in enumerate(pairs) if a != b), None)
            if split is None:
                assert v.token_ids == h.token_ids
                assert v.logprobs == pytest.approx(h.logprobs, abs=LOGPROB_TOL)
            else:  # only an exact tie may send them different ways
                assert abs(v.logprobs[split] - h.logprobs[split]) <= LOGPROB_TOL
                assert v.logprobs[:split] == pytest.approx(h.logprobs[:split], abs=LOGPROB_TOL)
        assert "paris" in from_vllm[0].text.lower()
        assert [c.token_ids for c in from_vllm[0::2]] != [c.token_ids for c in from_vllm[1::2]]
    finally:
        for engine in engines:
            engine.close()
