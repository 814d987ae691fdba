"""Per-adapter trainers: how one adapter's parameters get gradients reduced, clipped and stepped.

Every adapter has its own trainer object, owning only that adapter's LoRA parameters and its own optimizer
(see `learner.py` for why). Two backends with one interface:

- `TorchAdapterTrainer`: torch AdamW; on several ranks the gradients are summed with
  `distributed.all_reduce_` (on the backend's device).
- `DeepSpeedAdapterTrainer`: one DeepSpeed engine (ZeRO-2 or ZeRO-3, optional CPU optimizer offload, bf16
  on GPU) over an `AdapterModule` whose registered children are only this adapter's `lora_A` / `lora_B`
  layers; the engine's client optimizer is torch AdamW (no JIT-compiled op needed on CPU).

Losses passed to `backward` are this rank's share of a loss whose weights were computed over the whole
global batch, so gradients are *summed* over ranks (DeepSpeed averages: the loss is scaled by the world size).
Only this package imports deepspeed, and only inside `DeepSpeedAdapterTrainer`. With `frozen_trunk`, an
adapter's forward runs the decoder layers below its lowest LoRA layer without autograd
(`coplay.learn.trunk`; the same log-probs).
"""

from __future__ import annotations

import copy
from contextlib import nullcontext
from typing import Any

import torch

from coplay.learn.logprobs import TokenBatch, batch_logprobs, select_adapter
from coplay.learn.trunk import check_split_support, lowest_adapted_layer

ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8


def adapter_parameters(policy: Any, adapter: str) -> dict[str, torch.nn.Parameter]:
    """`adapter`'s LoRA parameters by their PEFT name, in model order."""
    marker = f".{adapter}."
    return {n: p for n, p in policy.named_parameters() if "lora_" in n and marker in n}


def _state_tensor(key: str, value: torch.Tensor) -> torch.Tensor:
    """A copy of one AdamW state entry for saving (the 0-d `step` becomes shape [1] for safetensors)."""
    value = value.detach().cpu().clone()
    return value.reshape(-1) if key == "step" else value


def _restore_adam_state(opt: torch.optim.Optimizer, param: torch.Tensor, state: dict[str, torch.Tensor],
                        tag: str) -> None:
    """Put AdamW's state for `param` back exactly as saved (absent `step/<tag>`: never stepped, no state)."""
    if f"step/{tag}" not in state:
        opt.state.pop(param, None)
        return
    for key in ("exp_avg", "exp_avg_sq"):
        if state[f"{key}/{tag}"].shape != param.shape:
            raise ValueError(f"optimizer state {key}/{tag}: shape {tuple(state[f'{key}/{tag}'].shape)}, "
                             f"parameter has {tuple(param.shape)}")
    opt.state[param] = {
        "step": state[f"step/{tag}"].reshape(()).clone(),
        "exp_avg": state[f"exp_avg/{tag}"].to(param.device).clone(),
        "exp_avg_sq": state[f"exp_avg_sq/{tag}"].to(param.device).clone(),
    }


class AdapterModule(torch.nn.Module):
    """A module whose parameters are exactly one adapter's LoRA layers; its forward runs the whole policy
    with that adapter selected. The policy is held as a plain attribute, not a submodule, so an engine over
    this module owns (partitions, hooks, casts) the adapter and nothing of the frozen base. `frozen_trunk`:
    the layers below the adapter's lowest LoRA layer run without autograd (`coplay.learn.trunk`)."""

    def __init__(self, policy: Any, adapter: str, frozen_trunk: bool = False):
        super().__init__()
        from peft.tuners.lora import LoraLayer

        layers = torch.nn.ModuleList()
        for module in policy.modules():
            if isinstance(module, LoraLayer) and adapter in module.lora_A:
                layers.append(module.lora_A[adapter])
                layers.append(module.lora_B[adapter])
        self.lora_layers = layers
        object.__setattr__(self, "policy", policy)
        self.adapter = adapter
        owned = {id(p) for p in self.parameters()}
        expected = adapter_parameters(policy, adapter)
        if owned != {id(p) for p in expected.values()}:
            raise ValueError(f"adapter {adapter!r}: only lora_A/lora_B layers are supported "
                             f"({len(owned)} owned vs {len(expected)} LoRA tensors)")
        if frozen_trunk:
            check_split_support(policy)
        self.trunk_depth = lowest_adapted_layer(policy, adapter) if frozen_trunk else None

    def forward(self, batch: TokenBatch, temperature: torch.Tensor) -> torch.Tensor:
        select_adapter(self.policy, self.adapter)
        return batch_logprobs(self.policy, batch, temperature, self.trunk_depth)


class TorchAdapterTrainer:
    """Plain torch: AdamW over one adapter, gradients summed over ranks, global-norm clipping."""

    def __init__(self, policy: Any, adapter: str, lr: float, grad_clip: float, world_size: int,
                 frozen_trunk: bool = False):
        self.module = AdapterModule(policy, adapter, frozen_trunk)
        self.adapter = adapter
        self.named_params = adapter_parameters(policy, adapter)
        self.grad_clip = grad_clip
        self.world_size = world_size
        self.optimizer = torch.optim.AdamW(list(self.named_params.values()), lr=lr, betas=ADAM_BETAS,
                                           eps=ADAM_EPS, weight_decay=0.0)

    def forward(self, batch: TokenBatch, temperature: torch.Tensor) -> torch.Tensor:
        return self.module(batch, temperature)

    def gathered(self, modify: bool = False) -> Any:
        """Parameters are always whole here."""
        return nullcontext()

    def backward(self, loss: torch.Tensor, last: bool) -> None:
        loss.backward()

    def step(self) -> float:
        params = list(self.named_params.values())
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        if self.world_size > 1:
            from coplay.learn.distributed import all_reduce_

            for p in params:
                all_reduce_(p.grad)
        norm = torch.nn.utils.clip_grad_norm_(params, self.grad_clip)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(norm)

    def full_weights(self) -> dict[str, torch.Tensor]:
        return {n: p.detach().float().cpu().clone() for n, p in self.named_params.items()}

    def master_weights(self) -> dict[str, torch.Tensor]:
        """The weights the optimizer steps, in float32 (here the parameters themselves: PEFT keeps LoRA
        tensors in float32 on a bfloat16 base)."""
        return self.full_weights()

    def load_weights(self, weights: dict[str, torch.Tensor]) -> None:
        with torch.no_grad():
            for n, p in self.named_params.items():
                p.copy_(weights[n].to(p.dtype))

    def optimizer_state(self) -> dict[str, torch.Tensor]:
        """This rank's optimizer state: `exp_avg/<param>`, `exp_avg_sq/<param>`, `step/<param>`."""
        out: dict[str, torch.Tensor] = {}
        for n, p in self.named_params.items():
            for key, value in self.optimizer.state.get(p, {}).items():
                out[f"{key}/{n}"] = _state_tensor(key, value)
        return out

    def load_optimizer_state(self, state: dict[str, torch.Tensor]) -> None:
        for n, p in self.named_params.items():
            _restore_adam_state(self.optimizer, p, state, n)

    def set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def reset_optimizer_state(self) -> None:
        """Forget the AdamW moments and step count (they re-initialise at the next step)."""
        self.optimizer.state.clear()


def deepspeed_config(stage: int, offload: bool, bf16: bool, grad_clip: float,
                     overrides: dict[str, Any]) -> dict[str, Any]:
    """The engine config of one adapter (gradient accumulation is driven by the learner per micro-batch)."""
    zero: dict[str, Any] = {"stage": stage, "overlap_comm": False, "contiguous_gradients": True}
    if offload:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": torch.cuda.is_available()}
    cfg: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": 1,
        "gradient_accumulation_steps": 1,
        "gradient_clipping": grad_clip,
        "zero_optimization": zero,
        "bf16": {"enabled": bf16},
        "zero_allow_untested_optimizer": True,
        "zero_force_ds_cpu_optimizer": False,
        "steps_per_print": 1 << 30,
        "wall_clock_breakdown": False,
    }
    merged = copy.deepcopy(cfg)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key].update(value)
        else:
            merged[key] = value
    return merged


def _skip_shm_comm_op() -> None:
    """Tell DeepSpeed not to build its shared-memory all-reduce op on CPU.

    DeepSpeed's torch comm backend JIT-compiles `deepspeed_shm_comm` (C++, through ninja, under a file lock in
    the torch extensions cache) the first time a process initializes it, although the op only serves
    DeepSpeed's inference all-reduce, which the learner never calls (its gradients go through gloo). Skipping
    it removes a compile of 25-70 s from every fresh machine's first learner start and the need for a C++
    compiler and Python headers there; a compile killed half-way would otherwise leave a stale lock that makes
    every later start wait for ever."""
    import deepspeed.ops

    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False


class DeepSpeedAdapterTrainer:
    """One DeepSpeed engine over one adapter (ZeRO-2 or ZeRO-3), stepped only when the adapter had samples."""

    def __init__(self, policy: Any, adapter: str, lr: float, grad_clip: float, world_size: int,
                 stage: int, offload: bool, bf16: bool, overrides: dict[str, Any],
                 frozen_trunk: bool = False):
        import deepspeed

        _skip_shm_comm_op()
        self.adapter = adapter
        self.world_size = world_size
        self.named_params = adapter_parameters(policy, adapter)
        module = AdapterModule(policy, adapter, frozen_trunk)
        optimizer = torch.optim.AdamW(list(module.parameters()), lr=lr, betas=ADAM_BETAS, eps=ADAM_EPS,
                                      weight_decay=0.0)
        self.config = deepspeed_config(stage, offload, bf16, grad_clip, overrides)
        linear = torch.nn.functional.linear
        try:
            self.engine, self.zero_optimizer, _, _ = deepspeed.initialize(
                model=module, optimizer=optimizer, config=self.config, dist_init_required=False
            )
        finally:
            # ZeRO-3's parameter conversion replaces torch.nn.functional.linear process-wide ("memory
            # efficient linear"); the base model and every other user of this process would then compute with
            # it. The adapters' weights are gathered by module hooks, so the original function is put back.
            torch.nn.functional.linear = linear
        self.stage = stage
        if getattr(self.zero_optimizer, "backup_optimizer", None) is not None:
            raise ValueError("ZeRO-3 sub-groups split between CPU and accelerator are not supported")

    @property
    def _basic_optimizer(self) -> torch.optim.Optimizer:
        return self.zero_optimizer.optimizer

    def _flat_partitions(self) -> list[torch.Tensor]:
        """This rank's fp32 master partitions, one flat tensor per (sub)group; AdamW state is keyed by
        them."""
        if self.stage == 3:
            return list(self.zero_optimizer.fp32_partitioned_groups_flat)
        return list(self.zero_optimizer.single_partition_of_fp32_groups)

    def forward(self, batch: TokenBatch, temperature: torch.Tensor) -> torch.Tensor:
        return self.engine(batch, temperature)

    def backward(self, loss: torch.Tensor, last: bool) -> None:
        self.engine.set_gradient_accumulation_boundary(last)
        self.engine.backward(loss * self.world_size, scale_wrt_gas=False)

    def step(self) -> float:
        self.engine.step()
        norm = self.engine.get_global_grad_norm()
        return float(norm) if norm is not None else 0.0

    def gathered(self, modify: bool = False) -> Any:
        """Context in which this adapter's parameters are whole on every rank (collective under ZeRO-3)."""
        import deepspeed

        params = list(self.named_params.values())
        return deepspeed.zero.GatheredParameters(params, modifier_rank=0 if modify else None)

    def full_weights(self) -> dict[str, torch.Tensor]:
        """The full (gathered) weights on every rank; a collective call under ZeRO-3."""
        with self.gathered():
            return {n: p.detach().float().cpu().clone() for n, p in self.named_params.items()}

    def master_weights(self) -> dict[str, torch.Tensor]:
        """The fp32 master copy the optimizer steps (`safe_get_full_fp32_param`; collective under ZeRO-3).
        Under bf16 the module's own parameters are the master rounded to bfloat16: an update smaller than
        bfloat16's spacing moves the master but not them, so exports read the master."""
        from deepspeed.utils import safe_get_full_fp32_param

        out = {}
        for n, p in self.named_params.items():
            master = safe_get_full_fp32_param(p)
            if master is None:
                raise RuntimeError(f"adapter {self.adapter!r}: DeepSpeed holds no fp32 master for {n}")
            out[n] = master.detach().float().cpu().clone()
        return out

    def load_weights(self, weights: dict[str, torch.Tensor]) -> None:
        """Set the engine's low-precision weights (every rank passes the same tensors; collective)."""
        with self.gathered(modify=True), torch.no_grad():
            for n, p in self.named_params.items():
                p.copy_(weights[n].to(p.dtype))

    def optimizer_state(self) -> dict[str, torch.Tensor]:
        """This rank's partition: fp32 master (`master/<g>`) and AdamW state (`<key>/<g>`) per flat group."""
        out: dict[str, torch.Tensor] = {}
        for g, flat in enumerate(self._flat_partitions()):
            out[f"master/{g}"] = flat.detach().cpu().clone()
            for key, value in self._basic_optimizer.state.get(flat, {}).items():
                out[f"{key}/{g}"] = _state_tensor(key, value)
        return out

    def load_optimizer_state(self, state: dict[str, torch.Tensor]) -> None:
        opt = self._basic_optimizer
        for g, flat in enumerate(self._flat_partitions()):
            master = state[f"master/{g}"]
            if master.shape != flat.shape:
                raise ValueError(f"adapter {self.adapter!r}: flat partition {g} has shape "
                                 f"{tuple(flat.shape)}, checkpoint has {tuple(master.shape)} "
                                 f"(another world size or ZeRO stage?)")
            with torch.no_grad():
                flat.copy_(master)
            _restore_adam_state(opt, flat, state, str(g))

    def set_lr(self, lr: float) -> None:
        for group in self._basic_optimizer.param_groups:
            group["lr"] = lr

    def reset_optimizer_state(self) -> None:
        """Forget the AdamW moments and step count (they re-initialise at the next step)."""
        self._basic_optimizer.state.clear()
