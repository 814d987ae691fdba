"""LoRA placement on a real model: trained tokens/s and the SFT loss with LoRA on every decoder layer against
LoRA on the top N layers only (`LoraSpec.top_layers`), same target modules, same examples, same batches.

Both placements run through the real path of the cold start: a `Learner` (plain torch) with one adapter and
`run_sft` on `act` teacher examples of the 2048 expert bot (`expert_examples`, the prompts the engines see).
The placements alternate over `--rounds` rounds in one process (top, all, top, all, ...), each round a fresh
`Learner` that trains `--batches` optimizer batches of `--batch` examples, so a machine whose load drifts
slows both alike. Reported per placement: median seconds per batch, processed tokens/s (prompt + completion
through forward and backward), completion tokens/s (the tokens that carry the loss), the SFT loss of each
batch and the completion NLL of held-out examples (another seed) after the last batch (means over rounds);
and the ratio top/all of the medians. Prints one JSON object.

Run: ``nice -n 10 python -m benchmarks.lora_placement [--model smollm2-135m-instruct] [--top 8]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

COMMAND = "python -m benchmarks.lora_placement"


def _examples(n: int, seeds: list[int]) -> list:
    import coplay_envs
    from coplay.learn.teacher import expert_examples

    examples = expert_examples("2048", seeds, coplay_envs.rules("2048"), history_len=4, max_steps=n)
    return [e for e in examples if e.adapter == "act"][: n]


def _user_only(examples: list, user_only: bool) -> list:
    """With `user_only`, the examples without their system turn (the game rules and answer format, about
    two thirds of a 2048 prompt), so a loaded machine can finish both placements in one run."""
    from dataclasses import replace

    if not user_only:
        return examples
    return [replace(e, messages=[m for m in e.messages if m["role"] != "system"]) for e in examples]


def _round(model_cfg, spec, examples, held_out, args) -> dict:
    import torch

    from coplay.config import LearnerConfig
    from coplay.learn.learner import Learner
    from coplay.learn.sft import completion_nll, run_sft, tokenize_example

    learner = Learner(model_cfg, {"act": spec},
                      LearnerConfig(backend="torch", micro_batch_size=args.batch, bf16=args.bf16),
                      adapter_names=("act",))
    tokens = [tokenize_example(learner.tokenizer, e.messages, e.completion) for e in examples]
    processed = sum(len(t.prompt_ids) + len(t.completion_ids) for t in tokens)
    completion = sum(len(t.completion_ids) for t in tokens)
    torch.manual_seed(0)
    start = time.perf_counter()
    losses = run_sft(learner, "act", examples, epochs=1, lr=args.lr, batch_size=args.batch, seed=0)
    seconds = time.perf_counter() - start
    held_out_nll = completion_nll(learner, "act", held_out)
    trainable = sum(p.numel() for p in learner.policy.parameters() if p.requires_grad)
    del learner
    return {"seconds": seconds, "processed_tokens": processed, "completion_tokens": completion,
            "losses": losses, "held_out_nll": held_out_nll, "trainable_params": trainable}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--top", type=int, default=8, help="N of the top-N placement")
    parser.add_argument("--batches", type=int, default=2)
    parser.add_argument("--batch", type=int, default=1, help="examples per optimizer batch")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--r", type=int, default=16)
    parser.add_argument("--user-only", action="store_true",
                        help="drop the prompts' system turn (shorter sequences for a loaded machine)")
    parser.add_argument("--held-out", type=int, default=1, help="held-out examples for the loss after SFT")
    parser.add_argument("--bf16", action="store_true",
                        help="bfloat16 weights and training, as the SmolLM2 demo (AVX-512 BF16 CPUs)")
    args = parser.parse_args()

    import torch

    from coplay.config import LoraSpec, ModelConfig

    torch.set_num_threads(max(1, torch.get_num_threads()))
    model_cfg = ModelConfig(name=args.model, dtype="bfloat16" if args.bf16 else "auto")
    examples = _user_only(_examples(args.batches * args.batch, [1000, 1001]), args.user_only)
    held_out = _user_only(_examples(args.held_out, [2000]), args.user_only)
    placements = {f"top{args.top}": LoraSpec(r=args.r, alpha=2 * args.r, dropout=0.0, top_layers=args.top),
                  "all": LoraSpec(r=args.r, alpha=2 * args.r, dropout=0.0)}
    runs: dict[str, list[dict]] = {name: [] for name in placements}
    for _ in range(args.rounds):
        for name, spec in placements.items():
            runs[name].append(_round(model_cfg, spec, examples, held_out, args))
            print(json.dumps({name: runs[name][-1]}), file=sys.stderr, flush=True)  # survives a timeout
    result = {"command": f"{COMMAND} --model {args.model} --top {args.top} --batches {args.batches} "
                         f"--batch {args.batch} --rounds {args.rounds} --lr {args.lr} --r {args.r} "
                         f"--held-out {args.held_out}{' --user-only' if args.user_only else ''}"
                         f"{' --bf16' if args.bf16 else ''}",
              "model": args.model, "examples": len(examples), "threads": torch.get_num_threads(),
              "placements": {}}
    for name, rounds in runs.items():
        sec = statistics.median(r["seconds"] for r in rounds)
        result["placements"][name] = {
            "seconds_per_batch": sec / args.batches,
            "processed_tokens_per_s": rounds[0]["processed_tokens"] / sec,
            "completion_tokens_per_s": rounds[0]["completion_tokens"] / sec,
            "loss_per_batch": [statistics.mean(r["losses"][i] for r in rounds) for i in range(args.batches)],
            "held_out_nll_after": statistics.mean(r["held_out_nll"] for r in rounds),
            "trainable_params": rounds[0]["trainable_params"],
        }
    top, whole = result["placements"][f"top{args.top}"], result["placements"]["all"]
    result["speedup_top_vs_all"] = top["processed_tokens_per_s"] / whole["processed_tokens_per_s"]
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
