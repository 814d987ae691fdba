"""Episode runner throughput as a share of the raw engine's throughput on the same prompts
(docs/architecture.md).

Runner: `--episodes` 2048 episodes of `--steps` moves each, every move one `act` call of the tiny model
(temperature 1, seeded, `--max-tokens` new tokens at most), all episodes in flight at once through
`play_episodes` on one engine. Its figure is generated tokens / wall time of the whole run (env steps,
prompt building, parsing and the per-step turn-taking included).

Raw engine: the very prompts the runner sent (every act Sample's `prompt_ids`, with the same sampling
settings and seeds), all submitted at once through `agenerate` (`coplay.engines.throughput`), so the engine
batches as much as it can. Its figure is generated tokens / wall time.

share = runner tokens/s / raw tokens/s (medians over `--repeats`; seeded, so every repeat generates the
same tokens). On CPU the engine is cheap relative to env and prompt work, so the share is lower than on GPU,
where the target is >= 0.8. Prints one JSON object.

Run: ``python -m benchmarks.runner [--backend vllm|hf] [--episodes 16] [--steps 8] [--repeats 3] [--quick]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from coplay.config import EngineConfig, ModelConfig, TinyModelConfig
from coplay.engines.base import Engine, GenerationRequest, SamplingParams
from coplay.engines.throughput import measure_throughput

COMMAND = "python -m benchmarks.runner"


def run_runner(engine: Engine, episodes: int, steps: int, max_tokens: int, seed: int) -> dict[str, Any]:
    """One timed runner pass: (generated tokens, seconds, env seconds, the act Samples)."""
    import coplay_envs
    from coplay.agent.decision import ModelSeat
    from coplay.rollout.model_episodes import EpisodePlan, RunnerContext, SeatPlayer, play_episodes

    sampling = SamplingParams(temperature=1.0, max_tokens=max_tokens)
    seat = ModelSeat(act=None, retrieve=None, act_sampling=sampling, retrieve_sampling=sampling,
                     prompt_budget=2048 - max_tokens, history_len=4)
    plans = [EpisodePlan("2048", seed + i, f"bench-{i}", SeatPlayer("model", seat), max_steps=steps)
             for i in range(episodes)]
    ctx = RunnerContext(engine=engine, rules=coplay_envs.rules, skills_for=lambda g, r: None, run_seed=seed)
    start = time.perf_counter()
    trajectories = asyncio.run(play_episodes(ctx, plans, concurrency=episodes))
    seconds = time.perf_counter() - start
    samples = [s for t in trajectories for s in t.samples]
    return {"tokens": sum(len(s.completion_ids) for s in samples), "seconds": seconds,
            "env_seconds": ctx.counters.get("env_ns", 0) / 1e9, "calls": len(samples), "samples": samples}


def raw_requests(samples: list[Any], max_tokens: int, run_seed: int) -> list[GenerationRequest]:
    """The runner's prompts as raw requests, with the seeds the agent used (derived per step), so the raw
    engine generates the same completions."""
    from coplay.agent.decision import derive_seed

    requests = []
    for s in samples:
        episode, seat = s.sample_id.split("/")[:2]
        requests.append(GenerationRequest(s.prompt_ids, None, SamplingParams(temperature=s.temperature,
                                                                             max_tokens=max_tokens),
                                          seed=derive_seed(run_seed, 0, episode, seat, s.meta["t"], "act")))
    return requests


def main() -> None:
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")  # stdout carries only the JSON
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="vllm", choices=["vllm", "hf"])
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", default="tiny", help="`tiny` or a Hugging Face id / local folder")
    parser.add_argument("--quick", action="store_true", help="8 episodes x 4 steps, 2 repeats")
    args = parser.parse_args()
    if args.quick:
        args.episodes, args.steps, args.repeats = 8, 4, 2

    from coplay.engines.factory import make_engine

    with tempfile.TemporaryDirectory(prefix="coplay-bench-runner-") as tmp:
        model_cfg = ModelConfig(name=args.model, dtype="auto",
                                tiny=TinyModelConfig(cache_dir=str(Path(tmp) / "tiny")))
        engine_cfg = EngineConfig(backend=args.backend, max_loras=2, max_lora_rank=8, max_model_len=2048,
                                  max_num_seqs=max(8, args.episodes), cpu_kvcache_gib=1, dtype="auto",
                                  enforce_eager=True)
        engine = make_engine(model_cfg, engine_cfg)
        try:
            run_runner(engine, args.episodes, args.steps, args.max_tokens, seed=0)  # warm-up, untimed
            runs = [run_runner(engine, args.episodes, args.steps, args.max_tokens, seed=0)
                    for _ in range(args.repeats)]
            requests = raw_requests(runs[0]["samples"], args.max_tokens, run_seed=0)
            raw = measure_throughput(engine, requests, repeats=args.repeats, mode="concurrent", warmup_runs=1)
        finally:
            engine.close()
    runner_tps = statistics.median(r["tokens"] / r["seconds"] for r in runs)
    out = {
        "benchmark": "runner",
        "command": f"{COMMAND} --backend {args.backend} --episodes {args.episodes} --steps {args.steps} "
                   f"--max-tokens {args.max_tokens} --repeats {args.repeats} --model {args.model}",
        "machine": {"python": platform.python_version(), "cpu": platform.processor() or platform.machine(),
                    "cores": os.cpu_count()},
        "backend": args.backend,
        "runner": {"episodes": args.episodes, "steps": args.steps, "calls": runs[0]["calls"],
                   "tokens": int(statistics.median(r["tokens"] for r in runs)),
                   "seconds": round(statistics.median(r["seconds"] for r in runs), 3),
                   "env_seconds": round(statistics.median(r["env_seconds"] for r in runs), 3),
                   "tokens_per_s": round(runner_tps, 1)},
        "raw_engine": {k: (round(v, 3) if isinstance(v, float) else v) for k, v in raw.as_dict().items()},
        "share_runner_over_raw": round(runner_tps / raw.tokens_per_s, 3),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
