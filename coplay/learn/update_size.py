"""How far a learner step moved what the engines serve: the measure that says whether an update landed.

A GRPO step can be smaller than the precision the policy is served in. The learner keeps float32 master
weights, but an engine serving a bfloat16 model casts each LoRA tensor to bfloat16 (vLLM's `lora_dtype`
follows the model's dtype and offers no float32; benchmarks/adapter_precision.py), whose spacing near 1e-2
is about 6e-5: a relative change below 2^-9 per element rounds back to the old value. So every learner step
records, per adapter, three figures computed on the weights *as served*, i.e. the exported float32 weights
cast to the serving dtype:

- `rel_change`     ||W_new − W_prev||₂ / ||W_prev||₂ over all the adapter's LoRA tensors;
- `changed_share`  the share of elements whose served value changed;
- `kl`             mean over completion tokens of KL(π_prev ‖ π_new) = Σ_v π_prev(v) (log π_prev(v) −
                   log π_new(v)), the full next-token distributions at the sample's temperature, on fixed
                   prompts (the probe's `act` prompts, else the step's own first samples); `kl_max` the
                   largest per-token value.

`rel_change_exported` is the same ratio on the float32 export, to show what the cast removed. Pure torch
functions; the learner (`Learner.measure_update`) swaps the weights in and calls them. Never imports ray.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class UpdateSize:
    """What one learner step did to one adapter as served (module docstring)."""

    version: int
    serving_dtype: str
    rel_change: float
    changed_share: float
    rel_change_exported: float
    kl: float | None = None
    kl_max: float | None = None
    kl_tokens: int = 0
    kl_prompts: int = 0

    def as_dict(self) -> dict[str, float | int | str | None]:
        return asdict(self)


def serving_dtype(engine_dtype: str, device: str = "cpu") -> torch.dtype:
    """The dtype an engine serves LoRA weights in: the engine's model dtype (`auto`: float32 on CPU, as
    `coplay.models.loading` resolves it, bfloat16 on GPU)."""
    if engine_dtype == "auto":
        return torch.float32 if device == "cpu" else torch.bfloat16
    try:
        return DTYPES[engine_dtype]
    except KeyError:
        raise ValueError(f"engine dtype {engine_dtype!r}: expected one of {[*DTYPES, 'auto']}") from None


def as_served(weights: dict[str, torch.Tensor], dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The weights after the engine's cast to `dtype`, back in float32 (round to nearest even)."""
    return {k: v.detach().to(dtype).float() for k, v in weights.items()}


def weight_change(prev: dict[str, torch.Tensor], new: dict[str, torch.Tensor]) -> tuple[float, float]:
    """(‖new − prev‖₂ / ‖prev‖₂, share of elements that differ) over tensors with the same names. A zero
    `prev` (a fresh adapter's B is zero, but A is not) gives inf when anything moved."""
    if set(prev) != set(new):
        missing = sorted(set(prev) ^ set(new))[:3]
        raise ValueError(f"weight_change: the two versions hold different tensors (e.g. {missing})")
    diff_sq = prev_sq = 0.0
    changed = total = 0
    for name, before in prev.items():
        after = new[name].float()
        before = before.float()
        if after.shape != before.shape:
            raise ValueError(f"weight_change: {name} has shape {tuple(before.shape)} then "
                             f"{tuple(after.shape)}")
        delta = after - before
        diff_sq += float((delta.double() ** 2).sum())
        prev_sq += float((before.double() ** 2).sum())
        changed += int((delta != 0).sum())
        total += delta.numel()
    if prev_sq == 0.0:
        return (float("inf") if diff_sq > 0 else 0.0), changed / max(total, 1)
    return (diff_sq / prev_sq) ** 0.5, changed / max(total, 1)


def token_kl(logp_prev: torch.Tensor, logp_new: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-token KL(prev ‖ new) from [..., V] log-distributions; a flat tensor of the tokens where `mask`
    ([...], nonzero = a real completion token) holds. Tokens `prev` gives no mass (a constrained answer's
    masked logits: log-prob -inf in both) add nothing, rather than 0 · (−inf − −inf) = NaN."""
    p_prev = logp_prev.exp()
    gap = torch.where(p_prev > 0, logp_prev - logp_new, torch.zeros_like(logp_prev))
    kl = (p_prev * gap).sum(-1)
    return kl[mask.bool()].clamp_min(0.0)
