"""Token masks of a regular-expression constraint (`GenerationRequest.regex`), exactly as vLLM's
structured-output backend (xgrammar) computes them: the HF engine samples under them and the learner applies
them to its logits, so the learner's log-probs are those of the distribution the engine sampled from (vLLM
applies the grammar bitmask to the logits before its sampler, so its reported log-probs are too).

A bitmask is int32 words: bit v of word v // 32 allows token v. Lazy imports: xgrammar and torch load on
first use.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any


class TokenMasks:
    """Allowed-token bitmasks of a regex over one tokenizer (int32 words, bit v of word v // 32 = token v),
    exactly as xgrammar (vLLM's structured-output backend) computes them."""

    def __init__(self, tokenizer: Any, vocab_size: int) -> None:
        import xgrammar as xgr

        self.vocab_size = vocab_size
        self.info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size)
        self.compiler = xgr.GrammarCompiler(self.info, max_threads=1)
        self._compile = lru_cache(maxsize=256)(self.compiler.compile_regex)

    def matcher(self, regex: str) -> Any:
        import xgrammar as xgr

        return xgr.GrammarMatcher(self._compile(regex))

    def allocate(self, rows: int) -> Any:
        import xgrammar as xgr

        return xgr.allocate_token_bitmask(rows, self.vocab_size)

    def completion_bitmask(self, regex: str, completion_ids: list[int]) -> Any:
        """[len(completion_ids), words] int32: the mask before each completion token. A token the grammar
        rejects (a completion not sampled under this constraint) raises ValueError."""
        matcher = self.matcher(regex)
        masks = self.allocate(len(completion_ids))
        for j, token in enumerate(completion_ids):
            matcher.fill_next_token_bitmask(masks, j)
            if not matcher.accept_token(int(token)):
                if matcher.is_terminated() and j == len(completion_ids) - 1:
                    break  # the stop token after a complete match
                raise ValueError(f"completion token {j} ({token}) is outside the constraint "
                                 f"{regex[:80]!r}...")
        return masks


def unpack_bitmask(bitmask: Any, vocab_size: int) -> Any:
    """[..., words] int32 -> [..., vocab_size] bool (True = allowed)."""
    import torch

    bits = torch.arange(32, dtype=torch.int32, device=bitmask.device)
    allowed = ((bitmask.unsqueeze(-1) >> bits) & 1).bool()
    return allowed.flatten(-2)[..., :vocab_size]


def mask_logits(logits: Any, bitmask: Any) -> Any:
    """Logits with disallowed tokens at -inf (`bitmask` rows match `logits` rows; out of place)."""
    allowed = unpack_bitmask(bitmask.to(logits.device), logits.shape[-1])
    return logits.masked_fill(~allowed, float("-inf"))
