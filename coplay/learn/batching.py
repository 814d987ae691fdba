"""Turning samples with advantages into per-rank micro-batches of tensors for the GRPO loss.

Every rank sees the whole learner-step batch and takes items i ≡ rank (mod world) (where prompts repeat,
whole micro-batches in turn). Loss weights are computed over the *whole* batch of an adapter (see
`grpo.aggregation_weights`), so the per-rank, per-micro-batch losses add up to exactly the single-process
loss. Every rank runs the same number of micro-batches per adapter (ZeRO-3 gathers and reduce-scatters inside
forward/backward, so the calls must pair up across ranks); a rank with fewer items pads with a copy of an
item whose weight is 0.

Prefix sharing (`learner.share_prefix`): `order_for_sharing` puts items with common prompt beginnings next to
each other, `sharing_micro_batches` gives the answers sampled at one prompt (a same-state GRPO group) a
micro-batch of their own, so that their whole prompt is computed once rather than once per answer, and
`share_prefixes` gives every micro-batch the number of leading tokens its rows share (computed once by
`coplay.learn.trunk`). The step's common prefix (a game's system turn) is the same on every rank, so
ranks run the same module calls (ZeRO-3 gathers inside them); only a single rank falls back to each
micro-batch's own common prefix when the step's is short (several games' prompts in one step). Imports torch
only.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import torch

from coplay.engines.token_masks import TokenMasks
from coplay.learn.grpo import aggregation_weights
from coplay.learn.logprobs import TokenBatch, make_token_batch
from coplay.learn.trunk import MIN_SHARED_PREFIX, PrefixStore, shared_prefix_len
from coplay.types import Sample


@dataclass
class TrainItem:
    """One sample as the learner trains on it."""

    prompt_ids: list[int]
    completion_ids: list[int]
    behaviour_logprobs: list[float]
    temperature: float
    advantage: float
    weight: float = 0.0  # per-token loss weight, set over the whole batch
    regex: str | None = None  # the constraint the engine sampled under (Diplomacy constrained orders)
    on_policy: bool = False  # sampled by the adapter version the learner holds (`learner.old_logprobs`)


@dataclass
class MicroBatch:
    """Tensors of one micro-batch (all [B] or [B, C])."""

    tokens: TokenBatch
    behaviour_logprobs: torch.Tensor
    advantages: torch.Tensor
    weights: torch.Tensor
    temperatures: torch.Tensor
    ref_logprobs: torch.Tensor | None = None
    on_policy: torch.Tensor | None = None  # [B] bool: rows whose old log-probs the learner computes itself


def items_from_samples(samples: list[Sample], advantages: dict[str, float],
                       current_version: int | None = None) -> list[TrainItem]:
    """TrainItems for samples with a completion; each sample needs its advantage and matching log-probs.
    `current_version`: the version of the samples' adapter the learner holds; samples of that version are
    on-policy (None: none are)."""
    items = []
    for s in samples:
        if len(s.logprobs) != len(s.completion_ids):
            raise ValueError(f"sample {s.sample_id!r}: {len(s.logprobs)} behaviour log-probs for "
                             f"{len(s.completion_ids)} completion tokens")
        if s.sample_id not in advantages:
            raise ValueError(f"sample {s.sample_id!r} ({s.adapter}) has no advantage")
        if not s.completion_ids:
            continue
        items.append(TrainItem(list(s.prompt_ids), list(s.completion_ids), list(s.logprobs),
                               float(s.temperature), float(advantages[s.sample_id]),
                               regex=s.meta.get("regex") or None,
                               on_policy=current_version is not None
                               and s.adapter_version == current_version))
    return items


def set_weights(items: list[TrainItem], loss_agg: str, token_norm: int | None) -> None:
    """Set each item's per-token weight from the whole batch's lengths."""
    weights = aggregation_weights([len(i.completion_ids) for i in items], loss_agg, token_norm)
    for item, w in zip(items, weights, strict=True):
        item.weight = w


def mini_batch_items(items: list[TrainItem], count: int) -> list[list[TrainItem]]:
    """`items` cut into at most `count` mini-batches of about equal size, in `order_for_sharing`'s order,
    never splitting the answers of one prompt (a same-state group's advantages are relative to each other,
    and its prompt is computed once per micro-batch). Every rank cuts the whole batch the same way. One
    mini-batch when `count` is 1."""
    if count <= 1 or len(items) <= 1:
        return [items] if items else []
    ordered = order_for_sharing(items)
    runs = [list(run) for _, run in itertools.groupby(ordered, key=lambda item: item.prompt_ids)]
    target = len(ordered) / min(count, len(runs))
    minis: list[list[TrainItem]] = [[]]
    done = 0  # items placed so far; a run opens the next mini-batch when its middle passes the next boundary
    for run in runs:
        if minis[-1] and len(minis) < count and done + len(run) / 2 > len(minis) * target:
            minis.append([])
        minis[-1].extend(run)
        done += len(run)
    return minis


def rank_micro_batches(items: list[TrainItem], rank: int, world: int,
                       micro_batch_size: int) -> list[list[TrainItem]]:
    """This rank's micro-batches: the same count on every rank, padded with zero-weight copies."""
    mine = items[rank::world]
    per_rank = math.ceil(len(items) / world)
    count = max(1, math.ceil(per_rank / micro_batch_size))
    chunks = [mine[k * micro_batch_size : (k + 1) * micro_batch_size] for k in range(count)]
    return [chunk or [_padding(items[0])] for chunk in chunks]


def _padding(item: TrainItem) -> TrainItem:
    """A copy of `item` that weighs nothing: the row a rank with fewer items runs so the calls pair up."""
    return TrainItem(item.prompt_ids, item.completion_ids, item.behaviour_logprobs, item.temperature, 0.0,
                     0.0, item.regex, item.on_policy)


def to_micro_batch(items: list[TrainItem], pad_id: int = 0, masks: TokenMasks | None = None) -> MicroBatch:
    """Tensors of `items`; constrained items get their constraint's token masks (`masks` required then)."""
    tokens = make_token_batch([i.prompt_ids for i in items], [i.completion_ids for i in items], pad_id)
    width = tokens.completion_ids.shape[1]
    if any(i.regex for i in items):
        if masks is None:
            raise ValueError("constrained samples (Sample.meta['regex']) need the learner's TokenMasks")
        tokens.bitmask = masks.allocate(len(items) * width).reshape(len(items), width, -1).fill_(-1)
        for row, item in enumerate(items):
            if item.regex:
                tokens.bitmask[row, : len(item.completion_ids)] = masks.completion_bitmask(
                    item.regex, item.completion_ids)
    beh = torch.zeros((len(items), width), dtype=torch.float32)
    for row, item in enumerate(items):
        beh[row, : len(item.behaviour_logprobs)] = torch.tensor(item.behaviour_logprobs, dtype=torch.float32)
    return MicroBatch(
        tokens=tokens,
        behaviour_logprobs=beh,
        advantages=torch.tensor([i.advantage for i in items], dtype=torch.float32),
        weights=torch.tensor([i.weight for i in items], dtype=torch.float32),
        temperatures=torch.tensor([i.temperature for i in items], dtype=torch.float32),
        on_policy=torch.tensor([i.on_policy for i in items], dtype=torch.bool),
    )


def order_for_sharing(items: list[TrainItem]) -> list[TrainItem]:
    """`items` in the order that shares most: when some prompts repeat (several answers sampled at one state),
    by prompt tokens, so that a prompt's answers sit together (`sharing_micro_batches` cuts them out); else,
    when all the step's prompts open with one common prefix (one game's system turn), by sequence length, so
    that a micro-batch's rows pad little; otherwise by prompt tokens, so that the prompts of a game sit
    together and micro-batches cut from the list share longer prefixes. The order changes only the
    summation order of the gradient (loss weights are per item)."""
    if _repeated_prompts(items):
        return sorted(items, key=lambda item: item.prompt_ids)
    if shared_prefix_len([item.prompt_ids for item in items]) >= MIN_SHARED_PREFIX:
        return sorted(items, key=lambda i: (len(i.prompt_ids) + len(i.completion_ids), i.prompt_ids))
    return sorted(items, key=lambda item: item.prompt_ids)


def _repeated_prompts(items: list[TrainItem]) -> bool:
    return len({tuple(item.prompt_ids) for item in items}) < len(items)


def sharing_micro_batches(items: list[TrainItem], rank: int, world: int,
                          micro_batch_size: int) -> list[list[TrainItem]]:
    """This rank's micro-batches of `items` (in `order_for_sharing`'s order) when prompts repeat: each run of
    two or more items with one prompt (a same-state group's answers) is cut into micro-batches of its own
    (at most `micro_batch_size` rows), so a micro-batch's rows share the whole prompt and the split forward
    computes it once; the items whose prompt is theirs alone are cut as `rank_micro_batches` cuts (by
    length where they share a common prefix). Whole
    micro-batches go to the ranks in turn; every rank gets the same count (ZeRO-3 pairs the calls), padded
    with a zero-weight copy of an item. Without repeated prompts: `rank_micro_batches`."""
    if not _repeated_prompts(items):
        return rank_micro_batches(items, rank, world, micro_batch_size)
    chunks: list[list[TrainItem]] = []
    singles: list[TrainItem] = []
    for _, group in itertools.groupby(items, key=lambda item: item.prompt_ids):
        run = list(group)
        if len(run) == 1:
            singles.extend(run)
        else:
            chunks.extend(run[k : k + micro_batch_size] for k in range(0, len(run), micro_batch_size))
    if shared_prefix_len([item.prompt_ids for item in singles]) >= MIN_SHARED_PREFIX:
        # one game's prompts (a common system turn): by length, as `order_for_sharing` orders a step without
        # repeats, so that their micro-batches pad little (episode groups repeat only their first prompt)
        singles.sort(key=lambda i: len(i.prompt_ids) + len(i.completion_ids))
    chunks.extend(singles[k : k + micro_batch_size] for k in range(0, len(singles), micro_batch_size))
    mine = chunks[rank::world]
    return mine + [[_padding(items[0])] for _ in range(math.ceil(len(chunks) / world) - len(mine))]


def share_prefixes(batches: list[MicroBatch], items: list[TrainItem], world: int,
                   store: PrefixStore | None = None) -> None:
    """Set the shared prefix of this rank's micro-batches of `items` (the adapter's whole step, every
    rank's): `TokenBatch.prefix_len`, the leading tokens a micro-batch's rows share, and `prefix_base`, the
    leading tokens all the step's prompts share, whose trunk states `store` keeps for every micro-batch.
    Where the step's common prefix is at least `MIN_SHARED_PREFIX` tokens, every micro-batch shares (its
    own common prefix is at least as long), so every rank does; otherwise only a lone rank shares, in the
    micro-batches of several rows whose own common prefix is long enough."""
    common = shared_prefix_len([item.prompt_ids for item in items])
    for batch in batches:
        rows = batch.tokens.prompt_lens
        own = shared_prefix_len([batch.tokens.input_ids[i, :p].tolist() for i, p in enumerate(rows)])
        if common >= MIN_SHARED_PREFIX:
            length, base = own, common
        elif world == 1 and own >= MIN_SHARED_PREFIX and len(rows) > 1:
            length, base = own, own
        else:
            length, base = 0, 0
        batch.tokens.prefix_len = length
        batch.tokens.prefix_base = base
        batch.tokens.prefix_store = store
