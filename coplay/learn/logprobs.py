"""The learner's log-probs of completion tokens at a sampling temperature, batched and padding-safe.

log π(c_j | prompt, c_<j) = log_softmax(logits / T)[c_j] — the same distribution an engine samples from at
temperature T (no top-p / top-k: behaviour log-probs are recorded on the full distribution); for a
constrained sample (`Sample.meta["regex"]`) the logits are first masked to the tokens its constraint allowed,
as the engine masked them (`coplay.engines.token_masks`). Sequences are
right-padded (a causal model's real tokens never see the padding after them) and only the logits of the
columns that hold completion tokens are computed (`logits_to_keep`), so a large vocabulary costs
B x (completion columns) x V, not B x (whole sequence) x V.

With a trunk depth or a shared prefix (`TokenBatch.prefix_len`), the learner takes the split forward of
`coplay.learn.trunk` instead (same log-probs to float32 rounding; the frozen layers without autograd, the
prefix once per micro-batch). `completion_logprobs` is the entry point the engines' parity test uses.
Imports torch only (the model is passed in).
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from coplay.engines.token_masks import mask_logits
from coplay.learn.trunk import PrefixStore, split_completion_logits


@dataclass
class TokenBatch:
    """A right-padded batch of prompt + completion sequences."""

    input_ids: torch.Tensor  # [B, S]
    attention_mask: torch.Tensor  # [B, S]
    completion_mask: torch.Tensor  # [B, C] 1 on real completion tokens
    completion_ids: torch.Tensor  # [B, C] (0 where padded)
    first_column: int  # logits column of the first kept position
    prompt_lens: list[int]
    completion_lens: list[int]
    bitmask: torch.Tensor | None = None  # [B, C, words] int32 constraint masks (-1: unconstrained), or None
    prefix_len: int = 0  # leading tokens every row shares, computed once (`coplay.learn.trunk`); 0: none
    prefix_store: PrefixStore | None = None  # the step's trunk states of shared prefixes, reused
    prefix_base: int = 0  # the step's common prefix (<= prefix_len) whose trunk states the store keeps


def make_token_batch(prompt_ids: list[list[int]], completion_ids: list[list[int]],
                     pad_id: int = 0) -> TokenBatch:
    """Right-pad prompt + completion pairs; completion token j of row i sits at column prompt_len_i + j."""
    if len(prompt_ids) != len(completion_ids):
        raise ValueError(f"{len(prompt_ids)} prompts but {len(completion_ids)} completions")
    if any(len(p) == 0 for p in prompt_ids):
        raise ValueError("every prompt needs at least one token "
                         "(the first completion token is predicted from it)")
    p_lens = [len(p) for p in prompt_ids]
    c_lens = [len(c) for c in completion_ids]
    seq_len = max(p + c for p, c in zip(p_lens, c_lens, strict=True))
    batch = len(prompt_ids)
    input_ids = torch.full((batch, seq_len), pad_id, dtype=torch.long)
    attention = torch.zeros((batch, seq_len), dtype=torch.long)
    for i, (p, c) in enumerate(zip(prompt_ids, completion_ids, strict=True)):
        row = list(p) + list(c)
        input_ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        attention[i, : len(row)] = 1
    first = min(p_lens) - 1
    c_max = max(c_lens) if c_lens else 0
    comp_ids = torch.zeros((batch, max(c_max, 1)), dtype=torch.long)
    comp_mask = torch.zeros((batch, max(c_max, 1)), dtype=torch.long)
    for i, c in enumerate(completion_ids):
        if c:
            comp_ids[i, : len(c)] = torch.tensor(c, dtype=torch.long)
            comp_mask[i, : len(c)] = 1
    return TokenBatch(input_ids, attention, comp_mask, comp_ids, first, p_lens, c_lens)


def batch_logprobs(model: Any, batch: TokenBatch, temperature: float | torch.Tensor,
                   trunk_depth: int | None = None) -> torch.Tensor:
    """[B, C] log-probs of the completion tokens at `temperature` (a float, or one per row as a [B] tensor;
    0 where padded); differentiable. `trunk_depth`: see `completion_distributions`."""
    logp = completion_distributions(model, batch, temperature, trunk_depth)
    device = logp.device
    token_lp = torch.gather(logp, 2, batch.completion_ids.to(device)[:, :, None]).squeeze(2)
    return token_lp * batch.completion_mask.to(device)


def completion_distributions(model: Any, batch: TokenBatch, temperature: float | torch.Tensor,
                             trunk_depth: int | None = None) -> torch.Tensor:
    """[B, C, V] float32 log-softmax over the vocabulary at every completion position, at `temperature`
    (constrained rows: the masked distribution the engine sampled from). Rows are meaningful only where
    `batch.completion_mask` is 1. What `batch_logprobs` picks from; the update-size KL reads it whole.

    `trunk_depth` (layers below it run without autograd) or `batch.prefix_len` > 0 select the split forward
    (`coplay.learn.trunk`); neither: transformers' own forward, as before the split existed."""
    temps = torch.as_tensor(temperature, dtype=torch.float32)
    if bool((temps <= 0).any()):
        raise ValueError(f"temperature {temperature}: log-probs need a positive sampling temperature")
    if trunk_depth is not None or batch.prefix_len > 0:
        picked = split_completion_logits(model, batch.input_ids, batch.attention_mask, batch.prompt_lens,
                                         batch.completion_ids.shape[1], batch.prefix_len, trunk_depth or 0,
                                         batch.prefix_store, batch.prefix_base)
        return _log_softmax(picked, batch, temps)
    device = next(p for p in model.parameters()).device
    seq_len = batch.input_ids.shape[1]
    keep = seq_len - batch.first_column  # columns first_column .. seq_len-1
    out = model(
        input_ids=batch.input_ids.to(device),
        attention_mask=batch.attention_mask.to(device),
        logits_to_keep=keep,
        use_cache=False,
    )
    logits = out.logits  # [B, keep, V]: column k predicts token at first_column + k + 1
    c_max = batch.completion_ids.shape[1]
    offsets = torch.tensor([p - 1 - batch.first_column for p in batch.prompt_lens], device=device)
    cols = (offsets[:, None] + torch.arange(c_max, device=device)[None, :]).clamp(max=keep - 1)
    picked = torch.gather(logits, 1, cols[:, :, None].expand(-1, -1, logits.shape[-1]))
    return _log_softmax(picked, batch, temps)


def _log_softmax(picked: torch.Tensor, batch: TokenBatch, temps: torch.Tensor) -> torch.Tensor:
    """[B, C, V] logits at the completion positions -> the engine's float32 log-distribution."""
    scale = temps.to(picked.device).reshape(-1, 1, 1) if temps.dim() == 1 else temps.to(picked.device)
    if batch.bitmask is not None:  # constrained samples: the masked distribution the engine sampled from
        picked = mask_logits(picked, batch.bitmask)
    return torch.log_softmax(picked.float() / scale, dim=-1)


def adapter_context(model: Any, adapter_name: str | None) -> AbstractContextManager[Any]:
    """Select `adapter_name` on a PEFT model (None: the base model, adapter disabled)."""
    if adapter_name is None:
        return model.disable_adapter() if hasattr(model, "disable_adapter") else nullcontext()
    select_adapter(model, adapter_name)
    return nullcontext()


def select_adapter(model: Any, adapter_name: str) -> None:
    """Make `adapter_name` the active adapter without freezing the others.

    PEFT's `set_adapter` sets `requires_grad=False` on inactive adapters; DeepSpeed ZeRO registers its
    gradient hooks only on parameters that require grad, so every adapter parameter is switched back on
    (inactive adapters are not in the graph and get no gradient anyway).
    """
    model.base_model.set_adapter(adapter_name)
    for name, param in model.named_parameters():
        if "lora_" in name:
            param.requires_grad_(True)


@torch.no_grad()
def completion_logprobs(
    model: Any,
    adapter_name: str | None,
    prompt_ids_list: list[list[int]],
    completion_ids_list: list[list[int]],
    temperature: float,
    batch_size: int = 16,
) -> list[list[float]]:
    """Log-probs of each completion token under `adapter_name` (None: base model) at `temperature`."""
    results: list[list[float]] = []
    with adapter_context(model, adapter_name):
        for start in range(0, len(prompt_ids_list), batch_size):
            prompts = prompt_ids_list[start : start + batch_size]
            completions = completion_ids_list[start : start + batch_size]
            batch = make_token_batch(prompts, completions)
            lp = batch_logprobs(model, batch, temperature).cpu()
            results.extend(lp[i, : len(c)].tolist() for i, c in enumerate(completions))
    return results
