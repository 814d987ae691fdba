"""Device check (issue 38 part 6): the learner's SFT and GRPO steps and the `hf` engine serving a LoRA
adapter, on one accelerator, on the tiny test model, printing one JSON object. Made for a one-GPU machine
without internet whose image has CUDA torch, transformers and peft but neither vLLM, Ray nor DeepSpeed: it
needs this repository (run from its root) plus a few small wheels (`CARRY`), downloads nothing and finishes
in seconds to a couple of minutes (limit: 8).

    python -m benchmarks.device_check                 # CUDA when present (bf16), else the CPU
    python -m benchmarks.device_check --device cuda   # exit 2 with the reason when there is no CUDA device
    python -m benchmarks.device_check --device cpu    # everything on the CPU (hides the GPUs)

What it runs, in order, each part timed:
1. SFT of the `act` adapter on 16 chat examples (plain-torch backend, one rank, bf16 base on CUDA): the loss
   must fall.
2. Export of the adapter (float32 master -> bundle) and the `hf` engine on the same device loading it: a
   mixed batch of base and adapter requests, sampled at temperature 1.
3. The learner's log-probs of the engine's sampled tokens against the engine's (the ratio's denominator at
   learner step 0; bf16 on both sides, so a looser bound than the 1e-3 float32 parity on CPU).
4. Two GRPO steps on those samples (groups of 4 per prompt, advantages from the answers' lengths): the
   samples are on-policy (the adapter version the learner holds), so the first epoch's ratio is 1 (the
   learner's own log-probs are the denominator), and the adapter's weights must move.
`ok` is true when every check holds; the process exits 1 otherwise.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import tempfile
import time
from typing import Any

# what the learner and the engine import beyond torch/transformers/peft (small wheels: carry them over;
# docs/gpu-clusters.md has the commands)
CARRY = ("pydantic", "pydantic_core", "annotated_types", "typing_inspection", "msgpack", "psutil", "yaml")
LIMIT_S = 480.0
# |learner - engine| log-prob of a sampled token, per dtype: (largest, mean). float32: DESIGN's 1e-3 parity;
# bfloat16 (8 significant bits, and the engine serves the adapter cast to bf16 while the learner keeps it in
# float32): the tiny model on this CPU gave max 0.09, so first bounds until a GPU run measures its own
LOGPROB_BOUND = {"bfloat16": (0.25, 0.03), "float32": (1e-3, 1e-4)}
SFT_EXAMPLES = 16
GROUP = 4


def missing_modules() -> list[str]:
    return [m for m in ("torch", "transformers", "peft", *CARRY) if importlib.util.find_spec(m) is None]


def pick_device(wanted: str) -> tuple[str | None, str]:
    """(device, why): the device to run on, or None with the reason `wanted` cannot be had."""
    import torch

    if wanted == "cpu":
        return "cpu", "asked for the CPU"
    if torch.cuda.is_available():
        return "cuda:0", f"CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}"
    why = ("torch is built without CUDA" if torch.version.cuda is None
           else f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA device")
    return (None, why) if wanted == "cuda" else ("cpu", f"no CUDA ({why}): ran on the CPU")


def environment(device: str) -> dict[str, Any]:
    import peft
    import torch
    import transformers

    out: dict[str, Any] = {"python": sys.version.split()[0], "torch": torch.__version__,
                           "torch_cuda": torch.version.cuda, "transformers": transformers.__version__,
                           "peft": peft.__version__, "device": device}
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(0)
        out.update(gpu=props.name, gpu_memory_gib=round(props.total_memory / 2**30, 1),
                   capability=f"{props.major}.{props.minor}", bf16_supported=torch.cuda.is_bf16_supported())
    return out


class Timer:
    """Seconds per part, in the order they ran."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def part(self, name: str) -> Any:
        timer = self

        class _Part:
            def __enter__(self) -> None:
                self.start = time.perf_counter()

            def __exit__(self, *exc: object) -> None:
                timer.seconds[name] = round(time.perf_counter() - self.start, 3)

        return _Part()


def check(checks: dict[str, dict[str, Any]], name: str, ok: bool, **facts: Any) -> None:
    checks[name] = {"ok": bool(ok), **facts}


def run(device: str, work: str, dtype: str = "auto") -> dict[str, Any]:
    """The four parts on `device` in `dtype` (auto: bfloat16 on CUDA, float32 on the CPU); the report (see
    the module docstring)."""
    import torch

    from coplay.config import EngineConfig, LearnerConfig, LoraSpec, ModelConfig, TinyModelConfig
    from coplay.engines.base import GenerationRequest, SamplingParams
    from coplay.engines.hf_engine import HfEngine
    from coplay.learn.learner import Learner
    from coplay.learn.logprobs import completion_logprobs
    from coplay.learn.sft import SftSession, tokenize_example
    from coplay.models.tiny import build_tiny_model
    from coplay.types import Sample

    timer, checks = Timer(), {}
    on_gpu = device.startswith("cuda")
    if dtype == "auto":
        dtype = "bfloat16" if on_gpu else "float32"
    tiny = TinyModelConfig(cache_dir=os.path.join(work, "tiny"))
    # cpu_bf16 keep: bfloat16 asked for on the CPU stays bfloat16 (the GPU's arithmetic, on the CPU)
    model_cfg = ModelConfig(name="tiny", dtype=dtype, tiny=tiny, cpu_bf16="keep")
    with timer.part("build_tiny_model"):
        build_tiny_model(model_cfg.tiny)
    spec = {"act": LoraSpec(r=8, alpha=16, dropout=0.0)}
    learner_cfg = LearnerConfig(backend="torch", lr=5e-3, micro_batch_size=8, epochs=1, kl_beta=0.0,
                                grad_clip=1.0, bf16=dtype == "bfloat16")
    with timer.part("learner_start"):
        learner = Learner(model_cfg, spec, learner_cfg, adapter_names=("act",))
    examples = [([{"role": "user", "content": f"Board {i}: {'2 4 . 8' if i % 2 else '. 2 2 .'}. Your move?"}],
                 f"INTENTION: MERGE pair {i % 4}\nACTION: {('left', 'right', 'up', 'down')[i % 4]}")
                for i in range(SFT_EXAMPLES)]
    with timer.part("sft"):
        sft = SftSession(learner, [("act", examples, 6)], lr=5e-3, batch_size=8)
        losses = [loss for _, loss in sft.run()]
    check(checks, "sft_loss_falls", all(map(math.isfinite, losses)) and losses[-1] < 0.8 * losses[0],
          first=round(losses[0], 4), last=round(losses[-1], 4), batches=len(losses))

    with timer.part("export"):
        bundle = learner.export(["act"])["act"]
    engine = HfEngine(model_cfg, EngineConfig(backend="hf", dtype=dtype, max_model_len=512, max_lora_rank=8,
                                              max_num_seqs=16), device=device)
    try:
        with timer.part("engine_load_adapter"):
            engine.load_adapter("act", 1, bundle.files, bundle.sha256)
        prompts = [tokenize_example(engine.tokenizer, messages, answer).prompt_ids
                   for messages, answer in examples[:4]]
        sampling = SamplingParams(temperature=1.0, max_tokens=16)
        requests = [GenerationRequest(p, adapter, sampling, seed=100 * i + j)
                    for i, p in enumerate(prompts) for adapter in ("act@v1", None) for j in range(GROUP)]
        with timer.part("engine_generate"):
            outs = engine.generate(requests)
        greedy = [GenerationRequest(p, a, SamplingParams(temperature=0.0, max_tokens=16))
                  for p in prompts for a in ("act@v1", None)]
        answers = engine.generate(greedy)
    finally:
        engine.close()
    tokens = sum(len(o.token_ids) for o in outs)
    taught = sum(o.text.strip().startswith("INTENTION:") for o in answers[0::2])
    finite = all(math.isfinite(x) for o in outs for x in o.logprobs)
    differs = any(a.token_ids != b.token_ids for a, b in zip(answers[0::2], answers[1::2], strict=True))
    check(checks, "engine_serves_the_adapter", tokens > 0 and finite, tokens=tokens,
          tokens_per_s=round(tokens / max(timer.seconds["engine_generate"], 1e-9), 1),
          greedy_adapter_answers_in_taught_format=f"{taught}/{len(prompts)}",
          adapter_differs_from_base=differs)

    mine = [(r, o) for r, o in zip(requests, outs, strict=True) if r.adapter == "act@v1" and o.token_ids]
    with timer.part("learner_logprobs"):
        learner_lp = completion_logprobs(learner.policy, "act", [r.prompt_ids for r, _ in mine],
                                         [o.token_ids for _, o in mine], 1.0)
    gaps = [abs(a - b) for (_, o), lp in zip(mine, learner_lp, strict=True)
            for a, b in zip(o.logprobs, lp, strict=True)]
    largest, mean = max(gaps), sum(gaps) / len(gaps)
    bound_max, bound_mean = LOGPROB_BOUND[dtype]
    check(checks, "learner_matches_engine_logprobs", largest <= bound_max and mean <= bound_mean,
          max_abs_gap=round(largest, 5), mean_abs_gap=round(mean, 6), tokens=len(gaps),
          bounds={"max": bound_max, "mean": bound_mean}, dtype=dtype)

    samples, advantages = [], {}
    for k, (request, out) in enumerate(mine):
        sid = f"s{k}"
        samples.append(Sample(adapter="act", adapter_version=1, prompt_ids=list(request.prompt_ids),
                              completion_ids=list(out.token_ids), logprobs=list(out.logprobs),
                              group_id=f"p{k // GROUP}", temperature=1.0, sample_id=sid))
        advantages[sid] = (len(out.token_ids) - 8) / 8.0
    before = {n: t.clone() for n, t in learner.adapter_weights("act").items()}
    grpo = []
    with timer.part("grpo_steps"):
        for _ in range(2):
            grpo.append(learner.train_step(samples, advantages).adapters["act"])
    moved = max(float((learner.adapter_weights("act")[n] - t).abs().max()) for n, t in before.items())
    check(checks, "grpo_first_ratio_is_one", abs(grpo[0]["ratio_mean"] - 1.0) <= 1e-6,
          ratio_mean=round(grpo[0]["ratio_mean"], 5), clip_fraction=grpo[0]["clip_fraction"])
    check(checks, "grpo_moves_the_adapter", moved > 0 and all(math.isfinite(g["loss"]) for g in grpo),
          max_abs_change=moved, losses=[round(g["loss"], 5) for g in grpo], samples=len(samples))
    memory = (round(torch.cuda.max_memory_allocated() / 2**20, 1) if on_gpu else None)
    return {"ok": all(c["ok"] for c in checks.values()), "checks": checks, "seconds": timer.seconds,
            "peak_cuda_mib": memory}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    parser.add_argument("--dtype", choices=("auto", "bfloat16", "float32"), default="auto",
                        help="auto: bfloat16 on CUDA, float32 on the CPU")
    parser.add_argument("--out", default=None, help="also write the JSON here")
    args = parser.parse_args()
    if args.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # before torch: the learner and engine then see no GPU
    started = time.perf_counter()
    report: dict[str, Any] = {"command": "python -m benchmarks.device_check " + " ".join(sys.argv[1:])}
    missing = missing_modules()
    if missing:
        report.update(ok=False, missing_modules=missing,
                      how=f"pip install --no-index --find-links WHEELS for {missing}, the wheels for this "
                          f"Python downloaded on a connected machine (docs/gpu-clusters.md)")
        code = 2
    else:
        device, why = pick_device(args.device)
        report["device_choice"] = why
        if device is None:
            report.update(ok=False, skipped=f"--device cuda: {why}")
            code = 2
        else:
            report["environment"] = environment(device)
            with tempfile.TemporaryDirectory() as work:
                report.update(run(device, work, args.dtype))
            code = 0 if report["ok"] else 1
    report["total_s"] = round(time.perf_counter() - started, 1)
    report["within_limit"] = report["total_s"] <= LIMIT_S
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    sys.exit(code)


if __name__ == "__main__":
    main()
