"""Learner speed on the SmolLM2 demo config: transformers' own forward on the full prompts (the old path)
against the split forward of `coplay.learn.trunk` (frozen trunk, shared prompt prefix) and the compact prompt
layout, side by side in one process.

The learner is the demo's (`launch/configs/demo-candy_crush-smollm2.yaml`, or `--config`: LoRA r16/α32 on the
seven projections of the top 8 of SmolLM2's 30 layers, micro-batches of 8, backend, learning rate and dtype as
configured: bfloat16 where the config says so, run as float32 on a CPU without native bf16 as the learner
does there (`model.cpu_bf16: auto`; the JSON's `dtype` is the one that ran), `--dtype float32` to force
it), training the `act` adapter on real `act` samples of the config's first game: the prompts the decision
agent sends (`expert_examples` on the game as `game.<game>.env_kwargs` configures it, chat template, in each
`--prompt-formats` layout) and the expert's answers as completions, advantages ±1, on-policy (the learner's
first forward gives the old log-probs, as in a synchronous run). One `Learner` per arm and prompt format
(`--arms`: `old` = frozen_trunk and share_prefix off, `trunk`, `prefix`, `new` = both on; an arm is named
`<arm>/<format>` when more than one format runs), all built from the same seed; the formats' samples are the
same decisions (same seeds, positions and answers), only laid out differently. Every repeat times one
`train_step` of every arm, the arms' order alternating between repeats so a machine whose load drifts slows
them alike, after one untimed warm-up step each.

Reported per arm: median seconds per step, samples/s, processed tokens/s (every sample's prompt +
completion tokens, as `benchmarks.learner` counts them), and two shares of the matmul peak in the learner's
dtype (`benchmarks.cpu_kernels.matmul_peak`, measured at the start and the end of this run on the same
threads; the higher is the yardstick): `share_of_peak` counts 2 x the base model's parameters (SmolLM2: 2 x
134.5 M) FLOP per processed token, as `benchmarks/results/smollm2-throughput-learner.json` does (the forward
of the tokens, whether computed or shared), `executed_share_of_peak` the matmul FLOP the arm actually runs
(`executed_flop`: forward of every layer over the tokens it computes, backward of the adapted layers, LM head
where it runs). Ratios of each arm's samples/s over the first format's `old` (the learner as it was before
the CPU-cost work: full prompts, neither switch); the largest difference of the arms' adapter weights from
the same format's `old` after the steps beside the largest weight (they train on the same data, so they agree
to rounding, which AdamW magnifies to a fraction of one step's size on entries whose gradient is near zero:
there it steps by about ±lr whatever the gradient's size).
`--contend N` runs a process keeping N threads busy with float32 matmuls throughout (a rollout engine beside
the learner, as in a run; the peak is then measured under it too). Prints one JSON object and writes it to
`--out`. Results files written before `--prompt-formats` existed (2048, float32) name their arms without a
format: those ran on the full layout.

`--groups state` trains four answers at each position instead (same-state GRPO groups): the split forward
then computes each position's whole prompt once (`coplay.learn.batching.sharing_micro_batches`).

Run: ``python -m benchmarks.learner_speed [--samples 16] [--repeats 3] [--arms old,new]
[--prompt-formats full,compact] [--groups state] [--config PATH] [--dtype float32]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from coplay.learn.trunk import MIN_SHARED_PREFIX, shared_prefix_len

COMMAND = "python -m benchmarks.learner_speed"
DEMO = "launch/configs/demo-candy_crush-smollm2.yaml"
ARMS = {"old": (False, False), "trunk": (True, False), "prefix": (False, True), "new": (True, True)}
OUT = "benchmarks/results/learner-speed-smollm2-candy_crush.json"


ANSWERS_PER_STATE = 4


def act_samples(tokenizer: Any, cfg: Any, count: int, history: int, prompt_format: str,
                groups: str = "episode") -> tuple[list, dict]:
    """`count` act Samples of the config's first game with the decision agent's prompts (`prompt_format`
    layout, the game as `game.<game>.env_kwargs` configures it) and the expert's answers. `groups`:
    `episode`, every sample at its own position (episode groups after the first move); `state`, four
    answers at each position (a same-state group: the expert's answer with its ACTION line set to each of
    the first four legal actions), so four samples share their whole prompt."""
    import coplay_envs
    from coplay.learn.sft import tokenize_example
    from coplay.learn.teacher import expert_examples
    from coplay.types import Sample

    game = cfg.games[0]
    per_state = ANSWERS_PER_STATE if groups == "state" else 1
    steps = cfg.rollout.max_steps or 8
    seeds = list(range(1000, 1000 + max(1, count // steps + 2)))
    examples = [e for e in expert_examples(game, seeds, coplay_envs.rules(game), history_len=history,
                                           max_steps=steps, prompt_format=prompt_format,
                                           env_kwargs=dict(cfg.game[game].env_kwargs))
                if e.adapter == "act"][:max(1, count // per_state)]
    if per_state > 1:
        examples = [(e.messages, e.completion.rsplit("ACTION:", 1)[0] + f"ACTION: {a}")
                    for e in examples for a in (list(e.legal) * per_state)[:per_state]][:count]
    else:
        examples = [(e.messages, e.completion) for e in examples]
    samples, advantages = [], {}
    for i, (messages, completion) in enumerate(examples):
        tokens = tokenize_example(tokenizer, messages, completion)
        sid = f"act-{i}"
        samples.append(Sample(adapter="act", adapter_version=0, prompt_ids=tokens.prompt_ids,
                              completion_ids=tokens.completion_ids,
                              logprobs=[-1.0] * len(tokens.completion_ids), group_id=f"g{i // 4}",
                              temperature=cfg.sampling.temperature, sample_id=sid))
        advantages[sid] = 1.0 if i % 2 else -1.0
    return samples, advantages


def executed_flop(samples: list[Any], micro_batch: int, top: int, layers: int, arm: str, dims: dict) -> float:
    """Matmul FLOP of one learner step of `arm` over `samples` (Samples or TrainItems, in the order trained;
    micro-batches of `micro_batch`):
    forward of each layer's projections (2 x its weights per token) and attention (4 x hidden x keys per
    token), backward of the `top` adapted layers (the same again for the input gradient; LoRA's own terms
    are under 1%), the LM head (2 x hidden x vocab per column, twice with backward) where it runs. The split
    forward (`frozen_trunk` or `share_prefix`) runs the last layer's key and value projections at every
    column and the rest of it only at the completion columns (`coplay.learn.last_layer`). Padding counts: a
    padded column is computed like a real one."""
    hidden, per_layer, vocab, kv = dims["hidden"], dims["layer_weights"], dims["vocab"], dims["kv_weights"]
    frozen, shared = ARMS[arm]
    total = 0.0
    trunk_done: set[tuple[int, ...]] = set()
    step_prefix = _common([s.prompt_ids for s in samples])
    for rows in _micro_batches(samples, micro_batch, shared):
        prompts = [s.prompt_ids for s in rows]
        prefix, base = 0, 0
        if shared:  # `batching.share_prefixes` on one rank
            own = _common(prompts)
            if step_prefix >= MIN_SHARED_PREFIX:
                prefix, base = own, step_prefix
            elif own >= MIN_SHARED_PREFIX and len(rows) > 1:
                prefix, base = own, own
        width = max(len(s.prompt_ids) + len(s.completion_ids) for s in rows) - prefix
        keys = prefix + width / 2  # mean keys a suffix token attends to
        split = frozen or prefix > 0
        answer = max(len(s.completion_ids) for s in rows)
        full_layers = layers - 1 if split else layers  # the split forward trims the last layer
        total += len(rows) * width * (2 * per_layer + 4 * hidden * keys) * (full_layers + top)
        if split:  # the last layer: keys/values at every column, the rest at the answer's (backward: adapted)
            last = width * 2 * kv + answer * (2 * (per_layer - kv) + 4 * hidden * (prefix + width))
            total += len(rows) * last * (2 if top else 1)
        if prefix:
            key = tuple(prompts[0][:base])
            trunk_tokens = (prefix - base) + (0 if frozen and key in trunk_done else base)
            trunk_done.add(key)
            per_token = 2 * per_layer + 2 * hidden * prefix  # attention: half the prefix on average
            adapted = (top - 1) * per_token + 2 * kv  # the last layer: the prefix's keys/values only
            total += trunk_tokens * (layers - top) * per_token + prefix * 2 * adapted
        # the split forward: the LM head only where completion tokens are predicted; `logits_to_keep`:
        # every column from the shortest prompt's end
        columns = answer if split else width + prefix - min(len(p) for p in prompts) + 1
        total += 2 * 2 * hidden * vocab * len(rows) * columns
    return total


def _micro_batches(samples: list[Any], micro_batch: int, shared: bool) -> list[list[Any]]:
    """The micro-batches the learner cuts (`sharing_micro_batches` where it shares prefixes: the answers to
    one prompt together), on one rank."""
    if shared:
        from coplay.learn.batching import sharing_micro_batches

        return sharing_micro_batches(samples, 0, 1, micro_batch)
    return [samples[k : k + micro_batch] for k in range(0, len(samples), micro_batch)]


def _common(prompts: list[list[int]]) -> int:
    return shared_prefix_len(prompts)


def arm_names(arms: list[str], formats: list[str]) -> list[tuple[str, str, str]]:
    """(name, arm, prompt format) per learner: `<arm>/<format>` when more than one format runs. Arms named
    with their format (`old/full,new/compact`) are taken as they are, without `formats`."""
    if all("/" in arm for arm in arms):
        return [(arm, *arm.split("/", 1)) for arm in arms]
    return [(f"{arm}/{fmt}" if len(formats) > 1 else arm, arm, fmt) for fmt in formats for arm in arms]


def load_benchmark_config(args: argparse.Namespace) -> Any:
    from coplay.config import load_config

    dtype = ["model.dtype=float32", "learner.bf16=false"] if args.dtype == "float32" else []
    return load_config(args.config, [*dtype, f"learner.backend={args.backend}",
                                     f"learner.micro_batch_size={args.micro_batch}", *args.set])


def build_arms(args: argparse.Namespace, cfg: Any) -> dict[str, Any]:
    from coplay.learn.learner import Learner

    learners = {}
    for name, arm, _ in arm_names(args.arms.split(","), args.prompt_formats.split(",")):
        frozen, shared = ARMS[arm]
        learner_cfg = cfg.learner.model_copy(update={"frozen_trunk": frozen, "share_prefix": shared})
        learners[name] = Learner(cfg.model, cfg.adapters, learner_cfg, cfg.sampling.max_tokens,
                                 seed=cfg.seeds.run, adapter_names=("act",))
    return learners


def cpu_flags() -> dict[str, bool]:
    flags = set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    return {"avx2": "avx2" in flags, "avx512f": "avx512f" in flags,
            "native_bf16": bool(flags & {"avx512_bf16", "amx_bf16"})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=16, help="act samples per learner step")
    parser.add_argument("--micro-batch", type=int, default=8, help="learner.micro_batch_size (demo: 8)")
    parser.add_argument("--repeats", type=int, default=3, help="timed steps per arm")
    parser.add_argument("--arms", default="old,new", help=f"comma-separated, of {sorted(ARMS)}; or each with "
                                                          f"its layout, e.g. old/full,new/compact")
    parser.add_argument("--prompt-formats", default="full,compact",
                        help="comma-separated rollout.prompt_format layouts, each with every arm; the first "
                             "format's `old` is the baseline of the ratios")
    parser.add_argument("--config", default=DEMO, help="the run config whose learner and game are measured")
    parser.add_argument("--dtype", choices=("config", "float32"), default="config",
                        help="config: model.dtype and learner.bf16 as the config says; float32: both float32 "
                             "(a CPU without native bfloat16)")
    parser.add_argument("--history", type=int, default=0, help="recent steps in the prompts")
    parser.add_argument("--groups", choices=("episode", "state"), default="episode",
                        help="episode: one sample per position; state: 4 answers per position (same prompt)")
    parser.add_argument("--backend", default="deepspeed", help="learner.backend (the demo's: deepspeed)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (the demo's learner.threads)")
    parser.add_argument("--peak-seconds", type=float, default=2.0)
    parser.add_argument("--contend", type=int, default=0,
                        help="threads of a competing process doing float32 matmuls throughout (a rollout "
                             "engine sharing the cores, as in a run); 0: none")
    parser.add_argument("--out", default=OUT, help="also write the JSON here ('' : don't)")
    parser.add_argument("--set", action="append", default=[],
                        help="more config overrides, e.g. model.name=tiny for a smoke run")
    args = parser.parse_args()

    import torch


    torch.set_num_threads(args.threads)
    started, load_start = time.time(), list(os.getloadavg())
    rival = competitor(args.contend) if args.contend else None
    try:
        out = measure(args, started, load_start)
    finally:
        if rival is not None:
            rival.kill()
            rival.wait()
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


def competitor(threads: int) -> subprocess.Popen:
    """A process that keeps `threads` cores busy with float32 matmuls (what a rollout engine does beside the
    learner in a run), until killed or until this process is gone."""
    code = (f"import os, torch\ntorch.set_num_threads({threads})\na = torch.randn(512, 512)\n"
            f"while os.getppid() == {os.getpid()}:\n    a = torch.tanh(a @ a)\n")
    return subprocess.Popen([sys.executable, "-c", code])


def measure(args: argparse.Namespace, started: float, load_start: list[float]) -> dict:
    """Build the arms, time them, and return the JSON object (module docstring)."""
    import torch

    from benchmarks.cpu_kernels import matmul_peak

    cfg = load_benchmark_config(args)
    learners = build_arms(args, cfg)
    first = next(iter(learners.values()))
    # what the learner computes in: a bfloat16 config runs float32 on a CPU without native bfloat16
    # (model.cpu_bf16: auto), and the peak that yardsticks it must be that dtype's
    dtype = str(first.policy.get_input_embeddings().weight.dtype).removeprefix("torch.")
    peaks = [matmul_peak(dtype, args.threads, min_seconds=args.peak_seconds)]
    plan = arm_names(args.arms.split(","), args.prompt_formats.split(","))
    data = {fmt: act_samples(first.tokenizer, cfg, args.samples, args.history, fmt, args.groups)
            for fmt in dict.fromkeys(fmt for _, _, fmt in plan)}
    format_of = {name: fmt for name, _, fmt in plan}
    names = list(learners)
    for name in names:  # warm-up, untimed
        learners[name].train_step(*data[format_of[name]])
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for repeat in range(args.repeats):
        for name in names if repeat % 2 == 0 else names[::-1]:
            begin = time.perf_counter()
            learners[name].train_step(*data[format_of[name]])
            seconds[name].append(time.perf_counter() - begin)
            print(json.dumps({name: seconds[name][-1]}), file=sys.stderr, flush=True)
    peaks.append(matmul_peak(dtype, args.threads, min_seconds=args.peak_seconds))
    peak = max(p["gflops"] for p in peaks) * 1e9
    results = arm_results(args, learners, plan, data, seconds, peak)
    base = results[names[0]]["samples_per_s"] if plan[0][1] == "old" else None
    game = cfg.games[0]
    return {
        "benchmark": "learner_speed",
        "command": f"{COMMAND} {' '.join(sys.argv[1:])}".strip(),
        "model": cfg.model.name, "config": args.config, "game": game,
        "env_kwargs": dict(cfg.game[game].env_kwargs), "dtype": dtype, "cpu": cpu_flags(),
        "cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
        "load_average_start": load_start, "load_average_end": list(os.getloadavg()),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "settings": {"samples": args.samples, "micro_batch": args.micro_batch, "repeats": args.repeats,
                     "backend": args.backend, "lora": cfg.adapters["act"].model_dump(),
                     "history": args.history, "groups": args.groups,
                     "prompt_formats": {fmt: token_settings(samples) for fmt, (samples, _) in data.items()}},
        "peak": {"dtype": dtype, "start": peaks[0], "end": peaks[-1], "gflops": peak / 1e9},
        "arms": results,
        "baseline": names[0] if base else None,
        "ratio_samples_per_s_vs_old": {n: r["samples_per_s"] / base for n, r in results.items()} if base
        else {},
        "contending_threads": args.contend,
        "seconds": time.time() - started,
    }


def token_settings(samples: list[Any]) -> dict[str, Any]:
    prompt_lens = [len(s.prompt_ids) for s in samples]
    return {"prompt_tokens": {"min": min(prompt_lens), "median": statistics.median(prompt_lens),
                              "max": max(prompt_lens)},
            "shared_prefix_tokens": _common([s.prompt_ids for s in samples]),
            "completion_tokens_mean": statistics.mean(len(s.completion_ids) for s in samples)}


def arm_results(args: argparse.Namespace, learners: dict[str, Any], plan: list[tuple[str, str, str]],
                data: dict[str, tuple[list, dict]], seconds: dict[str, list[float]],
                peak: float) -> dict[str, dict[str, Any]]:
    """Per arm: the timings, throughputs, shares of `peak` and the weight difference from the same
    format's `old` arm (module docstring)."""
    from coplay.learn.batching import TrainItem, order_for_sharing
    from coplay.learn.trunk import lowest_adapted_layer

    first = next(iter(learners.values()))
    config = first.policy.config
    layers = int(config.num_hidden_layers)
    top = layers - lowest_adapted_layer(first.policy, "act")
    last_layer = first.policy.get_base_model().get_decoder().layers[-1]
    base_weights = {n: p.numel() for n, p in last_layer.named_parameters()
                    if p.dim() == 2 and "lora_" not in n}
    kv_weights = sum(n for name, n in base_weights.items() if ".k_proj." in name or ".v_proj." in name)
    dims = {"hidden": int(config.hidden_size), "vocab": int(config.vocab_size),
            "layer_weights": sum(base_weights.values()), "kv_weights": kv_weights}
    flop_per_token = 2 * sum(p.numel() for n, p in first.policy.named_parameters() if "lora_" not in n)
    old_of = {fmt: name for name, arm, fmt in plan if arm == "old"}
    results = {}
    for name, arm, fmt in plan:
        samples = data[fmt][0]
        processed = sum(len(s.prompt_ids) + len(s.completion_ids) for s in samples)
        # the order share_prefix trains them in (executed_flop reads only the tokens)
        ordered = order_for_sharing([TrainItem(s.prompt_ids, s.completion_ids, s.logprobs, 1.0, 0.0)
                                     for s in samples])
        median = statistics.median(seconds[name])
        flop = executed_flop(ordered if ARMS[arm][1] else samples, args.micro_batch, top, layers, arm, dims)
        weights = learners[name].adapter_weights("act")
        reference = learners[old_of[fmt]].adapter_weights("act") if fmt in old_of else None
        results[name] = {
            "arm": arm, "prompt_format": fmt, "frozen_trunk": ARMS[arm][0], "share_prefix": ARMS[arm][1],
            "step_seconds": seconds[name], "median_step_seconds": median,
            "samples_per_s": len(samples) / median, "processed_tokens_per_s": processed / median,
            "share_of_peak": processed * flop_per_token / median / peak,
            "executed_gflop_per_step": flop / 1e9, "executed_share_of_peak": flop / median / peak,
            "adapted_layers": top, "layers": layers,
            "max_weight_difference_from_old": None if reference is None else
            max(float((weights[k] - reference[k]).abs().max()) for k in reference),
            "max_abs_weight": max(float(w.abs().max()) for w in weights.values()),
        }
    return results


if __name__ == "__main__":
    main()
