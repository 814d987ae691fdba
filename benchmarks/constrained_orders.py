"""Constrained Diplomacy orders: the invalid-order rate of `act` answers with and without the constraint
(`rollout.constrained_orders`), and what the constraint costs in generated tokens/s.

Requests: the real `act` prompt (`coplay.agent.prompts.build_act_prompt`) of every power in the first
movement phase of `--seeds` seeded Diplomacy start positions, `--model` (the tiny model by default, or
SmolLM2-135M-Instruct from the model catalogue; base weights, no adapter),
seeded sampling at temperature 1, up to `--max-tokens` new tokens. Each mode (`free`, `constrained`) is timed
`--repeats` times after one warm-up on the same requests (the constrained mode's regex compilation is part
of its time). Invalid-order rate: the share of the power's units that get no legal order from the answer
(invalid or missing lines; the env makes those units hold), measured with the env's own order resolution.
Medians; `tokens_per_s_ratio` = constrained / free, measured in this run. Prints one JSON object.

Run: ``python -m benchmarks.constrained_orders [--model smollm2-135m-instruct] [--backend vllm] [--seeds 2]
[--repeats 3] [--max-tokens 256]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from typing import Any

import coplay_envs
from coplay.agent.constraint import constraint_for
from coplay.agent.parsing import parse_act
from coplay.agent.prompts import build_act_prompt
from coplay.config import EngineConfig, ModelConfig, TinyModelConfig
from coplay.engines import GenerationRequest, SamplingParams

COMMAND = "python -m benchmarks.constrained_orders"


def order_phase_requests(tokenizer: Any, seeds: int, max_tokens: int, budget: int) -> list[tuple[Any, dict]]:
    """(free request, info) for every power of the first movement phase of each seeded start."""
    out = []
    for seed in range(seeds):
        env = coplay_envs.make_env("diplomacy", negotiation_rounds=0)
        observations, infos = env.reset(seed=seed)
        for i, power in enumerate(env.agents):
            info = infos[power]
            _, ids, _ = build_act_prompt(tokenizer, budget, "diplomacy", coplay_envs.rules("diplomacy"),
                                      str(observations[power]), list(info["legal_actions"]), None, [])
            request = GenerationRequest(ids, None, SamplingParams(temperature=1.0, max_tokens=max_tokens),
                                        seed=1000 * seed + i, request_id=f"s{seed}-{power}")
            out.append((request, info))
    return out


def invalid_share(text: str, info: dict[str, Any]) -> float:
    """Share of the power's units that the answer gives no legal order (the env's own resolution)."""
    from coplay_envs.diplomacy.orders import resolve_orders

    action = parse_act(text, list(info["legal_actions"]), multi_line=True).action
    legal = info["legal_orders"]
    resolution = resolve_orders(action, legal, "M", 0)
    return 1.0 - len(resolution.orders) / max(1, len(legal))


def run_mode(engine: Any, pairs: list[tuple[Any, dict]], constrained: bool, repeats: int) -> dict[str, Any]:
    requests = [GenerationRequest(r.prompt_ids, r.adapter, r.sampling, seed=r.seed, request_id=r.request_id,
                                  regex=constraint_for("diplomacy", info) if constrained else None)
                for r, info in pairs]
    engine.generate(requests)  # warm-up (and, constrained, the grammar compilation cache of the engine)
    rates, seconds, tokens, invalid = [], [], [], []
    for _ in range(repeats):
        start = time.perf_counter()
        completions = engine.generate(requests)
        elapsed = time.perf_counter() - start
        n = sum(len(c.token_ids) for c in completions)
        rates.append(n / elapsed)
        seconds.append(elapsed)
        tokens.append(n)
        invalid.append(statistics.mean(invalid_share(c.text, info)
                                       for c, (_, info) in zip(completions, pairs, strict=True)))
    return {"tokens_per_s_median": statistics.median(rates), "tokens_per_s": rates,
            "seconds_median": statistics.median(seconds),
            "generated_tokens_median": statistics.median(tokens),
            "invalid_order_rate_median": statistics.median(invalid), "invalid_order_rate": invalid,
            "answers": len(requests)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="tiny, or a catalogue name (smollm2-135m-instruct)")
    parser.add_argument("--backend", choices=("vllm", "hf"), default="vllm")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--quick", action="store_true", help="1 seed, 1 repeat, 128 tokens")
    args = parser.parse_args()
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")  # stdout carries only the JSON
    if args.quick:
        args.seeds, args.repeats, args.max_tokens = 1, 1, 128
    from coplay.engines.factory import make_engine

    model_cfg = ModelConfig(name=args.model, dtype="float32",
                            tiny=TinyModelConfig(cache_dir=tempfile.mkdtemp(prefix="tiny-")))
    engine_cfg = EngineConfig(backend=args.backend, max_loras=2, max_lora_rank=8, max_model_len=4096,
                              max_num_seqs=16, cpu_kvcache_gib=1, dtype="float32", enforce_eager=True)
    started = time.perf_counter()
    engine = make_engine(model_cfg, engine_cfg)
    try:
        pairs = order_phase_requests(engine.tokenizer, args.seeds, args.max_tokens,
                                     engine_cfg.max_model_len - args.max_tokens)
        free = run_mode(engine, pairs, False, args.repeats)
        constrained = run_mode(engine, pairs, True, args.repeats)
    finally:
        engine.close()
    result = {
        "benchmark": "constrained_orders",
        "command": f"{COMMAND} --model {args.model} --backend {args.backend} --seeds {args.seeds} "
                   f"--repeats {args.repeats} --max-tokens {args.max_tokens}",
        "model": "tiny (random weights)" if args.model == "tiny" else args.model,
        "backend": args.backend,
        "platform": platform.platform(),
        "free": free, "constrained": constrained,
        "tokens_per_s_ratio": constrained["tokens_per_s_median"] / free["tokens_per_s_median"],
        "headline": {"invalid_free": free["invalid_order_rate_median"],
                     "invalid_constrained": constrained["invalid_order_rate_median"],
                     "tok_s_free": free["tokens_per_s_median"],
                     "tok_s_constrained": constrained["tokens_per_s_median"]},
        "seconds": round(time.perf_counter() - started, 1),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
