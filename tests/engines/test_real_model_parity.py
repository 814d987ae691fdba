"""Parity on a real model (slow): SmolLM2-135M-Instruct in float32, vLLM's CPU build against the `hf` engine
in one mixed batch (the base model and two random adapters on the top 8 layers), 64 greedy steps: identical
tokens except at exact ties, log-probs within 1e-3; and the learner's log-probs of the engine's sampled
tokens (the ratio's denominator at learner step 0) within 1e-3 of the engine's."""

from __future__ import annotations

import pytest

from coplay.engines.base import GenerationRequest, SamplingParams
from tests.helpers import engine_config

LOGPROB_TOL = 1e-3
TIE = 1e-5
STEPS = 64

QUESTIONS = ["What is the capital of France?",
             "Write a short story about a robot that learns to play 2048.",
             "Board:\n2 4 . .\n. 2 . .\n. . . .\n. . . 8\nWhich move merges the 2s? Explain the rules of "
             "2048 and then answer up, down, left or right.",
             "Explain how to play Tetris well, step by step."]
ADAPTERS = (None, "act@v1", "retrieve@v1")


@pytest.mark.slow
def test_vllm_hf_and_the_learner_agree_on_smollm2_with_top_layer_adapters(tmp_path):
    pytest.importorskip("vllm")
    from coplay.artifacts import AdapterBundle
    from coplay.config import LoraSpec, ModelConfig
    from coplay.engines.factory import make_engine
    from coplay.learn.logprobs import completion_logprobs
    from coplay.models.loading import load_base_model
    from coplay.models.lora import attach_adapters, load_adapter, random_adapter_folder

    model_cfg = ModelConfig(name="smollm2-135m-instruct", dtype="float32")
    spec = LoraSpec(r=8, alpha=16, dropout=0.0, top_layers=8)
    folders = {name: random_adapter_folder(model_cfg, tmp_path / name, seed, spec, name=name, scale=0.05)
               for name, seed in (("act", 5), ("retrieve", 6))}
    bundles = {name: AdapterBundle.read(folder) for name, folder in folders.items()}
    engines = [make_engine(model_cfg, engine_config(b)) for b in ("vllm", "hf")]
    try:
        for engine in engines:
            for name, bundle in bundles.items():
                engine.load_adapter(name, 1, bundle.files, bundle.sha256)
        tok = engines[1].tokenizer
        prompts = [list(tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True,
                                                tokenize=True, return_dict=True)["input_ids"])
                   for q in QUESTIONS]
        greedy = SamplingParams(temperature=0.0, max_tokens=STEPS)
        requests = [GenerationRequest(p, a, greedy) for p in prompts for a in ADAPTERS]
        from_vllm, from_hf = (e.generate(requests) for e in engines)
        compared = generated = 0
        for v, h in zip(from_vllm, from_hf, strict=True):
            generated += len(v.token_ids)
            pairs = zip(v.token_ids, h.token_ids, strict=False)
            split = next((t for t, (a, b) in enumerate(pairs) if a != b), None)
            if split is None:
                assert v.token_ids == h.token_ids
                assert v.logprobs == pytest.approx(h.logprobs, abs=LOGPROB_TOL)
                compared += len(v.token_ids)
            else:  # only an exact tie may send them different ways
                assert abs(v.logprobs[split] - h.logprobs[split]) <= LOGPROB_TOL
                assert v.logprobs[:split] == pytest.approx(h.logprobs[:split], abs=LOGPROB_TOL)
                compared += split
        assert generated >= 0.7 * STEPS * len(requests), generated  # most answers run all 64 steps
        assert compared >= 0.9 * generated, (compared, generated)  # ties part ways rarely
        assert "paris" in from_vllm[0].text.lower()
        by_adapter = [[c.token_ids for c in from_vllm[i::len(ADAPTERS)]] for i in range(len(ADAPTERS))]
        assert by_adapter[0] != by_adapter[1] != by_adapter[2], "adapters must matter"

        # the learner's model (one PeftModel, adapters by name) on the engine's tempered samples
        sampled = [GenerationRequest(p, a, SamplingParams(temperature=0.7, max_tokens=STEPS), seed=11 + i)
                   for i, (p, a) in enumerate((p, a) for p in prompts for a in ADAPTERS)]
        samples = engines[0].generate(sampled)
    finally:
        for engine in engines:
            engine.close()
    base, _ = load_base_model(model_cfg)
    learner_model = attach_adapters(base, {"act": spec, "retrieve": spec}, names=("act", "retrieve"))
    for name, folder in folders.items():
        load_adapter(learner_model, name, folder)
    learner_model.eval()
    for request, sample in zip(sampled, samples, strict=True):
        name = None if request.adapter is None else request.adapter.split("@")[0]
        mine = completion_logprobs(learner_model, name, [request.prompt_ids], [sample.token_ids], 0.7)[0]
        assert sample.logprobs == pytest.approx(mine, abs=LOGPROB_TOL), request.adapter
