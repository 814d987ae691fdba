"""The learner's split forward: a frozen trunk without autograd, and a shared prompt prefix computed once.

Why. With LoRA on the top N decoder layers (`LoraSpec.top_layers`) the layers below the lowest adapted one
(the *trunk*) see no trainable weight: their outputs are the same for every adapter version, need no
gradient and no saved activations. And the samples of a learner step share long prompt prefixes (the
system turn of a game, about 325 of a 2048 `act` prompt's 445 tokens): recomputing it for every sample is
most of the work. `split_completion_logits` therefore runs, for a batch whose rows share their first
`prefix_len` tokens:

1. the prefix, once (batch of 1): trunk layers under `torch.no_grad()` (the keys/values and the hidden
   state entering the first adapted layer of the step's common prefix are kept in a `PrefixStore`, reused
   by every later micro-batch of the step; a micro-batch whose rows share more extends them by its own
   tokens), then the adapted layers *with* autograd, keeping their keys/values;
2. the rows' suffixes (the rest of the prompt and the completion) on top of those keys/values, expanded
   over the batch: attention of suffix token t of row i sees the prefix and row i's suffix up to t, exactly
   the causal attention of the unsplit sequence. The adapted layers' prefix keys/values depend on the LoRA
   weights, so they are computed with gradient once per micro-batch and `expand`ed (not copied): autograd
   sums every row's gradient into the one prefix computation, the gradient of the unsplit batch.

The last decoder layer (where its shape allows, `coplay.learn.last_layer`), the final norm and the LM head
run only on the hidden states that predict completion tokens (not on every column from the shortest prompt's
end, as `logits_to_keep` must), and the logits come back as
[B, C, V] in the layout `logprobs.completion_distributions` returns. Without a prefix (`prefix_len` 0) it is
the unsplit forward with the trunk under `no_grad`.

The log-probs equal the unsplit forward's to float32 rounding (tests/learn/test_trunk.py): same modules, same
positions, same masks (built by transformers' `create_causal_mask`, so every attention implementation gets
the mask it expects), only the order of some floating-point sums differs. Supported: decoders shaped like
LLaMA / Qwen (`embed_tokens`, `layers`, `norm`, `rotary_emb`; full attention in every layer), which
`check_split_support` verifies up front. On SmolLM2 in float32 (`python -m benchmarks.learner_speed`,
benchmarks/results/learner-speed-smollm2.json) a learner step over 2048 `act` samples ran 2.65x faster than
transformers' forward, sharing the prefix doing nearly all of it. Imports torch and transformers (lazily);
never deepspeed, peft or coplay's other packages.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch

from coplay.learn.last_layer import can_trim, last_layer_at, last_layer_keys_values

MIN_SHARED_PREFIX = 16  # shorter common prefixes are not worth a separate prefix pass


@dataclass
class TrunkStates:
    """A prefix's trunk computed once: per trunk layer its keys and values ([1, kv_heads, L, head_dim]), and
    the hidden state entering the first adapted layer ([1, L, hidden]). No autograd history."""

    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    hidden: torch.Tensor


@dataclass
class PrefixStore:
    """Trunk states of the prefixes of one learner step, by (prefix tokens, trunk depth). Valid as long as the
    frozen base is unchanged: the trunk has no adapter weight, so adapter updates between micro-batches and
    epochs do not touch it. `hits` / `misses` count reuses (tests read them)."""

    states: dict[tuple[tuple[int, ...], int], TrunkStates] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0


def decoder_parts(model: Any) -> tuple[Any, Any]:
    """(the decoder stack, the LM head) of a causal LM, through a PEFT wrapper."""
    causal_lm = model.get_base_model() if hasattr(model, "get_base_model") else model
    return causal_lm.get_decoder(), causal_lm.get_output_embeddings()


def check_split_support(model: Any) -> None:
    """Raise ValueError, naming what is missing, when `model` is not a decoder the split forward handles."""
    decoder, head = decoder_parts(model)
    needed = ("embed_tokens", "layers", "norm", "rotary_emb", "config")
    missing = [a for a in needed if not hasattr(decoder, a)]
    if head is None:
        missing.append("output embeddings")
    if missing:
        raise ValueError(f"learner.frozen_trunk / learner.share_prefix: {type(decoder).__name__} has no "
                         f"{', '.join(missing)}; set both false for this model")
    kinds = set(getattr(decoder.config, "layer_types", None) or ["full_attention"])
    if kinds != {"full_attention"}:
        raise ValueError(f"learner.frozen_trunk / learner.share_prefix: layer types {sorted(kinds)} (only "
                         f"full attention is supported); set both false for this model")


def lowest_adapted_layer(model: Any, adapter: str | None) -> int:
    """Index of the lowest decoder layer holding a LoRA module of `adapter`: the trunk is every layer below
    it. None (adapters disabled, the KL reference) or an adapter on no layer: the number of layers; an
    adapter on the token embeddings: 0 (nothing is frozen)."""
    decoder, _ = decoder_parts(model)
    n_layers = len(decoder.layers)
    if adapter is None:
        return n_layers
    if _holds_adapter(decoder.embed_tokens, adapter):
        return 0
    for index, layer in enumerate(decoder.layers):
        if _holds_adapter(layer, adapter):
            return index
    return n_layers


def _holds_adapter(module: torch.nn.Module, adapter: str) -> bool:
    """Whether `module` or a submodule carries PEFT LoRA weights of `adapter` (linear or embedding)."""
    for sub in module.modules():
        for attribute in ("lora_A", "lora_embedding_A"):
            weights = getattr(sub, attribute, None)
            if isinstance(weights, torch.nn.ModuleDict | torch.nn.ParameterDict) and adapter in weights:
                return True
    return False


def shared_prefix_len(prompts: list[list[int]]) -> int:
    """Length of the longest common prefix of `prompts`, capped one short of the shortest prompt (the last
    prompt token predicts the first completion token, so it must stay in every row's suffix)."""
    if not prompts:
        return 0
    cap = min(len(p) for p in prompts) - 1
    first = prompts[0]
    length = 0
    while length < cap and all(p[length] == first[length] for p in prompts[1:]):
        length += 1
    return length


def _run_layers(decoder: Any, first: int, last: int, hidden: torch.Tensor, mask: Any,
                position_embeddings: Any, position_ids: torch.Tensor, cache: Any) -> torch.Tensor:
    for index in range(first, last):
        hidden = decoder.layers[index](hidden, attention_mask=mask, position_embeddings=position_embeddings,
                                       position_ids=position_ids, past_key_values=cache,
                                       use_cache=cache is not None)
    return hidden


def _trunk_states(decoder: Any, prefix_ids: torch.Tensor, depth: int, store: PrefixStore | None,
                  base: int) -> TrunkStates:
    """The trunk of `prefix_ids`: that of its first `base` tokens (the step's common prefix) from `store` or
    computed now and stored, then extended over the rest (this micro-batch's own longer common part, not
    stored: it is this micro-batch's alone)."""
    base = base if 0 < base <= prefix_ids.shape[0] else prefix_ids.shape[0]
    key = (tuple(prefix_ids[:base].tolist()), depth)
    if store is not None and key in store.states:
        store.hits += 1
        states = store.states[key]
    else:
        states = _extend_trunk(decoder, None, prefix_ids[:base], depth)
        if store is not None:
            store.misses += 1
            store.states[key] = states
    if base < prefix_ids.shape[0]:
        states = _extend_trunk(decoder, states, prefix_ids[base:], depth)
    return states


def _extend_trunk(decoder: Any, states: TrunkStates | None, ids: torch.Tensor, depth: int) -> TrunkStates:
    """Trunk states of (the tokens of `states`, then `ids`), computing only `ids` (a batch of 1, without
    autograd)."""
    from transformers import DynamicCache

    done = 0 if states is None else states.hidden.shape[1]
    cache = DynamicCache(ddp_cache_data=None if states is None else list(zip(states.keys, states.values,
                                                                             strict=True)),
                         config=decoder.config)
    positions = torch.arange(done, done + ids.shape[0], device=ids.device)[None]
    with torch.no_grad():
        hidden = decoder.embed_tokens(ids[None])
        mask = _causal_mask(decoder, hidden, None, cache if done else None, positions)
        rotary = decoder.rotary_emb(hidden, positions)
        hidden = _run_layers(decoder, 0, depth, hidden, mask, rotary, positions, cache)
    return TrunkStates(keys=[cache.layers[i].keys for i in range(depth)],
                       values=[cache.layers[i].values for i in range(depth)],
                       hidden=hidden if states is None else torch.cat([states.hidden, hidden], dim=1))


def _causal_mask(decoder: Any, hidden: torch.Tensor, attention_mask: torch.Tensor | None, cache: Any,
                 positions: torch.Tensor) -> Any:
    """The mask transformers' own forward would build for these inputs (the attention implementation's
    format; None where SDPA's causal flag suffices)."""
    from transformers.masking_utils import create_causal_mask

    return create_causal_mask(config=decoder.config, inputs_embeds=hidden, attention_mask=attention_mask,
                              past_key_values=cache, position_ids=positions)


def _prefix_cache(decoder: Any, prefix_ids: torch.Tensor, depth: int, rows: int,
                  store: PrefixStore | None, base: int, trim: bool) -> Any:
    """A cache holding the prefix's keys/values of every layer, expanded over `rows`: the trunk's from
    `_trunk_states`, the adapted layers' computed here with autograd (once for all rows); with `trim`, the
    last layer's keys/values alone (`coplay.learn.last_layer`)."""
    from transformers import DynamicCache

    trunk = _trunk_states(decoder, prefix_ids, depth, store, base)
    length = prefix_ids.shape[0]
    positions = torch.arange(length, device=prefix_ids.device)[None]
    mask = _causal_mask(decoder, trunk.hidden, None, None, positions)  # before the cache holds anything
    rotary = decoder.rotary_emb(trunk.hidden, positions)
    cache = DynamicCache(ddp_cache_data=list(zip(trunk.keys, trunk.values, strict=True)),
                         config=decoder.config)
    last = len(decoder.layers) - 1
    if trim and depth <= last:
        hidden = _run_layers(decoder, depth, last, trunk.hidden, mask, rotary, positions, cache)
        last_layer_keys_values(decoder.layers[last], hidden, rotary, cache)
    else:
        _run_layers(decoder, depth, len(decoder.layers), trunk.hidden, mask, rotary, positions, cache)
    expanded = [(layer.keys.expand(rows, -1, -1, -1), layer.values.expand(rows, -1, -1, -1))
                for layer in cache.layers]
    return DynamicCache(ddp_cache_data=expanded, config=decoder.config)


def split_completion_logits(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                            prompt_lens: list[int], completion_width: int, prefix_len: int, depth: int,
                            store: PrefixStore | None = None, prefix_base: int = 0) -> torch.Tensor:
    """[B, C, V] logits at the positions predicting completion token j of row i (column
    `prompt_lens[i] - 1 + j`, clamped to the sequence for padding). The first `prefix_len` tokens are shared
    by every row and computed once; layers below `depth` run without autograd, and the trunk states of the
    first `prefix_base` tokens (0: all `prefix_len`) go to `store` for the step's other micro-batches
    (module docstring)."""
    decoder, head = decoder_parts(model)
    if prefix_len > 0 and any(getattr(layer, "gradient_checkpointing", False) and layer.training
                              for layer in decoder.layers):
        raise ValueError("a shared prefix needs the keys/values cache, which checkpointed decoder layers "
                         "drop: learner.share_prefix needs learner.gradient_checkpointing false")
    if prefix_len > 0 and not bool((input_ids[:, :prefix_len] == input_ids[:1, :prefix_len]).all()):
        raise ValueError(f"the rows do not share their first {prefix_len} tokens")
    device = decoder.embed_tokens.weight.device
    input_ids = input_ids.to(device)
    rows, seq_len = input_ids.shape
    last = len(decoder.layers) - 1
    trim = can_trim(decoder.layers[last], decoder.config)
    cache = (_prefix_cache(decoder, input_ids[0, :prefix_len], depth, rows, store, prefix_base, trim)
             if prefix_len > 0 else None)
    suffix = input_ids[:, prefix_len:]
    positions = torch.arange(prefix_len, seq_len, device=device)[None]
    with torch.no_grad() if depth > 0 else nullcontext():
        hidden = decoder.embed_tokens(suffix)
    mask = _causal_mask(decoder, hidden, attention_mask.to(device), cache, positions)
    rotary = decoder.rotary_emb(hidden, positions)
    stop = last if trim else last + 1  # the layers run whole
    with torch.no_grad() if depth > 0 else nullcontext():
        hidden = _run_layers(decoder, 0, min(depth, stop), hidden, mask, rotary, positions, cache)
    hidden = _run_layers(decoder, min(depth, stop), stop, hidden, mask, rotary, positions, cache)
    starts = torch.tensor(prompt_lens, device=device) - 1 - prefix_len
    cols = starts[:, None] + torch.arange(completion_width, device=device)[None, :]
    cols = cols.clamp(max=hidden.shape[1] - 1)
    if trim:  # the last layer at the completion positions only (coplay.learn.last_layer)
        with torch.no_grad() if depth > last else nullcontext():
            picked = last_layer_at(decoder.layers[last], hidden, cols, prefix_len,
                                   attention_mask[:, prefix_len:].to(device), rotary, cache)
    else:
        picked = torch.gather(hidden, 1, cols[:, :, None].expand(-1, -1, hidden.shape[-1]))
    return head(decoder.norm(picked))
