"""The decoder's last layer at the completion positions only.

Why. A learner forward needs the logits of the completion tokens alone, and a decoder layer's output at a
position feeds nothing but the next layer: in the *last* layer, the output at every other position (the whole
prompt, the padding) is computed and then thrown away. Its keys and values are still needed at every position
(a completion token attends to the prompt), but its queries, attention output, output projection and MLP only
at the positions that predict completion tokens: on a 600-token suffix with 34-token answers, about 94% of the
last layer's work (and of its backward) goes. The result is the same layer applied to the same inputs, so the
log-probs equal the full layer's to float32 rounding (tests/learn/test_trunk.py).

`last_layer_at` re-states LLaMA's decoder layer (pre-norm attention with rotary embeddings, pre-norm MLP,
both residual) with the layer's own modules, so LoRA on any projection applies as usual. `can_trim` accepts a
layer only when it is built of exactly those modules (LLaMA, Mistral, Qwen2, SmolLM2), or those and Qwen3's
per-head query / key norms; any other shape (soft-capping, sliding windows, other parts) runs the full layer
instead. Imports torch and transformers'
rotary helper (lazily); never peft or coplay's other packages.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

LAYER_PARTS = {"self_attn", "mlp", "input_layernorm", "post_attention_layernorm"}
ATTENTION_PARTS = {"q_proj", "k_proj", "v_proj", "o_proj"}
HEAD_NORMS = {"q_norm", "k_norm"}  # Qwen3's per-head query / key norms, before the rotary embedding


def can_trim(layer: torch.nn.Module, config: Any) -> bool:
    """Whether `layer` is a LLaMA-shaped decoder layer `last_layer_at` reproduces exactly."""
    attn = getattr(layer, "self_attn", None)
    if attn is None or {name for name, _ in layer.named_children()} != LAYER_PARTS:
        return False
    if {name for name, _ in attn.named_children()} not in (ATTENTION_PARTS, ATTENTION_PARTS | HEAD_NORMS):
        return False
    if getattr(config, "attn_logit_softcapping", None) or getattr(attn, "sliding_window", None):
        return False
    return all(hasattr(attn, key) for key in ("head_dim", "scaling", "num_key_value_groups", "layer_idx"))


def last_layer_at(layer: torch.nn.Module, hidden: torch.Tensor, cols: torch.Tensor, prefix_len: int,
                  key_valid: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor],
                  cache: Any) -> torch.Tensor:
    """The output of decoder `layer` at suffix columns `cols` ([B, C]) of `hidden` ([B, T, H], the suffix
    after `prefix_len` shared tokens whose keys/values `cache` holds; no prefix: `cache` None). Keys and
    values come from every column; query c of row b sees the prefix and the row's valid suffix columns up to
    `cols[b, c]` (`key_valid` [B, T]: the suffix's attention mask). `rotary`: the (cos, sin) of the suffix
    positions, [1, T, head_dim]."""
    from transformers.models.llama.modeling_llama import repeat_kv

    attn = layer.self_attn
    rows, width = cols.shape
    normed = layer.input_layernorm(hidden)
    keys, values = _keys_values(attn, normed, rotary, cache)
    index = cols[:, :, None].expand(-1, -1, hidden.shape[-1])
    queries = _heads(attn, "q", torch.gather(normed, 1, index))
    cos, sin = rotary
    queries = _rotate(queries, cos[0][cols], sin[0][cols])
    key_pos = torch.arange(keys.shape[2], device=hidden.device)
    allowed = key_pos[None, None, :] <= (cols + prefix_len)[:, :, None]  # [B, C, prefix + T]
    valid = torch.cat([key_valid.new_ones(rows, keys.shape[2] - key_valid.shape[1]), key_valid], dim=1)
    allowed = allowed & valid.bool()[:, None, :]
    out = F.scaled_dot_product_attention(queries, repeat_kv(keys, attn.num_key_value_groups),
                                         repeat_kv(values, attn.num_key_value_groups),
                                         attn_mask=allowed[:, None], scale=attn.scaling)
    out = attn.o_proj(out.transpose(1, 2).reshape(rows, width, -1))
    out = torch.gather(hidden, 1, index) + out
    return out + layer.mlp(layer.post_attention_layernorm(out))


def last_layer_keys_values(layer: torch.nn.Module, hidden: torch.Tensor,
                           rotary: tuple[torch.Tensor, torch.Tensor], cache: Any) -> None:
    """Append the last layer's keys and values of `hidden` (a shared prefix) to `cache`, without its
    output: nothing reads the last layer's output at a prompt position."""
    _keys_values(layer.self_attn, layer.input_layernorm(hidden), rotary, cache)


def _keys_values(attn: torch.nn.Module, normed: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor],
                 cache: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotated keys and values of every position of `normed`, after the cached ones when there is a cache
    (which then holds them too)."""
    keys, values = _heads(attn, "k", normed), _heads(attn, "v", normed)
    keys = _rotate(keys, *rotary)
    if cache is not None:
        keys, values = cache.update(keys, values, attn.layer_idx)
    return keys, values


def _heads(attn: torch.nn.Module, kind: str, normed: torch.Tensor) -> torch.Tensor:
    """[B, heads, L, head_dim] projection `kind` (q, k or v) of `normed` [B, L, hidden], through the layer's
    per-head norm where it has one (Qwen3's q_norm / k_norm)."""
    rows, length = normed.shape[:2]
    out = getattr(attn, f"{kind}_proj")(normed).view(rows, length, -1, attn.head_dim)
    norm = getattr(attn, f"{kind}_norm", None)
    return (out if norm is None else norm(out)).transpose(1, 2)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """The rotary embedding of `x` [B, heads, L, head_dim] at positions whose (cos, sin) are [B or 1, L,
    head_dim]: transformers' `apply_rotary_pos_emb`, for one tensor."""
    from transformers.models.llama.modeling_llama import rotate_half

    return x * cos[:, None] + rotate_half(x) * sin[:, None]
