"""Learner throughput: trained tokens/s (forward + backward + optimizer step) for plain torch, DeepSpeed
ZeRO-2 and ZeRO-3, on the tiny model on CPU (the configured model on GPU), with peak memory per rank.

Each backend runs in its own fresh process (`--ranks` > 1: under `torch.distributed.run`), builds a `Learner`
with the five adapters, and times `--repeats` learner steps after one warm-up step; each step trains every
adapter on `--batch` samples (prompt `--prompt-len`, completion `--completion-len` tokens, one epoch, KL off).
`--rounds` fresh processes per backend run interleaved (torch, zero2, zero3, torch, ...), so a machine
whose load drifts slows every backend alike. Reported per backend: medians over all timed steps of step
seconds, trained (completion) tokens/s — the tokens that carry the GRPO loss, `StepMetrics.trained_tokens` —
and processed tokens/s (prompt + completion through forward and backward), summed over ranks; peak memory per
rank (CPU: max RSS of the process; GPU: max allocated); ratios of the medians against plain torch measured in
the same run. Prints one JSON object.

Run: ``python -m benchmarks.learner [--quick] [--repeats 5] [--rounds 3] [--ranks 1] [--batch 16]``
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMAND = "python -m benchmarks.learner"
BACKENDS = {"torch": ("torch", 2), "zero2": ("deepspeed", 2), "zero3": ("deepspeed", 3)}


def child(args: argparse.Namespace) -> None:
    """Time one backend in this process; rank 0 prints one JSON line."""
    import torch

    from coplay.config import LearnerConfig, LoraSpec, ModelConfig, TinyModelConfig, active_adapters
    from coplay.learn.learner import Learner
    from coplay.types import Sample

    backend, stage = BACKENDS[args.child]
    model_cfg = ModelConfig(name=args.model, tiny=TinyModelConfig(cache_dir=args.cache))
    cfg = LearnerConfig(backend=backend, zero_stage=stage, lr=1e-5, micro_batch_size=args.micro_batch,
                        epochs=1)
    adapter_names = active_adapters(False)  # the five of a run without the curriculum
    specs = {a: LoraSpec(r=16, alpha=32, dropout=0.0) for a in adapter_names}
    learner = Learner(model_cfg, specs, cfg)
    vocab = int(learner.policy.config.vocab_size)
    gen = torch.Generator().manual_seed(0)
    samples, adv = [], {}
    for adapter in adapter_names:
        for i in range(args.batch):
            sid = f"{adapter}-{i}"
            completion = torch.randint(10, vocab, (args.completion_len,), generator=gen).tolist()
            samples.append(Sample(adapter=adapter, adapter_version=0,
                                  prompt_ids=torch.randint(10, vocab, (args.prompt_len,),
                                                           generator=gen).tolist(),
                                  completion_ids=completion, logprobs=[-7.0] * len(completion),
                                  group_id=adapter, sample_id=sid))
            adv[sid] = float(torch.randn(1, generator=gen))
    seconds, trained = [], 0
    for k in range(args.repeats + 1):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        start = time.perf_counter()
        metrics = learner.train_step(samples, adv)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        if k > 0:  # the first step is the warm-up
            seconds.append(time.perf_counter() - start)
        trained = metrics.trained_tokens
    if torch.cuda.is_available():
        peak = torch.cuda.max_memory_allocated() / 2**20
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    from coplay.learn.distributed import all_reduce_sum

    peaks = all_reduce_sum([peak if r == learner.rank else 0.0 for r in range(learner.world_size)])
    if learner.rank == 0:
        median = statistics.median(seconds)
        processed = len(samples) * (args.prompt_len + args.completion_len)
        print(json.dumps({"backend": args.child, "ranks": learner.world_size, "step_seconds": seconds,
                          "median_step_seconds": median, "trained_tokens_per_step": trained,
                          "trained_tokens_per_s": trained / median,
                          "processed_tokens_per_s": processed / median,
                          "peak_memory_mib_per_rank": peaks, "device": learner.device}))


def run_backend(name: str, args: argparse.Namespace, cache: str) -> dict:
    from coplay.learn.distributed import free_port, lone_process_env

    flags = ["--child", name, "--cache", cache, "--model", args.model, "--repeats", str(args.repeats),
             "--batch", str(args.batch), "--prompt-len", str(args.prompt_len),
             "--completion-len", str(args.completion_len), "--micro-batch", str(args.micro_batch)]
    if args.ranks == 1:
        cmd = [sys.executable, "-m", "benchmarks.learner", *flags]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={args.ranks}",
               "--master_addr=127.0.0.1", f"--master_port={free_port()}", "-m", "benchmarks.learner", *flags]
    env = lone_process_env()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"backend": name, "error": proc.stderr[-2000:]}
    return json.loads(lines[-1])


def combine(name: str, runs: list[dict]) -> dict:
    """Medians over every timed step of every round (one fresh process per round)."""
    good = [r for r in runs if "step_seconds" in r]
    if not good:
        return {"backend": name, "error": runs[-1].get("error", "no result")}
    seconds = [s for r in good for s in r["step_seconds"]]
    median = statistics.median(seconds)
    trained = good[0]["trained_tokens_per_step"]
    processed_per_step = good[0]["processed_tokens_per_s"] * good[0]["median_step_seconds"]
    return {"backend": name, "ranks": good[0]["ranks"], "device": good[0]["device"], "rounds": len(good),
            "step_seconds": seconds, "median_step_seconds": median, "trained_tokens_per_step": trained,
            "trained_tokens_per_s": trained / median,
            "processed_tokens_per_s": processed_per_step / median,
            "peak_memory_mib_per_rank": [statistics.median(col) for col in
                                         zip(*(r["peak_memory_mib_per_rank"] for r in good), strict=True)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 repeats, batch 8 (a smoke run)")
    parser.add_argument("--repeats", type=int, default=5, help="timed steps per process")
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes per backend, interleaved")
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--batch", type=int, default=16, help="samples per adapter per step")
    parser.add_argument("--prompt-len", type=int, default=96)
    parser.add_argument("--completion-len", type=int, default=32)
    parser.add_argument("--micro-batch", type=int, default=8)
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--backends", default="torch,zero2,zero3")
    parser.add_argument("--timeout", type=int, default=1800)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--cache", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    if args.quick:
        args.repeats, args.batch, args.rounds = 3, 8, 1
    started = time.time()
    names = args.backends.split(",")
    runs: dict[str, list[dict]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory() as tmp:
        cache = str(Path(tmp) / "tiny-cache")
        for _ in range(args.rounds):  # interleaved, so a busy machine slows every backend alike
            for name in names:
                runs[name].append(run_backend(name, args, cache))
    results = {name: combine(name, rs) for name, rs in runs.items()}
    base = results.get("torch", {}).get("trained_tokens_per_s")
    ratios = {name: r["trained_tokens_per_s"] / base for name, r in results.items()
              if base and "trained_tokens_per_s" in r}
    argv = " ".join(sys.argv[1:])
    print(json.dumps({
        "benchmark": "learner", "command": f"{COMMAND} {argv}".strip(), "seconds": time.time() - started,
        "settings": {k: getattr(args, k) for k in ("repeats", "rounds", "ranks", "batch", "prompt_len",
                                                   "completion_len", "micro_batch", "model")},
        "backends": results, "ratio_trained_tokens_per_s_vs_torch": ratios,
        "headline": {f"{name}_trained_tok_s": round(r["trained_tokens_per_s"], 1)
                     for name, r in results.items() if "trained_tokens_per_s" in r},
    }, indent=1))


if __name__ == "__main__":
    main()
