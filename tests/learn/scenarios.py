"""Learner scenarios shared by the tests: deterministic batches, and a CLI that runs a scenario in a fresh
process (`python tests/learn/scenarios.py ...`) or on several ranks (`torchrun --nproc_per_node=2 ...`),
writing the resulting adapter weights and optimizer states to a safetensors file for the test to compare.
"""

from __future__ import annotations

import argparse

import torch

from coplay.config import LearnerConfig, LoraSpec, ModelConfig, TinyModelConfig
from coplay.types import Sample

ADAPTERS = ("act", "curator")
ZERO3_PARTITIONED = {"zero_optimization": {"stage3_param_persistence_threshold": 0}}


def model_config(cache_dir: str) -> ModelConfig:
    return ModelConfig(name="tiny", dtype="float32", tiny=TinyModelConfig(cache_dir=cache_dir))


def lora_specs(names: tuple[str, ...] = ADAPTERS, lora: dict | None = None) -> dict[str, LoraSpec]:
    """The scenarios' LoRA shape; `lora` overrides fields (e.g. `{"top_layers": 1}`)."""
    return {a: LoraSpec(**{"r": 4, "alpha": 8, "dropout": 0.0, **(lora or {})}) for a in names}


def learner_config(backend: str, stage: int = 2, **kw) -> LearnerConfig:
    base = {"lr": 5e-3, "adapter_lr": {"curator": 2e-3}, "micro_batch_size": 3, "epochs": 2, "kl_beta": 0.05,
            "grad_clip": 1.0}
    base.update(kw)
    return LearnerConfig(backend=backend, zero_stage=stage, **base)


def make_learner(cache_dir: str, backend: str, stage: int = 2, names: tuple[str, ...] = ADAPTERS,
                 lora: dict | None = None, **kw):
    from coplay.learn.learner import Learner

    overrides = ZERO3_PARTITIONED if backend == "deepspeed" and stage == 3 else None
    return Learner(model_config(cache_dir), lora_specs(names, lora), learner_config(backend, stage, **kw),
                   adapter_names=names, deepspeed_overrides=overrides)


def batch(step: int, adapters: tuple[str, ...], n: int = 5) -> tuple[list[Sample], dict[str, float]]:
    """Step `step`'s samples for `adapters`: random tokens, behaviour log-probs near the model's, fixed
    advantages. Deterministic in (step, adapter)."""
    samples, adv = [], {}
    for a_index, adapter in enumerate(adapters):
        gen = torch.Generator().manual_seed(1000 * step + a_index)
        for i in range(n):
            prompt = torch.randint(5, 2000, (int(torch.randint(2, 9, (1,), generator=gen)),),
                                   generator=gen).tolist()
            completion = torch.randint(5, 2000, (int(torch.randint(1, 6, (1,), generator=gen)),),
                                       generator=gen).tolist()
            logprobs = (-7.6 + 0.2 * torch.randn(len(completion), generator=gen)).tolist()
            sid = f"s{step}-{adapter}-{i}"
            samples.append(Sample(adapter=adapter, adapter_version=0, prompt_ids=prompt,
                                  completion_ids=completion, logprobs=logprobs, group_id=f"{adapter}-{step}",
                                  temperature=0.9, sample_id=sid))
            adv[sid] = float(torch.randn(1, generator=gen))
    return samples, adv


def prefixed_batch(step: int, adapters: tuple[str, ...], n: int = 7) -> tuple[list[Sample], dict[str, float]]:
    """`batch`'s samples behind a 20-token header every prompt shares and one of two 24-token system turns
    (two games' steps): the learner's shared-prefix path shares the header on every rank and, within a
    micro-batch whose rows have one system turn, that too."""
    samples, adv = batch(step, adapters, n)
    gen = torch.Generator().manual_seed(step)
    header = torch.randint(5, 2000, (20,), generator=gen).tolist()
    systems = [torch.randint(5, 2000, (24,), generator=gen).tolist() for _ in range(2)]
    for i, sample in enumerate(samples):
        sample.prompt_ids = header + systems[i % 3 == 0] + list(sample.prompt_ids)
    return samples, adv


def mixed_versions(samples: list[Sample], versions: dict[str, int]) -> list[Sample]:
    """`samples` with every other one from an older adapter version than the learner holds (stale: it
    keeps the engine's log-probs), the rest on-policy, so some micro-batches hold on-policy rows on one rank
    only."""
    from dataclasses import replace

    return [replace(s, adapter_version=versions[s.adapter] - (i % 2)) for i, s in enumerate(samples)]


# The resume scenario: which adapters train at each step (curator idles at step 3).
RESUME_PLAN = {1: ("act", "curator"), 2: ("act", "curator"), 3: ("act",), 4: ("act", "curator")}


def snapshot(learner) -> dict[str, torch.Tensor]:
    """Full weights (`w/`) and this rank's optimizer state (`o/`) of every adapter, keyed for safetensors."""
    out = {}
    for a in learner.adapter_names:
        out.update({f"w/{a}/{k}": v.contiguous() for k, v in learner.adapter_weights(a).items()})
        out.update({f"o/{a}/{k}": v.contiguous() for k, v in learner.optimizer_state(a).items()})
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", required=True)
    parser.add_argument("--backend", default="torch")
    parser.add_argument("--stage", type=int, default=2)
    parser.add_argument("--steps", default="1,2,3", help="learner steps of RESUME_PLAN to run")
    parser.add_argument("--resume", default=None)
    parser.add_argument("--save", default=None, help="checkpoint folder written after the last step")
    parser.add_argument("--publish", default=None, help="adapters folder: publish the last step's changes")
    parser.add_argument("--prefixed", action="store_true",
                        help="prompts behind shared system turns (`prefixed_batch`), LoRA on the top layer")
    parser.add_argument("--old-forward", action="store_true",
                        help="learner.frozen_trunk and learner.share_prefix off (transformers' own forward)")
    parser.add_argument("--mini-batches", type=int, default=1, help="learner.mini_batches")
    parser.add_argument("--mixed-versions", action="store_true",
                        help="every other sample of a step is stale (`mixed_versions`)")
    parser.add_argument("--out", required=True,
                        help="safetensors file of the final weights and moments (rank 0)")
    args = parser.parse_args()
    from safetensors.torch import save_file

    fast = not args.old_forward
    lora = {"top_layers": 1} if args.prefixed else None
    learner = make_learner(args.cache, args.backend, args.stage, lora=lora, frozen_trunk=fast,
                           share_prefix=fast, mini_batches=args.mini_batches)
    make_batch = prefixed_batch if args.prefixed else batch
    if args.resume:
        learner.load_checkpoint(args.resume)
    previous = snapshot(learner)
    for step in (int(s) for s in args.steps.split(",")):
        samples, adv = make_batch(step, RESUME_PLAN[step])
        if args.mixed_versions:
            samples = mixed_versions(samples, learner.versions)
        learner.train_step(samples, adv)
        current = snapshot(learner)
        for idle in set(learner.adapter_names) - set(RESUME_PLAN[step]):
            changed = [k for k in current if f"/{idle}/" in k and not torch.equal(current[k], previous[k])]
            if changed:
                raise SystemExit(f"rank {learner.rank}: idle adapter {idle!r} changed at step {step}: "
                                 f"{changed[:3]}")
        previous = current
    if args.publish:
        learner.publish(args.publish)
    if args.save:
        learner.save_checkpoint(args.save, bank_version=7, data_cursor={"shard": step})
    snap = previous
    rank = learner.rank
    if rank == 0:
        save_file(snap, args.out)
    if learner.world_size > 1:
        save_file(snap, f"{args.out}.rank{rank}")


if __name__ == "__main__":
    main()
