"""The multi-adapter GRPO learner: one frozen base model, the five LoRA adapters resident, one update per
learner step for every adapter that had samples (docs/rewards.md), on plain torch or DeepSpeed ZeRO-2 /
ZeRO-3.

Why an idle adapter stays bit-identical, optimizer moments included, under every backend
-----------------------------------------------------------------------------------------
DeepSpeed ZeRO flattens the parameters of each optimizer param group into one buffer, partitions it over the
ranks and runs the optimizer on the flat fp32 partition; the AdamW moments live on that flat buffer. With all
five adapters in one engine, an idle adapter would still see the optimizer step (Adam decays its moments and
moves its weights even with a zero gradient, and the shared step counter advances), and undoing that means
snapshot/restore through `safe_get/set_full_*` for every tensor, every step.

So the learner builds **one trainer per adapter** (`backends.py`): under DeepSpeed, one engine per adapter,
each over an `AdapterModule` whose only registered submodules are that adapter's `lora_A` / `lora_B`
layers, with its own AdamW, learning rate (`LearnerConfig.adapter_lr`, else `lr`), gradient clipping and
flat buffers. A learner step runs forward/backward/step only on the engines of adapters with samples; an
idle adapter's engine, flat partitions, fp32 master copy and optimizer state are never touched by any call,
so they stay bit-identical by construction (the tests check it under torch, ZeRO-2 and ZeRO-3). Clipping is
per adapter (the global norm of that adapter's gradient), so adapters never influence each other.

ZeRO-3 and the frozen base: an engine partitions and hooks only the parameters of the module it is given.
The base model is owned by no engine: it stays an ordinary, replicated, frozen module on every rank (as in
LoRA actors under ZeRO-3 in OpenRLHF, the base gets no optimizer state and no gradients; here it is not
sharded either — ZeRO-3 shards the adapters' parameters, gradients and moments). The engine's forward runs
the whole PEFT model with its adapter selected; ZeRO-3's pre-forward hooks on the adapter's LoRA layers
gather their partitioned weights when PEFT calls them, and release them afterwards. The KL reference is
the base model with adapters disabled, where no LoRA layer runs. Keeping every LoRA parameter
`requires_grad=True` matters: ZeRO registers its gradient hooks only on such parameters, so adapters are
selected with `logprobs.select_adapter`, not PEFT's freezing `set_adapter`.

Micro-batches: every rank takes items i ≡ rank (mod world) of the step's batch, loss weights are computed
over the whole batch (`grpo.aggregation_weights`), every rank runs the same number of micro-batches (padding
with zero-weight items), and gradients are summed over ranks — so N ranks compute the single-rank update.
GRPO runs with dropout off (`eval()` mode): at the first epoch the learner's distribution is the one that
sampled, and ratio = 1 exactly. An epoch is one optimizer update per active adapter over all its samples.

Imports torch, transformers and peft (and deepspeed, in the DeepSpeed backend) lazily through `coplay.models`.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from coplay.config import LearnerConfig, LoraSpec, ModelConfig, SamplingConfig, active_adapters
from coplay.learn.backends import DeepSpeedAdapterTrainer, TorchAdapterTrainer
from coplay.learn.batching import (
    MicroBatch,
    TrainItem,
    items_from_samples,
    mini_batch_items,
    order_for_sharing,
    rank_micro_batches,
    set_weights,
    share_prefixes,
    sharing_micro_batches,
    to_micro_batch,
)
from coplay.learn.distributed import all_reduce_sum, ensure_process_group
from coplay.learn.grpo import grpo_loss
from coplay.learn.logprobs import adapter_context, batch_logprobs, completion_distributions, select_adapter
from coplay.learn.memory import enable_checkpointing, eval_mode
from coplay.learn.trunk import PrefixStore, lowest_adapted_layer
from coplay.learn.update_size import UpdateSize, as_served, token_kl, weight_change
from coplay.types import AdapterVersion, Sample

if TYPE_CHECKING:
    from coplay.artifacts.bundle import AdapterBundle

METRIC_KEYS = ("loss", "pg_loss", "kl", "clip_fraction", "ratio_mean")
# reference: the KL reference's forward (kl_beta > 0); forward includes the loss; optimizer includes clipping
STEP_TIMINGS = ("reference_s", "forward_s", "backward_s", "optimizer_s")


@dataclass
class StepMetrics:
    """What one learner step did, per adapter (losses of the last epoch, summed over ranks)."""

    learner_step: int
    adapters: dict[str, dict[str, float]] = field(default_factory=dict)
    trained_tokens: int = 0
    # seconds of the step's parts on this rank (`STEP_TIMINGS`; the run's phase timeline shows them)
    seconds: dict[str, float] = field(default_factory=dict)


class Learner:
    """One frozen base + the five adapters, trained with GRPO (module docstring: design and guarantees).

    Every rank of the default torch.distributed group (joined or created here) builds one; `cfg.ranks` is
    for launchers, the world size is the group's. The base runs in bfloat16 when `cfg.bf16` (default: on
    GPU), else float32, whatever `model_cfg.dtype` says. `max_tokens` per adapter is the constant of the
    `seq-mean-token-sum-norm` aggregation (default: `SamplingConfig().max_tokens`). `deepspeed_overrides`
    are merged into each engine's DeepSpeed config. The learning rate is constant per adapter.
    """

    def __init__(
        self,
        model_cfg: ModelConfig,
        adapter_specs: dict[str, LoraSpec],
        cfg: LearnerConfig,
        max_tokens: dict[str, int] | None = None,
        seed: int = 0,
        adapter_names: tuple[str, ...] = active_adapters(False),  # cfg.active_adapters in a run
        deepspeed_overrides: dict[str, Any] | None = None,
    ):
        from coplay.models.loading import load_base_model, resolve_model_path
        from coplay.models.lora import attach_adapters

        self.cfg = cfg
        self.device = self._device()
        self.rank, self.world_size = ensure_process_group()
        self.bf16 = cfg.bf16 if cfg.bf16 is not None else self.device.startswith("cuda")
        if self.bf16 and self.device == "cpu":  # emulated bfloat16 on this CPU: float32 unless `keep`
            from coplay.models.precision import cpu_dtype

            self.bf16 = cpu_dtype("bfloat16", model_cfg.cpu_bf16, "learner.bf16") == "bfloat16"
        model_cfg = model_cfg.model_copy(update={"dtype": "bfloat16" if self.bf16 else "float32"})
        base, self.tokenizer = load_base_model(model_cfg, self.device)
        self.base_model = resolve_model_path(model_cfg)  # what every exported adapter config names
        torch.manual_seed(seed)  # identical fresh adapters on every rank
        self.policy = attach_adapters(base, adapter_specs, adapter_names)
        if cfg.gradient_checkpointing:
            enable_checkpointing(self.policy)
        self.eval_mode()
        select_adapter(self.policy, adapter_names[0])  # every LoRA tensor requires grad (see docstring)
        self.adapter_names = adapter_names
        self.adapter_specs = {a: adapter_specs[a] for a in adapter_names}
        self.max_tokens = dict(max_tokens if max_tokens is not None else SamplingConfig().max_tokens)
        self.pad_id = int(self.tokenizer.pad_token_id or 0)
        self._masks: Any = None  # TokenMasks, built on the first constrained batch
        self.trainers = {a: self._make_trainer(a, deepspeed_overrides or {}) for a in adapter_names}
        self.eval_mode()
        self.learner_step = 0
        self.versions = dict.fromkeys(adapter_names, 0)
        self.updates = dict.fromkeys(adapter_names, 0)  # optimizer updates per adapter (the schedule's clock)
        self.changed: list[str] = []  # adapters the last step updated (what `publish` exports)
        self._exports: dict[str, dict[int, dict[str, torch.Tensor]]] = {}  # adapter -> version -> master
        self.step_seconds = dict.fromkeys(STEP_TIMINGS, 0.0)  # the running step's parts (`StepMetrics`)

    def _device(self) -> str:
        if torch.cuda.is_available():
            import os

            local = int(os.environ.get("LOCAL_RANK", "0"))
            torch.cuda.set_device(local)
            return f"cuda:{local}"
        return "cpu"

    def eval_mode(self) -> None:
        """Dropout off (GRPO's first-epoch ratios are exactly 1); decoder layers still checkpoint when
        `cfg.gradient_checkpointing` (`coplay.learn.memory.eval_mode`)."""
        eval_mode(self.policy, self.cfg.gradient_checkpointing)

    def lr_of(self, adapter: str) -> float:
        return self.cfg.adapter_lr.get(adapter, self.cfg.lr)

    def _make_trainer(self, adapter: str, overrides: dict[str, Any]) -> Any:
        lr = self.lr_of(adapter)
        if self.cfg.backend == "torch":
            return TorchAdapterTrainer(self.policy, adapter, lr, self.cfg.grad_clip, self.world_size,
                                       self.cfg.frozen_trunk)
        return DeepSpeedAdapterTrainer(self.policy, adapter, lr, self.cfg.grad_clip, self.world_size,
                                       self.cfg.zero_stage, self.cfg.offload_optimizer, self.bf16, overrides,
                                       self.cfg.frozen_trunk)

    # ------------------------------------------------------------------ training
    def train_step(self, samples: list[Sample], advantages: dict[str, float]) -> StepMetrics:
        """One learner step over every adapter that has samples; idle adapters are not touched."""
        started, self.step_seconds = self._now(), dict.fromkeys(STEP_TIMINGS, 0.0)
        by_adapter: dict[str, list[Sample]] = defaultdict(list)
        if len({s.sample_id for s in samples}) != len(samples):
            raise ValueError("samples of one learner step need distinct sample ids "
                             "(advantages are keyed by them)")
        for s in samples:
            if s.adapter not in self.trainers:
                raise ValueError(f"sample {s.sample_id!r}: unknown adapter {s.adapter!r}; "
                                 f"expected {self.adapter_names}")
            by_adapter[s.adapter].append(s)
        plans: dict[str, list[list[MicroBatch]]] = {}  # adapter -> mini-batches -> this rank's micro-batches
        scored: list[str] = []  # adapters with on-policy samples (every rank's, so all ranks agree)
        n_tokens = 0
        for adapter in self.adapter_names:
            on_policy = self.versions[adapter] if self.cfg.old_logprobs == "learner" else None
            items = items_from_samples(by_adapter.get(adapter, []), advantages, on_policy)
            if not items:
                continue
            n_tokens += sum(len(i.completion_ids) for i in items)
            if any(i.on_policy for i in items):
                scored.append(adapter)
            plans[adapter], store = [], PrefixStore()  # one store: mini-batches reuse a common prefix's trunk
            for mini in mini_batch_items(items, self.cfg.mini_batches):
                set_weights(mini, self.cfg.loss_agg, self.max_tokens.get(adapter))  # each normalised alone
                plans[adapter].append(self._plan(mini, store))
        metrics = StepMetrics(learner_step=self.learner_step + 1, trained_tokens=n_tokens)
        self.eval_mode()
        for adapter in scored:  # the first mini-batch's own first forward precedes any update
            self._score_on_policy(adapter, [mb for mini in plans[adapter][1:] for mb in mini])
        for epoch in range(self.cfg.epochs):
            for adapter, minis in plans.items():
                parts = [self._train_adapter(adapter, micro_batches) for micro_batches in minis]
                if epoch == self.cfg.epochs - 1:  # the mean over the epoch's updates
                    metrics.adapters[adapter] = {k: sum(p[k] for p in parts) / len(parts) for k in parts[0]}
        for adapter in plans:
            self.versions[adapter] += 1
            metrics.adapters[adapter]["samples"] = float(len(by_adapter[adapter]))
            metrics.adapters[adapter]["updates"] = float(self.cfg.epochs * len(plans[adapter]))
        self.changed = list(plans)
        self.learner_step += 1
        metrics.seconds = {**self.step_seconds, "step_s": self._now() - started}
        return metrics

    def _now(self) -> float:
        """The clock of the step's timings; on a GPU it waits for the queued kernels first, else a part's
        seconds would be those of launching its kernels, not of running them."""
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        return time.perf_counter()

    def export(self, adapters: list[str]) -> dict[str, AdapterBundle]:
        """The bundles of the given adapters at their current weights (`coplay.artifacts.bundle`): the
        optimizer's float32 master, whatever dtype the module computes in, so no update is rounded away
        before it is served. Every rank calls (under ZeRO-3 the weights are gathered collectively); rank 0
        gets them, the others {}. The last two exported versions stay here for `measure_update`."""
        from coplay.artifacts.bundle import export_bundle

        out = {}
        for adapter in adapters:
            master = self.trainers[adapter].master_weights()
            history = self._exports.setdefault(adapter, {})
            history[self.versions[adapter]] = master
            for old in sorted(history)[:-2]:
                del history[old]
            with self.trainers[adapter].gathered():
                if self.rank == 0:
                    out[adapter] = export_bundle(self.policy, adapter, self.base_model, master)
        return out

    def measure_update(self, adapters: list[str], prompts: dict[str, list[Sample]],
                       serving: torch.dtype, max_prompts: int = 8) -> dict[str, UpdateSize]:
        """How far the newest exported version of each adapter moved from the one before, as served in
        `serving` (`coplay.learn.update_size`): weight change, share of elements changed, and the mean
        per-token KL(π_prev ‖ π_new) over the first `max_prompts` of `prompts[adapter]` (Samples: prompt and
        completion tokens, temperature). Adapters without both versions exported here (e.g. just after a
        resume) are left out. Every rank calls (the forwards are collective under ZeRO-3)."""
        out = {}
        for adapter in adapters:
            history = self._exports.get(adapter, {})
            version = self.versions[adapter]
            if version not in history or version - 1 not in history:
                continue
            prev, new = history[version - 1], history[version]
            served_prev, served_new = as_served(prev, serving), as_served(new, serving)
            rel, share = weight_change(served_prev, served_new)
            rel_exported, _ = weight_change(prev, new)
            chosen = [s for s in prompts.get(adapter, []) if s.completion_ids][:max_prompts]
            kl = self._served_kl(adapter, served_prev, served_new, new, chosen) if chosen else None
            out[adapter] = UpdateSize(
                version=version, serving_dtype=str(serving).removeprefix("torch."), rel_change=rel,
                changed_share=share, rel_change_exported=rel_exported,
                kl=None if kl is None else float(kl.mean()) if kl.numel() else 0.0,
                kl_max=None if kl is None else float(kl.max()) if kl.numel() else 0.0,
                kl_tokens=0 if kl is None else int(kl.numel()), kl_prompts=len(chosen))
        return out

    def _served_kl(self, adapter: str, served_prev: dict[str, torch.Tensor],
                   served_new: dict[str, torch.Tensor], master: dict[str, torch.Tensor],
                   samples: list[Sample]) -> torch.Tensor:
        """Per-token KL(prev ‖ new) of the two served weight sets on `samples`; the adapter's own weights are
        put back (`master`, cast to the module's dtype exactly as the optimizer writes them) afterwards."""
        trainer = self.trainers[adapter]
        items = [TrainItem(list(s.prompt_ids), list(s.completion_ids), list(s.logprobs),
                           float(s.temperature) if s.temperature > 0 else 1.0, 0.0,
                           regex=s.meta.get("regex") or None) for s in samples]
        batches = [to_micro_batch([item], self.pad_id, self._token_masks([item])) for item in items]
        dists: dict[str, list[torch.Tensor]] = {}
        self.eval_mode()
        try:
            with torch.no_grad():
                for label, weights in (("prev", served_prev), ("new", served_new)):
                    trainer.load_weights(weights)
                    select_adapter(self.policy, adapter)
                    dists[label] = [completion_distributions(self.policy, mb.tokens, mb.temperatures).cpu()
                                    for mb in batches]
        finally:
            trainer.load_weights(master)
        return torch.cat([token_kl(p, n, mb.tokens.completion_mask) for p, n, mb in
                          zip(dists["prev"], dists["new"], batches, strict=True)])

    def publish(self, adapters_root: str | Path) -> list[AdapterVersion]:
        """Publish the adapters the last step changed as new version folders `<root>/<adapter>/v<n>/` with
        their manifest, the same bytes a run's ArtifactStore writes (every rank calls; rank 0 writes)."""
        from coplay.artifacts.manifest import write_adapter_version

        return [write_adapter_version(Path(adapters_root) / adapter / f"v{self.versions[adapter]}", bundle,
                                      adapter, self.versions[adapter], self.learner_step)
                for adapter, bundle in self.export(self.changed).items()]

    def save_checkpoint(self, ckpt_dir: str | Path, bank_version: Any = None,
                        data_cursor: Any = None) -> Path:
        """Atomic, exact checkpoint (see `checkpoint.py`); every rank calls."""
        from coplay.learn.checkpoint import save_checkpoint

        return save_checkpoint(self, ckpt_dir, bank_version, data_cursor)

    def load_checkpoint(self, ckpt_dir: str | Path) -> Any:
        """Resume exactly from `ckpt_dir`; returns its `ResumeState` (bank version, data cursor)."""
        from coplay.learn.checkpoint import load_checkpoint

        return load_checkpoint(self, ckpt_dir)

    def _plan(self, items: list[TrainItem], store: PrefixStore) -> list[MicroBatch]:
        share = self.cfg.share_prefix and not self.cfg.gradient_checkpointing  # see LearnerConfig
        if share:
            items = order_for_sharing(items)
        cut = sharing_micro_batches if share else rank_micro_batches
        chunks = cut(items, self.rank, self.world_size, self.cfg.micro_batch_size)
        masks = self._token_masks(items)
        batches = [to_micro_batch(chunk, self.pad_id, masks) for chunk in chunks]
        if share:
            share_prefixes(batches, items, self.world_size, store)
        if self.cfg.kl_beta > 0:
            depth = lowest_adapted_layer(self.policy, None) if self.cfg.frozen_trunk else None
            started = self._now()
            with torch.no_grad(), adapter_context(self.policy, None):
                for mb in batches:
                    mb.ref_logprobs = batch_logprobs(self.policy, mb.tokens, mb.temperatures, depth).cpu()
            self._lap("reference_s", started)
        return batches

    def _lap(self, part: str, since: float) -> float:
        """Add the seconds since `since` to the running step's `part`; returns now (the next part's start)."""
        now = self._now()
        self.step_seconds[part] = self.step_seconds.get(part, 0.0) + now - since
        return now

    def _token_masks(self, items: list[TrainItem]) -> Any:
        """The engine's constraint masks, rebuilt here, when any item was sampled under one (constrained
        Diplomacy orders, constrained actions); None otherwise."""
        if not any(i.regex for i in items):
            return None
        from coplay.engines.token_masks import TokenMasks

        if self._masks is None:
            vocab = int(self.policy.config.vocab_size)  # ZeRO-3 partitions the weights themselves
            self._masks = TokenMasks(self.tokenizer, vocab)
        return self._masks

    def _score_on_policy(self, adapter: str, micro_batches: list[MicroBatch]) -> None:
        """The old policy's log-probs of the on-policy rows of `micro_batches` (the mini-batches after the
        first), computed without autograd before the step's first update: they are first seen after an
        update, and their own first forward would score them with the new policy. Every micro-batch runs its
        forward, on-policy rows or not: under ZeRO-3 the ranks' forwards must pair up. Counted in
        `forward_s`."""
        if not micro_batches:
            return
        started = self._now()
        with torch.no_grad():
            for mb in micro_batches:
                logprobs = self.trainers[adapter].forward(mb.tokens, mb.temperatures)
                if mb.on_policy is not None and bool(mb.on_policy.any()):
                    self._keep_old_logprobs(mb, logprobs)
        self._lap("forward_s", started)

    @staticmethod
    def _keep_old_logprobs(mb: MicroBatch, logprobs: torch.Tensor) -> None:
        own = logprobs.detach().to("cpu", torch.float32)
        mb.behaviour_logprobs = torch.where(mb.on_policy[:, None], own, mb.behaviour_logprobs)
        mb.on_policy = None

    def _train_adapter(self, adapter: str, micro_batches: list[MicroBatch]) -> dict[str, float]:
        """One optimizer update of `adapter` over `micro_batches` (one mini-batch, gradients accumulated)."""
        trainer = self.trainers[adapter]
        sums = dict.fromkeys(METRIC_KEYS, 0.0)
        for k, mb in enumerate(micro_batches):
            started = self._now()
            logprobs = trainer.forward(mb.tokens, mb.temperatures)
            if mb.on_policy is not None and bool(mb.on_policy.any()):
                # the first forward of a step runs before this adapter's update: its log-probs are the old
                # policy's; later epochs keep them as the ratio's denominator
                self._keep_old_logprobs(mb, logprobs)
            parts = grpo_loss(
                logprobs,
                mb.behaviour_logprobs.to(logprobs.device),
                mb.advantages,
                mb.tokens.completion_mask.to(logprobs.device),
                eps_low=self.cfg.eps_low,
                eps_high=self.cfg.eps_high,
                beta=self.cfg.kl_beta,
                ref_logprobs=None if mb.ref_logprobs is None else mb.ref_logprobs.to(logprobs.device),
                token_weights=mb.weights,
            )
            started = self._lap("forward_s", started)
            trainer.backward(parts.loss, last=k == len(micro_batches) - 1)
            self._lap("backward_s", started)
            for key in METRIC_KEYS:
                sums[key] += float(getattr(parts, key).detach())
        started = self._now()
        grad_norm = trainer.step()
        self._lap("optimizer_s", started)
        self.updates[adapter] += 1
        reduced = all_reduce_sum([sums[k] for k in METRIC_KEYS])
        out = dict(zip(METRIC_KEYS, reduced, strict=True))
        out["grad_norm"] = grad_norm if math.isfinite(grad_norm) else float("nan")
        return out

    # ------------------------------------------------------------------ state
    def adapter_weights(self, adapter: str) -> dict[str, torch.Tensor]:
        """Full float32 weights of `adapter` by PEFT name (collective under ZeRO-3: call on every rank)."""
        return self.trainers[adapter].full_weights()

    def optimizer_state(self, adapter: str) -> dict[str, torch.Tensor]:
        """This rank's optimizer state of `adapter` (moments, step counts; DeepSpeed: its fp32 partition)."""
        return self.trainers[adapter].optimizer_state()

    def load_adapter_state(self, adapter: str, weights: dict[str, torch.Tensor],
                           optim: dict[str, torch.Tensor]) -> None:
        """Restore weights and this rank's optimizer state of `adapter` (collective under ZeRO-3)."""
        trainer = self.trainers[adapter]
        trainer.load_weights(weights)
        trainer.load_optimizer_state(optim)

    @property
    def backend_tag(self) -> str:
        """What must match for a checkpoint's optimizer state to load: backend, stage, world size."""
        if self.cfg.backend == "torch":
            return f"torch/world{self.world_size}"
        return (f"deepspeed-zero{self.cfg.zero_stage}{'-offload' if self.cfg.offload_optimizer else ''}"
                f"/world{self.world_size}")
