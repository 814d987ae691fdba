"""Memory at scale: the per-rank memory estimate a learner checks before it loads anything, and gradient
checkpointing.

`estimate_memory` adds up, per learner rank, from the model's `config.json` and the config tree alone:
- base weights: every parameter of the frozen base, replicated on every rank (no engine owns it);
- LoRA weights of the five adapters (ZeRO-3 partitions them over the ranks), their gradients (ZeRO-2/3
  partition them) and optimizer state: AdamW's two fp32 moments, plus the fp32 master copy under bf16, over
  the ranks under ZeRO, on the host with `learner.offload_optimizer`;
- activations of one micro-batch (`learner.micro_batch_size` sequences of `learner.max_seq_len`, else
  `engine.max_model_len` tokens) kept for the backward pass, in the layers from the lowest adapted one up
  (`LoraSpec.top_layers`: no gradient flows below it). Per token and layer a LLaMA/Qwen-style decoder
  with a frozen base and LoRA on the usual projections keeps about 4·hidden + 4·q_dim + 3·kv_dim +
  4·intermediate values (norm inputs, q/k/v and the attention output with SDPA, the MLP's gate, up and
  product, each LoRA's rank-r intermediate); with `learner.gradient_checkpointing` only each layer's input
  stays and one layer is recomputed at a time. Plus the completion logits in float32 (the log-softmax over the
  vocabulary for `max(sampling.max_tokens)` columns, about four copies).
It is an estimate (allocator slack, CUDA context and fragmentation come on top), printed at start and
compared with the device's memory, or `learner.memory_budget_gib` when set; a config whose estimate exceeds
it is refused with `LearnerMemoryError`, which names the parts and the keys that shrink them.

Gradient checkpointing: the learner runs in `eval()` mode (dropout off, so the first epoch's ratios are 1),
but transformers only checkpoints a decoder layer whose own `training` flag is set. `eval_mode` therefore
sets exactly those layer flags back on when checkpointing is configured; no submodule that behaves
differently in training (dropout, LoRA dropout) changes.

Imports torch and transformers lazily (`config.json` is read with `AutoConfig`, no weights).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from coplay.config import ConfigError, CoplayConfig

GIB = 1024**3
ADAM_MOMENT_BYTES = 8  # exp_avg + exp_avg_sq in float32
MASTER_BYTES = 4  # fp32 master copy of bf16 weights


class LearnerMemoryError(ConfigError):
    """The learner's per-rank memory estimate exceeds the device's memory (or `learner.memory_budget_gib`)."""


@dataclass(frozen=True)
class ModelDims:
    """What the estimate needs from a decoder's `config.json`."""

    hidden: int
    layers: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied_embeddings: bool
    qk_norm: bool = False
    attention_bias: bool = False

    @classmethod
    def from_hf_config(cls, config: Any) -> ModelDims:
        heads = int(config.num_attention_heads)
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        return cls(hidden=int(config.hidden_size), layers=int(config.num_hidden_layers),
                   intermediate=int(config.intermediate_size), heads=heads,
                   kv_heads=int(getattr(config, "num_key_value_heads", None) or heads),
                   head_dim=int(head_dim), vocab=int(config.vocab_size),
                   tied_embeddings=bool(getattr(config, "tie_word_embeddings", False)),
                   qk_norm=config.model_type.startswith("qwen3"),
                   attention_bias=bool(getattr(config, "attention_bias", False)))

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def projections(self) -> dict[str, tuple[int, int]]:
        """(in, out) features of each projection of one decoder layer, by its usual module name."""
        h, i = self.hidden, self.intermediate
        return {"q_proj": (h, self.q_dim), "k_proj": (h, self.kv_dim), "v_proj": (h, self.kv_dim),
                "o_proj": (self.q_dim, h), "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h)}

    def base_parameters(self) -> int:
        per_layer = sum(a * b for a, b in self.projections().values()) + 2 * self.hidden
        if self.attention_bias:
            per_layer += self.q_dim + 2 * self.kv_dim
        if self.qk_norm:
            per_layer += 2 * self.head_dim
        embeddings = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        return self.layers * per_layer + embeddings + self.hidden

    def adapted_layers(self, top_layers: int | None) -> int:
        """Decoder layers a LoRA with `LoraSpec.top_layers` spans (None: all)."""
        return self.layers if top_layers is None else min(top_layers, self.layers)

    def lora_parameters(self, rank: int, targets: list[str], top_layers: int | None = None) -> int:
        shapes = self.projections()
        unknown = sorted(set(targets) - set(shapes))
        if unknown:
            raise ValueError(f"LoRA target modules {unknown}: the memory estimate knows {sorted(shapes)}")
        return self.adapted_layers(top_layers) * sum(rank * (shapes[t][0] + shapes[t][1]) for t in targets)


def model_dims(cfg: CoplayConfig) -> ModelDims:
    """The base model's dimensions from its `config.json` (the tiny model is built first if needed)."""
    from transformers import AutoConfig

    from coplay.models.loading import resolve_model_path

    config = AutoConfig.from_pretrained(resolve_model_path(cfg.model),
                                        trust_remote_code=cfg.model.trust_remote_code)
    return ModelDims.from_hf_config(getattr(config, "text_config", None) or config)


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per learner rank, by part."""

    base_weights: int
    lora_weights: int
    lora_gradients: int
    optimizer_state: int
    activations: int
    seq_len: int
    micro_batch: int

    @property
    def total(self) -> int:
        return (self.base_weights + self.lora_weights + self.lora_gradients + self.optimizer_state
                + self.activations)

    def describe(self) -> str:
        parts = ", ".join(f"{name.replace('_', ' ')} {getattr(self, name) / GIB:.2f}"
                          for name in ("base_weights", "lora_weights", "lora_gradients", "optimizer_state",
                                       "activations"))
        return (f"learner memory per rank ~{self.total / GIB:.2f} GiB ({parts} GiB; micro-batch "
                f"{self.micro_batch} x {self.seq_len} tokens)")


def estimate_memory(cfg: CoplayConfig, dims: ModelDims, world_size: int, on_gpu: bool) -> MemoryEstimate:
    """The per-rank estimate of the module docstring for `cfg` on `world_size` ranks."""
    learner = cfg.learner
    bf16 = learner.bf16 if learner.bf16 is not None else on_gpu
    if bf16 and not on_gpu:  # the learner runs emulated bfloat16 as float32 (`coplay.models.precision`)
        from coplay.models.precision import cpu_dtype

        bf16 = cpu_dtype("bfloat16", cfg.model.cpu_bf16, "learner.bf16") == "bfloat16"
    weight_bytes = 2 if bf16 else 4
    zero = learner.backend == "deepspeed"
    specs = [cfg.adapters[a] for a in cfg.active_adapters]
    lora = sum(dims.lora_parameters(spec.r, list(spec.target_modules), spec.top_layers) for spec in specs)
    shard = world_size if zero else 1
    lora_weights = lora * weight_bytes // (shard if zero and learner.zero_stage == 3 else 1)
    gradients = lora * weight_bytes // shard
    optimizer = lora * (ADAM_MOMENT_BYTES + (MASTER_BYTES if bf16 and zero else 0)) // shard
    if zero and learner.offload_optimizer:
        optimizer = 0
    seq = learner.max_seq_len or cfg.engine.max_model_len
    tokens = learner.micro_batch_size * seq
    ranks = max(spec.r for spec in specs) * len(dims.projections())
    per_layer = 4 * dims.hidden + 4 * dims.q_dim + 3 * dims.kv_dim + 4 * dims.intermediate + ranks
    # no gradient flows below the lowest adapted layer, so only the layers from there up keep activations
    spanned = max(dims.adapted_layers(spec.top_layers) for spec in specs)
    layers = (spanned * dims.hidden + per_layer) if learner.gradient_checkpointing else spanned * per_layer
    logits = learner.micro_batch_size * max(cfg.sampling.max_tokens.values()) * dims.vocab * 4 * 4
    return MemoryEstimate(base_weights=dims.base_parameters() * weight_bytes, lora_weights=lora_weights,
                          lora_gradients=gradients, optimizer_state=optimizer,
                          activations=tokens * layers * weight_bytes + logits, seq_len=seq,
                          micro_batch=learner.micro_batch_size)


def device_memory(device: str) -> int:
    """Total memory of a GPU; on CPU the host memory available now (ranks and workers share it)."""
    import torch

    if device.startswith("cuda"):
        return int(torch.cuda.get_device_properties(torch.device(device)).total_memory)
    import psutil

    return int(psutil.virtual_memory().available)


def check_memory(estimate: MemoryEstimate, budget: int, source: str) -> None:
    """Refuse an estimate over the budget, in one line naming what shrinks it."""
    if estimate.total > budget:
        raise LearnerMemoryError(
            f"{estimate.describe()} exceeds {source} {budget / GIB:.2f} GiB; shrink it with "
            f"learner.gradient_checkpointing=true, a smaller learner.micro_batch_size or "
            f"learner.max_seq_len, more learner.ranks with learner.zero_stage=3, or "
            f"learner.offload_optimizer=true")


def check_learner_memory(cfg: CoplayConfig, world_size: int, device: str) -> MemoryEstimate:
    """Estimate this rank's memory, print it, and refuse it when over budget (`learner.memory_budget_gib`,
    else the device's memory)."""
    estimate = estimate_memory(cfg, model_dims(cfg), world_size, device.startswith("cuda"))
    if cfg.learner.memory_budget_gib is not None:
        budget, source = int(cfg.learner.memory_budget_gib * GIB), "learner.memory_budget_gib"
    else:
        budget, source = device_memory(device), f"the memory of {device}"
    print(f"coplay: {estimate.describe()}; budget {budget / GIB:.2f} GiB ({source})", flush=True)
    check_memory(estimate, budget, source)
    return estimate


def eval_mode(policy: Any, checkpointing: bool) -> None:
    """`policy.eval()`; with checkpointing, the decoder layers' own flags back on (module docstring)."""
    policy.eval()
    if checkpointing:
        from transformers.modeling_layers import GradientCheckpointingLayer

        for module in policy.modules():
            if isinstance(module, GradientCheckpointingLayer):
                module.training = True


def enable_checkpointing(policy: Any) -> None:
    """Turn on transformers' gradient checkpointing of every decoder layer (non-reentrant, so frozen layers
    and LoRA layers recompute alike)."""
    base = policy.get_base_model() if hasattr(policy, "get_base_model") else policy
    base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
