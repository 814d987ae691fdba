"""How long the vLLM CPU engine takes to start (issue 35 item 4), old path against new, side by side in one
run: `engine.cpu_start: vllm` (vLLM's own start) against `lean` (coplay's, `coplay/engines/vllm_engine.py`).

Every start is a fresh process (`--child`), as a rollout worker's is: the figure runs from the process's
first coplay import to `make_engine` returning (vLLM's imports in this process and in the processes it
spawns, model load, LoRA slots, KV cache, coplay's zero adapter), then
- `first_generation_s`: one greedy request of 8 tokens (a run pays it before its first answer);
- `tokens_per_s`: `--requests` real 2048 `act` prompts (the decision agent's, about 470 SmolLM2 tokens)
  with `--max-tokens` greedy new tokens each, one `generate` call: generated tokens / seconds. So a faster
  start that cost decode speed would show here. Its tokens' hash must be the same on both paths.

The engine is the SmolLM2 demo's (`launch/configs/demo-2048-smollm2.yaml`: max_model_len 2048,
max_num_seqs 16, 12 LoRA slots of rank 16, prefix caching, bfloat16, which runs as float32 on a CPU
without native bfloat16) with `--set` overrides on top. `--lora-ops` runs every path once per value of
`engine.cpu_lora_ops` (coplay's grouped LoRA ops are the default).

Starts: `--starts` per path, the paths alternating (old, new, new, old, ...) so a drifting load slows both
alike. The first start of each path runs with an empty vLLM cache root (`VLLM_CACHE_ROOT`, where vLLM keeps
what it learns about a model class between starts) and is reported apart (`first_start_s`: a machine that
has not started this engine, except for the OS's file cache); the others reuse the cache and give
`warm_start_s` (median, with every value). Each child's output lines are stamped with the seconds since it
began, and the stamps of vLLM's milestones (`marks`) say where a start spends its time. Prints one JSON
object and writes it to `--out`.

Run: ``nice -n 19 python -m benchmarks.engine_start [--starts 3] [--lora-ops grouped,vllm]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

COMMAND = "python -m benchmarks.engine_start"
DEMO = "launch/configs/demo-2048-smollm2.yaml"
OUT = "benchmarks/results/engine-start-smollm2.json"
PATHS = {"old": "vllm", "new": "lean"}  # path -> engine.cpu_start
# vLLM's log lines that mark the phases of a start (first occurrence of each, with its stamp)
MARKS = {
    "engine_core_started": "Waiting for init message",
    "engine_core_init": "Initializing a V1 LLM engine",
    "worker_process_started": "WorkerProc",
    "load_model_begin": "Starting to load model",
    "load_model_done": "Model loading took",
    "kv_cache": "for KV cache",
    "init_engine_done": "init engine",
}


# -------------------------------------------------------------------------------------------- child
def child(args: argparse.Namespace) -> None:
    """One start, a first request and the timed generation; prints one JSON line."""
    t0 = time.perf_counter()
    from coplay.config import load_config
    from coplay.engines import GenerationRequest, SamplingParams
    from coplay.engines.factory import make_engine

    cfg = load_config(args.config, json.loads(args.overrides))
    engine = make_engine(cfg.model, cfg.engine)
    start_s = time.perf_counter() - t0
    prompts = json.loads(Path(args.prompts).read_text())
    try:
        t1 = time.perf_counter()
        first = SamplingParams(temperature=0.0, max_tokens=8)
        engine.generate([GenerationRequest(prompts[0][:32], None, first, seed=0)])
        first_s = time.perf_counter() - t1
        requests = [GenerationRequest(p, None, SamplingParams(temperature=0.0, max_tokens=args.max_tokens),
                                      seed=i) for i, p in enumerate(prompts)]
        t2 = time.perf_counter()
        completions = engine.generate(requests)
        gen_s = time.perf_counter() - t2
    finally:
        engine.close()
    tokens = [list(c.token_ids) for c in completions]
    generated = sum(len(t) for t in tokens)
    import hashlib

    print(json.dumps({"start_s": start_s, "first_generation_s": first_s, "generation_s": gen_s,
                      "generated_tokens": generated, "tokens_per_s": generated / gen_s,
                      "tokens_sha": hashlib.sha256(json.dumps(tokens).encode()).hexdigest()[:16],
                      "engine": cfg.engine.model_dump(mode="json")}), flush=True)


# ------------------------------------------------------------------------------------------- driver
def run_start(args: argparse.Namespace, work: Path, overrides: list[str], cache_root: Path) -> dict:
    """One child process; its JSON, the stamps of vLLM's milestones in its output, and its wall time."""
    cmd = [sys.executable, "-u", "-m", "benchmarks.engine_start", "--child", "--config", args.config,
           "--overrides", json.dumps(overrides), "--prompts", str(work / "prompts.json"),
           "--max-tokens", str(args.max_tokens)]
    env = {**os.environ, "VLLM_CACHE_ROOT": str(cache_root), "VLLM_LOGGING_LEVEL": "INFO",
           "PYTHONUNBUFFERED": "1"}
    lines: list[tuple[float, str]] = []
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    timer = threading.Timer(args.timeout, proc.kill)
    timer.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append((time.perf_counter() - started, line.rstrip("\n")))
        proc.wait()
    finally:
        timer.cancel()
    wall = time.perf_counter() - started
    result = None
    for _, line in reversed(lines):
        if line.startswith("{"):
            try:
                result = json.loads(line)
                break
            except json.JSONDecodeError:
                continue
    if result is None:
        tail = [text for _, text in lines[-30:]]
        return {"error": f"exit {proc.returncode}, no JSON", "overrides": overrides, "tail": tail}
    marks = {}
    for name, needle in MARKS.items():
        hit = next((round(t, 2) for t, text in lines if needle in text), None)
        if hit is not None:
            marks[name] = hit
    result.update({"overrides": overrides, "wall_s": round(wall, 2), "marks": marks})
    return result


def prepare(args: argparse.Namespace, work: Path) -> dict:
    """The model folder the engine serves (built once into the model cache) and the prompts."""
    from benchmarks.smollm2_throughput import act_prompt_sets
    from coplay.config import load_config
    from coplay.engines.hf_engine import resolve_dtype
    from coplay.models.loading import resolve_model_path

    cfg = load_config(args.config, args.set)
    resolve_model_path(cfg.model, serve_dtype=resolve_dtype(cfg.model, cfg.engine, on_gpu=False))
    prompts = act_prompt_sets(cfg.model, 1, args.requests)[0]
    (work / "prompts.json").write_text(json.dumps(prompts))
    return {"requests": args.requests, "max_tokens": args.max_tokens,
            "prompt_tokens_mean": statistics.mean(len(p) for p in prompts)}


def summarize(starts: list[dict]) -> dict:
    ok = [s for s in starts if "error" not in s]
    out: dict[str, Any] = {"starts": len(starts), "failed": len(starts) - len(ok)}
    if not ok:
        return out
    warm = [s["start_s"] for s in ok[1:]]
    out.update({
        "first_start_s": round(ok[0]["start_s"], 2),
        "warm_start_s": round(statistics.median(warm), 2) if warm else None,
        "warm_start_values": [round(v, 2) for v in warm],
        "first_generation_s": round(statistics.median(s["first_generation_s"] for s in ok), 3),
        "tokens_per_s": round(statistics.median(s["tokens_per_s"] for s in ok), 2),
        "tokens_per_s_values": [round(s["tokens_per_s"], 2) for s in ok],
        "tokens_sha": sorted({s["tokens_sha"] for s in ok}),
        "marks_median": {k: round(statistics.median(s["marks"][k] for s in ok if k in s["marks"]), 2)
                         for k in MARKS if any(k in s["marks"] for s in ok)},
    })
    return out


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=DEMO)
    parser.add_argument("--set", action="append", default=[], help="a config override (repeatable)")
    parser.add_argument("--starts", type=int, default=3, help="starts per path (the first is the cold one)")
    parser.add_argument("--lora-ops", default="grouped", help="engine.cpu_lora_ops values, comma-separated")
    parser.add_argument("--requests", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--timeout", type=int, default=900, help="seconds per child process")
    parser.add_argument("--out", default=OUT, help="where the JSON goes ('' for nowhere)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--overrides", default="[]", help=argparse.SUPPRESS)
    parser.add_argument("--prompts", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    started = time.time()
    command = f"{COMMAND} {' '.join(sys.argv[1:])}".strip()
    out: dict[str, Any] = {"benchmark": "engine_start", "command": command, "config": args.config,
                           "overrides": args.set, "cpus": os.cpu_count(),
                           "load_average_start": list(os.getloadavg())}
    runs: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="coplay-engine-start-") as tmp:
        work = Path(tmp)
        out["generation"] = prepare(args, work)
        for ops in args.lora_ops.split(","):
            keys = {path: f"{path}_{ops}" for path in PATHS}
            caches = {path: work / f"vllm-cache-{key}" for path, key in keys.items()}
            for k in range(args.starts):
                order = list(PATHS) if k % 2 == 0 else list(PATHS)[::-1]
                for path in order:
                    overrides = [*args.set, f"engine.cpu_start={PATHS[path]}", f"engine.cpu_lora_ops={ops}"]
                    result = run_start(args, work, overrides, caches[path])
                    engine = result.pop("engine", None)
                    if engine is not None:
                        out.setdefault("engine", {})[keys[path]] = engine
                    runs.setdefault(keys[path], []).append(result)
                    print(json.dumps({keys[path]: result}), file=sys.stderr, flush=True)
    out["runs"] = runs
    out["summary"] = {key: summarize(starts) for key, starts in runs.items()}
    ratios = {}
    for ops in args.lora_ops.split(","):
        old, new = out["summary"].get(f"old_{ops}", {}), out["summary"].get(f"new_{ops}", {})
        ratios[f"warm_start_old_over_new_{ops}"] = ratio(old.get("warm_start_s"), new.get("warm_start_s"))
        ratios[f"first_start_old_over_new_{ops}"] = ratio(old.get("first_start_s"), new.get("first_start_s"))
        ratios[f"tokens_per_s_new_over_old_{ops}"] = ratio(new.get("tokens_per_s"), old.get("tokens_per_s"))
        ratios[f"same_tokens_{ops}"] = bool(old.get("tokens_sha")) and old.get("tokens_sha") == new.get(
            "tokens_sha")
    out["ratios"] = ratios
    out["headline"] = {f"{key}_warm_start_s": s.get("warm_start_s") for key, s in out["summary"].items()}
    out["seconds"] = round(time.time() - started, 1)
    out["load_average_end"] = list(os.getloadavg())
    text = json.dumps(out, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
