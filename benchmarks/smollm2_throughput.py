"""Throughput on SmolLM2 (issue 16), each figure a ratio of two arms measured in this one run, and each also
as a share of the machine's matmul peak measured in the same run:

- `peak`: GFLOP/s of a 2048^3 `torch.matmul`, float32 and bfloat16, on every core, at the start and at the
  end of the run (`benchmarks.cpu_kernels.matmul_peak`); the higher of the two is the yardstick. A forward
  token costs about 2 x 135 M FLOP, so `share = forward tokens/s x 2.7e8 / peak FLOP/s`.
- `engines`: vLLM (coplay's `VllmEngine`) vs `hf` (`HfEngine`) on the same requests; vLLM with prefix caching
  on vs off (`engine.enable_prefix_caching`); a LoRA request vs a base request on the same prompts.
  Requests: real 2048 `act` prompts (`expert_examples`, chat template, about 470 SmolLM2 tokens sharing a
  system turn of about 300), greedy, `--max-tokens` new tokens; `--sets` sets of `--requests` distinct
  prompts, each set submitted once as one `generate` call; the first set
  is the untimed warm-up, the figure is the median over the others. Distinct prompts per set, so prefix
  caching shares the system turn only, never a whole prompt seen before. The arms of an engine alternate
  set by set (base, LoRA, base, LoRA, ...), so a drifting load slows both alike.
- `lora_ops` and `lora_vllm`: why the LoRA path is slower on CPU, and what helps. (1) `lora_ops`:
  `benchmarks.cpu_kernels.lora_op_costs`:
  vLLM's CPU LoRA ops (per-token weight gathers) against the base projections and against one grouped matmul
  per request, on SmolLM2's shapes, for a prefill and a decode step, at 1 and all threads and at ranks
  8/16/32 (`max_lora_rank` pads every adapter to it). (2) `lora_vllm`: raw `vllm.LLM` (no zero adapter: a base
  request there skips the LoRA ops) base vs LoRA, as shipped and with the ops replaced by the grouped matmul
  in vLLM's engine process (coplay's vLLM plugin, `COPLAY_VLLM_CPU_LORA=grouped`; the greedy tokens must
  stay equal).
  (3) `lora_engine`: coplay's `VllmEngine` itself, base vs LoRA, with `engine.cpu_lora_ops: vllm` (vLLM's
  ops) and `grouped` (coplay's default on CPU, `coplay.engines.cpu_lora`); the greedy tokens must stay equal.
  Note: coplay's `VllmEngine` on CPU serves base requests through a pinned all-zero adapter (a vLLM CPU
  indexing bug, see its docstring), so its base requests pay the LoRA ops too.
- `vllm_threads`: the raw `vllm.LLM` again with `VLLM_CPU_NUM_OF_RESERVED_CPU=0`. vLLM's CPU build binds
  its model worker's OpenMP threads itself and, on x86, reserves one core per worker for its scheduler
  process: on a 2-core machine the model runs on 1 thread. Each child reports its engine processes' thread
  counts and allowed CPUs (`engine_processes`).
- `learner`: `benchmarks.learner` on SmolLM2: plain torch vs ZeRO-2 vs ZeRO-3 processed tokens/s.
- `placement`: `benchmarks.lora_placement`: LoRA on all layers vs the top N, processed tokens/s.

Every heavy part runs in its own process, one SmolLM2 process at a time. Prints one JSON object. With
`--quick` (tiny model, small sizes) it is a smoke run: about 30 s with `--parts lora_ops,placement`, several
minutes with every part (each engine process starts vLLM).

Run: ``OMP_WAIT_POLICY=PASSIVE nice -n 10 python -m benchmarks.smollm2_throughput [--quick]``
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.cpu_kernels import lora_op_costs, matmul_peak
from coplay.engines import cpu_lora
from coplay.learn.distributed import lone_process_env

COMMAND = "python -m benchmarks.smollm2_throughput"
PARTS = ("engines", "lora_ops", "lora_vllm", "lora_engine", "vllm_threads", "learner", "placement")
RESERVED_0 = {"VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}
FLOP_PER_FORWARD_TOKEN = 2 * 135e6  # SmolLM2-135M: 2 x parameters


# ------------------------------------------------------------------------------------------- requests
def model_config(model: str, cache: str) -> Any:
    from coplay.config import ModelConfig, TinyModelConfig

    return ModelConfig(name=model, tiny=TinyModelConfig(cache_dir=cache))


def act_prompt_sets(model_cfg: Any, sets: int, per_set: int) -> list[list[list[int]]]:
    """`sets` lists of `per_set` distinct prompt-id lists: 2048 `act` prompts of the expert bot's games
    rendered by the chat template, as the cold start and the engines see them."""
    import coplay_envs
    from coplay.learn.sft import tokenize_example
    from coplay.learn.teacher import expert_examples
    from coplay.models.loading import load_tokenizer

    tokenizer = load_tokenizer(model_cfg)
    need, seed, prompts = sets * per_set, 100, []
    while len(prompts) < need:
        examples = expert_examples("2048", [seed], coplay_envs.rules("2048"), history_len=4, max_steps=24)
        prompts += [tokenize_example(tokenizer, e.messages, e.completion).prompt_ids
                    for e in examples if e.adapter == "act"]
        seed += 1
    return [prompts[k * per_set:(k + 1) * per_set] for k in range(sets)]


def shared_prefix(prompts: list[list[int]]) -> int:
    """Tokens every prompt of the list starts with (the system turn and the chat template's opening)."""
    n = min(len(p) for p in prompts)
    for i in range(n):
        if len({p[i] for p in prompts}) > 1:
            return i
    return n


# ---------------------------------------------------------------------------------------- child runs
def _coplay_engine(args: argparse.Namespace, model_cfg: Any, adapter_dir: str | None) -> tuple[Any, Any]:
    """(run(prompt lists, with_lora) -> completions' token lists, close) for coplay's `vllm` or `hf`."""
    from coplay.artifacts import AdapterBundle
    from coplay.config import EngineConfig
    from coplay.engines import GenerationRequest, SamplingParams
    from coplay.engines.factory import make_engine

    cfg = EngineConfig(backend=args.backend, max_loras=1, max_lora_rank=args.rank, max_model_len=1024,
                       max_num_seqs=args.requests, cpu_kvcache_gib=1, dtype="float32", enforce_eager=True,
                       enable_prefix_caching=args.prefix == "on",
                       cpu_lora_ops=os.environ.get(cpu_lora.MODE_ENV, "grouped"))
    engine = make_engine(model_cfg, cfg)
    if adapter_dir:
        bundle = AdapterBundle.read(Path(adapter_dir))
        engine.load_adapter("act", 1, bundle.files, bundle.sha256)

    def run(prompts: list[list[int]], lora: bool) -> list[list[int]]:
        requests = [GenerationRequest(p, "act@v1" if lora else None,
                                      SamplingParams(temperature=0.0, max_tokens=args.max_tokens), seed=i)
                    for i, p in enumerate(prompts)]
        return [list(c.token_ids) for c in engine.generate(requests)]

    return run, engine.close


def _raw_vllm(args: argparse.Namespace, model_cfg: Any, adapter_dir: str | None) -> tuple[Any, Any]:
    """(run, close) for a plain `vllm.LLM`: a base request carries no LoRA index, so it skips the LoRA ops."""
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.lora.request import LoRARequest

    from coplay.models.loading import resolve_model_path

    os.environ["VLLM_CPU_KVCACHE_SPACE"] = "1"
    path = resolve_model_path(model_cfg)
    llm = LLM(model=path, tokenizer=path, dtype="float32", max_model_len=1024, max_num_seqs=args.requests,
              enable_lora=True, max_loras=1, max_lora_rank=args.rank,
              enable_prefix_caching=args.prefix == "on",
              enforce_eager=True, enable_chunked_prefill=False, max_num_batched_tokens=8192, seed=0,
              disable_log_stats=True)
    lora = LoRARequest("act", 1, adapter_dir) if adapter_dir else None
    params = SamplingParams(temperature=0.0, max_tokens=args.max_tokens)

    def run(prompts: list[list[int]], with_lora: bool) -> list[list[int]]:
        outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params,
                            lora_request=lora if with_lora else None, use_tqdm=False)
        return [list(o.outputs[0].token_ids) for o in outs]

    def close() -> None:
        llm.llm_engine.engine_core.shutdown()

    return run, close


def engine_processes() -> list[dict]:
    """This process's descendants (vLLM's engine core and model worker): name, threads, and the CPUs their
    threads may run on (vLLM binds its OpenMP threads to cores itself, whatever OMP_NUM_THREADS says)."""
    import psutil

    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            allowed = set()
            for task in Path(f"/proc/{proc.pid}/task").iterdir():
                for line in (task / "status").read_text().splitlines():
                    if line.startswith("Cpus_allowed_list:"):
                        allowed.add(line.split(":", 1)[1].strip())
            found.append({"name": proc.name(), "threads": proc.num_threads(),
                          "cpus_allowed_lists": sorted(allowed)})
        except (psutil.Error, OSError) as exc:  # a process that ended meanwhile
            found.append({"pid": proc.pid, "error": str(exc)})
    return found


def child(args: argparse.Namespace) -> None:
    """Time the arms (`base`, and `lora` with an adapter) over every prompt set; print one JSON line."""
    model_cfg = model_config(args.model, args.cache)
    prompt_sets = json.loads(Path(args.prompts).read_text())
    arms = ["base", "lora"] if args.adapter else ["base"]
    start = time.perf_counter()
    make = _raw_vllm if args.child == "raw" else _coplay_engine
    run, close = make(args, model_cfg, args.adapter)
    startup = time.perf_counter() - start
    processes = engine_processes()
    runs: dict[str, list[dict]] = {arm: [] for arm in arms}
    try:
        for prompts in prompt_sets:
            for arm in arms:
                t0 = time.perf_counter()
                tokens = run(prompts, arm == "lora")
                seconds = time.perf_counter() - t0
                generated = sum(len(t) for t in tokens)
                runs[arm].append({"seconds": seconds, "generated": generated,
                                  "prompt_tokens": sum(len(p) for p in prompts),
                                  "tokens_sha": hashlib.sha256(json.dumps(tokens).encode()).hexdigest()[:16]})
    finally:
        close()
    print(json.dumps({"startup_s": startup, "runs": runs, "engine_processes": processes,
                      "grouped_lora_applied": bool(args.marker) and Path(args.marker).exists()}))


# -------------------------------------------------------------------------------------------- driver
def prepare_requests(args: argparse.Namespace, work: Path) -> dict:
    """Write the prompt sets for the children and build the LoRA adapter (random non-zero weights, r =
    `--rank` on all seven projections of every layer, as coplay's default `LoraSpec` places it); returns
    the request figures for the JSON. Sets `args.adapter_dir`."""
    from coplay.config import LoraSpec
    from coplay.models.lora import random_adapter_folder

    model_cfg = model_config(args.model, args.cache)
    sets = act_prompt_sets(model_cfg, args.sets, args.requests)
    (work / "prompts.json").write_text(json.dumps(sets))
    spec = LoraSpec(r=args.rank, alpha=2 * args.rank, dropout=0.0)
    args.adapter_dir = str(random_adapter_folder(model_cfg, work / "adapter", seed=11, spec=spec))
    prompts = [p for s in sets for p in s]
    return {"requests": {"sets": args.sets, "per_set": args.requests, "max_tokens": args.max_tokens,
                         "prompt_tokens_mean": statistics.mean(len(p) for p in prompts),
                         "shared_prefix_tokens": min(shared_prefix(s) for s in sets),
                         "lora": {"r": args.rank, "max_lora_rank": args.rank, "max_loras": 1,
                                  "target_modules": list(spec.target_modules), "layers": "all"}}}


def derive(out: dict, peak: dict[str, float]) -> dict:
    """Each part's summary and the ratios the issue asks for (None where a side failed)."""
    derived: dict[str, Any] = {}
    ratios: dict[str, float | None] = {}
    engines = {k: summarize(v, peak) for k, v in out.get("engines", {}).items()}
    if engines:
        on, off, hf = engines["vllm_prefix_on"], engines["vllm_prefix_off"], engines["hf"]
        ratios["vllm_over_hf"] = ratio(off.get("base", {}), hf.get("base", {}))
        ratios["vllm_prefix_on_over_off"] = ratio(on.get("base", {}), off.get("base", {}))
        ratios["coplay_vllm_lora_over_base"] = ratio(on.get("lora", {}), on.get("base", {}))
        derived["engines"] = engines
    if "lora_ops" in out:
        prefill = out["lora_ops"][1]  # the prompt's prefill on every thread, at --rank
        ratios["ops_vllm_lora_over_base_prefill"] = prefill["vllm_lora_over_base"]
        ratios["ops_grouped_lora_over_base_prefill"] = prefill["grouped_lora_over_base"]
    if "lora_vllm" in out:
        raw = {k: summarize(v, peak) for k, v in out["lora_vllm"].items()}
        plain, grouped = raw["raw_vllm"], raw["raw_vllm_grouped"]
        (ratios["raw_vllm_lora_over_base"], ratios["raw_vllm_grouped_lora_over_base"],
         ratios["grouped_over_shipped_lora"], same) = lora_pair(plain, grouped)
        if engines:
            ratios["raw_vllm_base_over_coplay_base"] = ratio(plain.get("base", {}),
                                                             engines["vllm_prefix_on"].get("base", {}))
        derived["lora_vllm"] = {**raw, "grouped_tokens_equal_shipped": same}
    if "lora_engine" in out:
        arms = {k: summarize(v, peak) for k, v in out["lora_engine"].items()}
        (ratios["coplay_vllm_ops_lora_over_base"], ratios["coplay_grouped_lora_over_base"],
         ratios["coplay_grouped_over_vllm_ops_lora"], same) = lora_pair(arms["coplay_vllm_ops"],
                                                                        arms["coplay_grouped"])
        derived["lora_engine"] = {**arms, "grouped_tokens_equal_vllm_ops": same}
    if "vllm_threads" in out:
        reserved_0 = summarize(out["vllm_threads"]["raw_vllm_reserved_0"], peak)
        shipped = derived.get("lora_vllm", {}).get("raw_vllm", {})
        for arm in ("base", "lora"):
            ratios[f"raw_vllm_reserved_0_over_default_{arm}"] = ratio(reserved_0.get(arm, {}),
                                                                      shipped.get(arm, {}))
        derived["vllm_threads"] = {"raw_vllm_reserved_0": reserved_0}
    learner = out.get("learner", {})
    if "backends" in learner:
        for r in learner["backends"].values():
            if "processed_tokens_per_s" in r:
                r["share_of_peak"] = share_of_peak(r["processed_tokens_per_s"], peak)
        for name, value in learner.get("ratio_trained_tokens_per_s_vs_torch", {}).items():
            if name != "torch":
                ratios[f"learner_{name}_over_torch"] = value
    placement = out.get("placement", {})
    if "placements" in placement:
        for r in placement["placements"].values():
            r["share_of_peak"] = share_of_peak(r["processed_tokens_per_s"], peak)
        ratios["placement_top_over_all"] = placement["speedup_top_vs_all"]
    derived["ratios"] = ratios
    derived["headline"] = {k: round(v, 3) for k, v in ratios.items() if v is not None}
    return derived


def run_child(args: argparse.Namespace, work: Path, kind: str, backend: str, prefix: str,
              adapter: str | None, grouped: bool = False, env_extra: dict[str, str] | None = None) -> dict:
    """One engine in a fresh process (`--child`), with `env_extra` in its environment; its JSON line, or
    {"error": ...}."""
    marker = work / f"grouped-{kind}-{backend}-{prefix}-{len(env_extra or {})}.marker" if grouped else None
    cmd = [sys.executable, "-m", "benchmarks.smollm2_throughput", "--child", kind, "--backend", backend,
           "--prefix", prefix, "--model", args.model, "--cache", args.cache,
           "--prompts", str(work / "prompts.json"),
           "--max-tokens", str(args.max_tokens), "--requests", str(args.requests), "--rank", str(args.rank)]
    if adapter:
        cmd += ["--adapter", adapter]
    # the raw `vllm.LLM` arms pick their LoRA ops here (coplay's plugin reads it in the engine core); the
    # coplay-engine arms take `engine.cpu_lora_ops` from their config (grouped by default)
    env = lone_process_env({cpu_lora.MODE_ENV: "grouped" if grouped else "vllm", **(env_extra or {})})
    # vLLM kills its engine when one model step runs past this (default 300 s): a whole-prompt prefill of a
    # set through the CPU LoRA ops on a loaded 2-core machine can take longer
    env.setdefault("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "3600")
    if marker:
        cmd += ["--marker", str(marker)]
        env[cpu_lora.MARKER_ENV] = str(marker)
    return _json_process(cmd, env, args.timeout)


def _json_process(cmd: list[str], env: dict[str, str] | None, timeout: int) -> dict:
    """Run `cmd`; its last stdout line that parses as JSON (or the whole stdout), else {"error": stderr}.
    The result also goes to stderr at once, so a long run that is stopped keeps what it measured."""
    result = _run_json(cmd, env, timeout)
    print(json.dumps({"command": " ".join(cmd[1:]), "result": result}), file=sys.stderr, flush=True)
    return result


def _run_json(cmd: list[str], env: dict[str, str] | None, timeout: int) -> dict:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env or lone_process_env(),
                              timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        return {"error": f"timeout after {timeout} s: {' '.join(cmd)}", "stderr": str(exc.stderr)[-1500:]}
    result = last_json_object(proc.stdout)
    if result is not None:
        return result
    errors = [ln for ln in proc.stderr.splitlines() if "Error" in ln or "error:" in ln][:20]
    return {"error": f"exit {proc.returncode}, no JSON: {' '.join(cmd)}", "error_lines": errors,
            "stderr": proc.stderr[-1500:]}


def last_json_object(stdout: str) -> dict | None:
    """The last JSON object in `stdout` that runs to its end, one line or indented over many: a child's
    libraries (DeepSpeed, vLLM) may print their own lines before the benchmark's JSON."""
    lines = stdout.splitlines()
    for start in reversed([i for i, ln in enumerate(lines) if ln.startswith("{")]):
        try:
            return json.loads("\n".join(lines[start:]))
        except json.JSONDecodeError:
            continue
    return None


def summarize(result: dict, peak: dict[str, float]) -> dict:
    """Per arm: medians over the timed sets (all but the first) of seconds, generated tokens/s and forward
    tokens/s (prompt + generated), and the forward tokens/s as a share of each dtype's matmul peak."""
    if "error" in result:
        return result
    out: dict[str, Any] = {"startup_s": round(result["startup_s"], 1)}
    for arm, runs in result["runs"].items():
        timed = runs[1:] or runs
        forward = statistics.median((r["prompt_tokens"] + r["generated"]) / r["seconds"] for r in timed)
        out[arm] = {"seconds": statistics.median(r["seconds"] for r in timed),
                    "generated_tokens_per_s": statistics.median(r["generated"] / r["seconds"] for r in timed),
                    "forward_tokens_per_s": forward,
                    "share_of_peak": share_of_peak(forward, peak),
                    "tokens_sha": [r["tokens_sha"] for r in runs]}
    for key in ("grouped_lora_applied", "engine_processes"):
        if key in result:
            out[key] = result[key]
    return out


def share_of_peak(forward_tokens_per_s: float, peak: dict[str, float]) -> dict[str, float]:
    """Forward tokens/s x 2 x 135 M FLOP over each dtype's measured matmul GFLOP/s (the learner's backward
    pass is not counted: its real share is higher)."""
    return {d: forward_tokens_per_s * FLOP_PER_FORWARD_TOKEN / (g * 1e9) for d, g in peak.items()}


def lora_pair(shipped: dict, grouped: dict) -> tuple[float | None, float | None, float | None, bool]:
    """Two summarized arms with vLLM's LoRA ops and with the grouped ones: each one's LoRA over base, grouped
    LoRA over shipped LoRA, and whether their greedy LoRA tokens are identical."""
    lora = grouped.get("lora", {})
    same = "lora" in shipped and shipped["lora"].get("tokens_sha") == lora.get("tokens_sha")
    return (ratio(shipped.get("lora", {}), shipped.get("base", {})),
            ratio(grouped.get("lora", {}), grouped.get("base", {})),
            ratio(grouped.get("lora", {}), shipped.get("lora", {})), same)


def ratio(a: dict, b: dict, key: str = "generated_tokens_per_s") -> float | None:
    """a / b of one figure, or None when either side failed."""
    if not a or not b or key not in a or key not in b:
        return None
    return a[key] / b[key]


def measure_peak(threads: int, seconds: float, n: int = 2048) -> dict[str, dict]:
    return {d: matmul_peak(d, threads, n=n, min_seconds=seconds) for d in ("float32", "bfloat16")}


def lora_ops_part(args: argparse.Namespace, threads: int) -> list[dict]:
    """vLLM's CPU LoRA ops vs the base projections vs grouped matmuls: a prefill of one prompt and a decode
    step of a full batch, at 1 and all threads, at `--rank` with 2 slots; on the prefill also ranks 8/32
    (the gathers grow with max_lora_rank) and 13 slots (coplay's default max_loras 12 + the zero adapter:
    the stacked weights grow, the gathers do not)."""
    prompt = args.op_tokens
    cases = [(prompt, args.rank, 1, 2), (prompt, args.rank, threads, 2),
             (args.requests, args.rank, threads, 2)]
    cases += [(prompt, r, threads, 2) for r in (8, 32) if r != args.rank]
    cases += [(prompt, args.rank, threads, 13)]
    return [{**lora_op_costs(tokens, rank, "float32", th, max_loras=slots, min_seconds=args.op_seconds),
             "max_loras": slots} for tokens, rank, th, slots in cases]


def main() -> None:
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")  # stdout carries only the JSON
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny model, small sizes: a smoke run")
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument("--requests", type=int, default=8, help="prompts per set (one generate call)")
    parser.add_argument("--sets", type=int, default=3, help="prompt sets; the first is the warm-up")
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--rank", type=int, default=16, help="LoRA r = max_lora_rank")
    parser.add_argument("--op-tokens", type=int, default=470, help="prefill tokens of the LoRA op timing")
    parser.add_argument("--op-seconds", type=float, default=1.0)
    parser.add_argument("--peak-seconds", type=float, default=2.0)
    parser.add_argument("--peak-n", type=int, default=2048, help="matrix size of the matmul peak")
    parser.add_argument("--learner-flags", default="--batch 1 --repeats 2 --rounds 1 --prompt-len 64 "
                                                   "--completion-len 16 --micro-batch 1")
    parser.add_argument("--placement-flags", default="--top 8 --batches 2 --batch 1 --rounds 1 --held-out 1")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per child process")
    for flag in ("--child", "--backend", "--prefix", "--cache", "--prompts", "--adapter", "--marker"):
        parser.add_argument(flag, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    if args.quick:
        args.model, args.requests, args.sets, args.max_tokens, args.rank = "tiny", 4, 2, 4, 8
        args.op_tokens, args.op_seconds, args.peak_seconds = 64, 0.05, 0.2
        # a CPU without native bfloat16 (AVX2 only) runs a 2048^3 bf16 matmul in about a minute
        args.peak_n = 256
        args.learner_flags = ("--batch 1 --repeats 1 --rounds 1 --prompt-len 16 --completion-len 4 "
                              "--micro-batch 1")
        args.placement_flags = "--top 1 --batches 1 --batch 1 --rounds 1 --held-out 1 --user-only"
    parts = set(args.parts.split(","))
    started = time.time()
    threads = os.cpu_count() or 1
    out: dict[str, Any] = {"benchmark": "smollm2_throughput",
                           "command": f"{COMMAND} {' '.join(sys.argv[1:])}".strip(),
                           "model": args.model, "cpus": threads,
                           "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
                           "load_average_start": list(os.getloadavg()),
                           "flop_per_forward_token": FLOP_PER_FORWARD_TOKEN}
    peaks = [measure_peak(threads, args.peak_seconds, args.peak_n)]
    with tempfile.TemporaryDirectory(prefix="coplay-bench-smollm2-") as tmp:
        work = Path(tmp)
        args.cache = str(work / "tiny-cache")
        if parts & {"engines", "lora_vllm", "lora_engine", "vllm_threads"}:
            out.update(prepare_requests(args, work))
        if "lora_ops" in parts:
            out["lora_ops"] = lora_ops_part(args, threads)
            print(json.dumps({"lora_ops": out["lora_ops"]}), file=sys.stderr, flush=True)
        if "lora_vllm" in parts:
            out["lora_vllm"] = {"raw_vllm": run_child(args, work, "raw", "vllm", "on", args.adapter_dir),
                                "raw_vllm_grouped": run_child(args, work, "raw", "vllm", "on",
                                                              args.adapter_dir, grouped=True)}
        if "lora_engine" in parts:
            out["lora_engine"] = {
                "coplay_vllm_ops": run_child(args, work, "engine", "vllm", "on", args.adapter_dir),
                "coplay_grouped": run_child(args, work, "engine", "vllm", "on", args.adapter_dir,
                                            grouped=True)}
        if "vllm_threads" in parts:
            out["vllm_threads"] = {"raw_vllm_reserved_0": run_child(args, work, "raw", "vllm", "on",
                                                                    args.adapter_dir, env_extra=RESERVED_0)}
        if "engines" in parts:
            out["engines"] = {
                "vllm_prefix_on": run_child(args, work, "engine", "vllm", "on", args.adapter_dir),
                "vllm_prefix_off": run_child(args, work, "engine", "vllm", "off", None),
                "hf": run_child(args, work, "engine", "hf", "off", None)}
    if "learner" in parts:
        out["learner"] = _json_process([sys.executable, "-m", "benchmarks.learner", "--model", args.model,
                                        *args.learner_flags.split()], None, 3 * args.timeout)
    if "placement" in parts:
        out["placement"] = _json_process([sys.executable, "-m", "benchmarks.lora_placement", "--model",
                                          args.model, *args.placement_flags.split()], None, 2 * args.timeout)
    peaks.append(measure_peak(threads, args.peak_seconds, args.peak_n))
    out["peak"] = {"start": peaks[0], "end": peaks[1],
                   "gflops": {d: max(p[d]["gflops"] for p in peaks) for d in ("float32", "bfloat16")}}
    out.update(derive(out, out["peak"]["gflops"]))
    out["seconds"] = time.time() - started
    out["load_average_end"] = list(os.getloadavg())
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
