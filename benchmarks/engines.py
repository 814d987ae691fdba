"""Engine tokens/s: `vllm` against `hf` on the same requests, plus the raw-engine throughput figure that the
episode runner's throughput is compared against (`coplay.engines.throughput.measure_throughput`).

Requests: `--requests` prompts (a shared system prefix + a distinct game-like observation, ~150-250 tokens,
so prefix caching has something to share), a mixed batch over the base model and two LoRA adapters with
random non-zero weights, seeded sampling at temperature 1, `--max-tokens` new tokens each. Each backend is
timed `--repeats` times after one warm-up: "batch" (one `generate` call) and "concurrent" (every request
through `agenerate` at once, as runners submit), after `--warmup-runs` untimed runs (a fresh `hf` process on
CPU runs its first few batches 5-15x slower). On an oversubscribed CPU (more busy processes than cores),
run with OMP_WAIT_POLICY=PASSIVE: spinning OpenMP threads otherwise slow the `hf` main-thread path ~10x.
Medians; `ratio_vllm_over_hf` compares medians measured
in this run. Prints one JSON object.

Run: ``python -m benchmarks.engines [--requests 24] [--max-tokens 32] [--repeats 5] [--backends vllm,hf]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from coplay.artifacts import AdapterBundle
from coplay.config import EngineConfig, LoraSpec, ModelConfig, TinyModelConfig
from coplay.engines import GenerationRequest, SamplingParams
from coplay.engines.throughput import measure_throughput
from coplay.models.lora import random_adapter_folder

COMMAND = "python -m benchmarks.engines"
LORA = LoraSpec(r=8, alpha=16, dropout=0.0)
ADAPTERS = (None, "act@v1", "retrieve@v1")


def make_requests(tokenizer: Any, count: int, max_tokens: int, seed: int = 0) -> list[GenerationRequest]:
    from coplay.models.tiny_corpus import tiny_corpus

    lines = tiny_corpus(seed=seed + 1, lines=count * 8)
    system = "You play 2048. Legal actions: up down left right. Answer with INTENTION and ACTION. " * 4
    rng = random.Random(seed)
    requests = []
    for i in range(count):
        observation = "\n".join(rng.sample(lines, 4))
        ids = tokenizer(system + "\nObservation:\n" + observation,
                        add_special_tokens=False)["input_ids"][:400]
        requests.append(GenerationRequest(ids, ADAPTERS[i % len(ADAPTERS)],
                                          SamplingParams(temperature=1.0, max_tokens=max_tokens),
                                          seed=seed + i, request_id=f"bench-{i}"))
    return requests


def engine_config(backend: str, max_num_seqs: int) -> EngineConfig:
    return EngineConfig(backend=backend, max_loras=4, max_lora_rank=8, max_model_len=1024,
                        max_num_seqs=max_num_seqs, cpu_kvcache_gib=1, dtype="auto", enforce_eager=True)


def bench_backend(backend: str, model_cfg: ModelConfig, bundles: dict[str, tuple[dict[str, bytes], str]],
                  count: int, max_tokens: int, repeats: int, max_num_seqs: int,
                  warmup_runs: int) -> dict[str, Any]:
    from coplay.engines.factory import make_engine

    start = time.perf_counter()
    engine = make_engine(model_cfg, engine_config(backend, max_num_seqs))
    startup = time.perf_counter() - start
    try:
        for label, (files, sha) in bundles.items():
            name, version = label.split("@v")
            engine.load_adapter(name, int(version), files, sha)
        requests = make_requests(engine.tokenizer, count, max_tokens)
        batch = measure_throughput(engine, requests, repeats=repeats, mode="batch", warmup_runs=warmup_runs)
        concurrent = measure_throughput(engine, requests, repeats=repeats, mode="concurrent", warmup_runs=1)
    finally:
        engine.close()
    return {"startup_s": round(startup, 2), "batch": batch.as_dict(), "concurrent": concurrent.as_dict(),
            "prompt_tokens_mean": sum(len(r.prompt_ids) for r in requests) / len(requests)}


def main() -> None:
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")  # stdout carries only the JSON
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-num-seqs", type=int, default=8)
    parser.add_argument("--warmup-runs", type=int, default=4, help="untimed runs before the first timed mode")
    parser.add_argument("--backends", default="vllm,hf")
    parser.add_argument("--model", default="tiny", help="`tiny` or a Hugging Face id / local folder")
    args = parser.parse_args()
    backends = [b for b in args.backends.split(",") if b]

    with tempfile.TemporaryDirectory(prefix="coplay-bench-engines-") as tmp:
        model_cfg = ModelConfig(name=args.model, dtype="auto",
                                tiny=TinyModelConfig(cache_dir=str(Path(tmp) / "tiny")))
        read = {label: AdapterBundle.read(random_adapter_folder(model_cfg, Path(tmp) / label, seed, LORA))
                for label, seed in (("act@v1", 11), ("retrieve@v1", 13))}
        bundles = {label: (b.files, b.sha256) for label, b in read.items()}
        results = {b: bench_backend(b, model_cfg, bundles, args.requests, args.max_tokens, args.repeats,
                                    args.max_num_seqs, args.warmup_runs) for b in backends}
    out: dict[str, Any] = {
        "benchmark": "engines",
        "command": f"{COMMAND} --requests {args.requests} --max-tokens {args.max_tokens} "
        f"--repeats {args.repeats} --max-num-seqs {args.max_num_seqs} --warmup-runs {args.warmup_runs} "
        f"--backends {args.backends} --model {args.model}",
        "machine": {"python": platform.python_version(), "cpu": platform.processor() or platform.machine()},
        "backends": results,
    }
    if {"vllm", "hf"} <= set(results):
        for mode in ("batch", "concurrent"):
            out[f"ratio_vllm_over_hf_{mode}"] = round(
                results["vllm"][mode]["tokens_per_s"] / results["hf"][mode]["tokens_per_s"], 3)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
