"""The GRPO loss on the exact sampled tokens (docs/rewards.md), as short pure functions over tensors.

Per completion token t of sequence i (log-probs taken at the sampling temperature):

    ratio_it   = exp(logp_it - logp_behaviour_it)                      π_θ / π_behaviour
    pg_it      = -min(ratio_it * A_i, clip(ratio_it, 1 - eps_low, 1 + eps_high) * A_i)
    kl_it      = exp(logp_ref_it - logp_it) - (logp_ref_it - logp_it) - 1
                                                                       k3 estimator of KL(π_θ || π_ref)
    loss_it    = pg_it + beta * kl_it                                 π_ref = the base model, adapter disabled

Aggregation over the batch, written as per-token weights w_it so that micro-batches and ranks add up to the
same number as one big batch (N sequences, L_i completion tokens in sequence i):

    token-mean               w_it = 1 / sum_i L_i                    loss = sum_it w_it * loss_it
    seq-mean-token-mean      w_it = 1 / (N * L_i)
    seq-mean-token-sum-norm  w_it = 1 / (N * token_norm)             token_norm: a constant (Dr. GRPO), e.g.
                                                                     the adapter's max completion tokens
Imports torch only.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")


def aggregation_weights(lengths: list[int], mode: str, token_norm: int | None = None) -> list[float]:
    """Per-sequence token weight w_i (every token of sequence i gets w_i) for the whole batch."""
    if mode not in AGGREGATIONS:
        raise ValueError(f"loss aggregation {mode!r}: expected one of {AGGREGATIONS}")
    n = len(lengths)
    if n == 0:
        return []
    if mode == "token-mean":
        total = sum(lengths)
        return [1.0 / total if total else 0.0] * n
    if mode == "seq-mean-token-mean":
        return [1.0 / (n * length) if length else 0.0 for length in lengths]
    if token_norm is None or token_norm <= 0:
        raise ValueError(f"seq-mean-token-sum-norm needs a positive token_norm, got {token_norm}")
    return [1.0 / (n * token_norm)] * n


@dataclass
class LossParts:
    """The loss and what to log about it (all weighted like the loss)."""

    loss: torch.Tensor
    pg_loss: torch.Tensor
    kl: torch.Tensor
    clip_fraction: torch.Tensor  # weighted share of tokens where the clipped term was the active one
    ratio_mean: torch.Tensor


def grpo_loss(
    logprobs: torch.Tensor,
    behaviour_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
    beta: float = 0.0,
    ref_logprobs: torch.Tensor | None = None,
    loss_agg: str = "token-mean",
    token_weights: torch.Tensor | None = None,
    token_norm: int | None = None,
) -> LossParts:
    """GRPO loss of a [B, T] batch of completion tokens (formulas in the module docstring).

    `advantages` is [B] (one per sequence); `mask` [B, T] is 1 on real completion tokens. `token_weights`
    [B] overrides the aggregation weights (the learner passes weights computed over the whole batch so that
    micro-batches sum to the full-batch loss); without it they come from this batch with `loss_agg`.
    """
    mask = mask.to(logprobs.dtype)
    if token_weights is None:
        lengths = [int(n) for n in mask.sum(dim=1).tolist()]
        token_weights = torch.tensor(aggregation_weights(lengths, loss_agg, token_norm), dtype=logprobs.dtype)
    weights = token_weights.to(logprobs.device, logprobs.dtype)[:, None] * mask
    log_ratio = torch.where(mask > 0, logprobs - behaviour_logprobs, torch.zeros_like(logprobs))
    ratio = torch.exp(log_ratio)
    adv = advantages.to(logprobs.device, logprobs.dtype)[:, None]
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * adv
    pg = -torch.minimum(unclipped, clipped)
    if beta > 0.0:
        if ref_logprobs is None:
            raise ValueError("beta > 0 needs ref_logprobs (the base model's log-probs, adapter disabled)")
        delta = torch.where(mask > 0, ref_logprobs - logprobs, torch.zeros_like(logprobs))
        kl = torch.exp(delta) - delta - 1.0
    else:
        kl = torch.zeros_like(logprobs)
    per_token = pg + beta * kl
    with torch.no_grad():
        clip_frac = ((clipped < unclipped).to(logprobs.dtype) * weights).sum()
        ratio_mean = (ratio * weights).sum()
    return LossParts(
        loss=(per_token * weights).sum(),
        pg_loss=(pg * weights).sum().detach(),
        kl=(kl * weights).sum().detach(),
        clip_fraction=clip_frac,
        ratio_mean=ratio_mean,
    )
