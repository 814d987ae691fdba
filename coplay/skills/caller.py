"""How the skill bank asks a model: prompts in, Samples out. The bank never sees an engine.

`ModelCaller.complete(adapter, prompts, n, max_tokens)` returns n Samples per prompt with `completion_text`,
token ids and behaviour log-probs filled (docs/rewards.md). `FunctionCaller` wraps any function
`generate(adapter, prompts, n) -> [[Completion | str, ...], ...]`, which is how the engines (or a scripted
test double) plug in. No caller (`None`) means the deterministic policy. Never imports ray, torch or vllm.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Protocol

from coplay.types import Sample

ChatMessages = list[dict[str, str]]


class CallerError(RuntimeError):
    """A caller that broke its contract (wrong number of completions, wrong types)."""


class ModelCaller(Protocol):
    """Anything that samples completions for the `segment`, `contract` and `curator` adapters."""

    def complete(self, adapter: str, prompts: list[ChatMessages], n: int,
                 max_tokens: int, regex: str | None = None) -> list[list[Sample]]:
        """n Samples per prompt, in prompt order, each with `completion_text` set; with `regex`, sampled
        under that constraint where the caller can (its Samples then carry it in `meta["regex"]`)."""
        ...


@dataclass
class Completion:
    """One sampled completion as an engine reports it."""

    text: str
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    adapter_version: int = 0
    temperature: float = 1.0
    finish_reason: str = ""
    prompt_cut_tokens: int = 0  # tokens cut from the prompt to fit the context (0: shown whole)


GenerateFn = Callable[[str, list[ChatMessages], int], Sequence[Sequence["Completion | str"]]]


@dataclass
class CallUsage:
    """What one adapter's model calls cost in a bank update (the phase timeline shows it per call kind):
    calls made, prompts, completions, prompt tokens (once per prompt: its n completions share it), completion
    tokens, and the seconds spent waiting for the answers. Scripted string answers count no tokens."""

    calls: int = 0
    prompts: int = 0
    completions: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    seconds: float = 0.0

    def add(self, groups: Sequence[Sequence[Completion | str]], seconds: float) -> None:
        self.calls += 1
        self.prompts += len(groups)
        self.seconds += seconds
        for group in groups:
            self.completions += len(group)
            first = group[0] if group else None
            self.tokens_in += len(first.prompt_ids) if isinstance(first, Completion) else 0
            self.tokens_out += sum(len(c.completion_ids) for c in group if isinstance(c, Completion))


class FunctionCaller:
    """A `ModelCaller` from a function `generate(adapter, prompts, n)`; plain strings are accepted as
    completions without token ids (a scripted caller). `max_tokens` is passed on when the function takes
    it, and a constraint (`generate(..., max_tokens, regex)`) when it samples under one (`pass_regex`); a
    caller that does not (the teacher, scripted answers) answers as it would anyway."""

    def __init__(self, generate: GenerateFn, pass_max_tokens: bool = False, pass_regex: bool = False) -> None:
        if pass_regex and not pass_max_tokens:
            raise ValueError("pass_regex needs pass_max_tokens (generate(adapter, prompts, n, max_tokens, "
                             "regex))")
        self.generate = generate
        self.pass_max_tokens = pass_max_tokens
        self.pass_regex = pass_regex
        self.calls: dict[str, int] = {}
        self.usage: dict[str, CallUsage] = {}  # per adapter

    def usage_json(self) -> dict[str, dict[str, float]]:
        """`usage` as plain dicts (what `BankUpdate.calls` carries)."""
        return {adapter: asdict(u) for adapter, u in sorted(self.usage.items())}

    def complete(self, adapter: str, prompts: list[ChatMessages], n: int,
                 max_tokens: int, regex: str | None = None) -> list[list[Sample]]:
        if not prompts:
            return []
        applied = regex if self.pass_regex else None
        started = time.perf_counter()
        if applied:
            raw = self.generate(adapter, prompts, n, max_tokens, applied)  # type: ignore[call-arg]
        elif self.pass_max_tokens:
            raw = self.generate(adapter, prompts, n, max_tokens)  # type: ignore[call-arg]
        else:
            raw = self.generate(adapter, prompts, n)
        if len(raw) != len(prompts):
            raise CallerError(f"{adapter}: generate returned {len(raw)} groups for {len(prompts)} prompts")
        self.calls[adapter] = self.calls.get(adapter, 0) + len(prompts) * n
        self.usage.setdefault(adapter, CallUsage()).add(raw, time.perf_counter() - started)
        return [group_samples(adapter, group, n, applied) for group in raw]


def group_samples(adapter: str, group: list[Completion | str], n: int, regex: str | None) -> list[Sample]:
    """One prompt's `n` completions as Samples, each carrying the `regex` it was sampled under (the learner
    masks its logits the same way); a backend that returned another count is an error, not a short group."""
    if len(group) != n:
        raise CallerError(f"{adapter}: backend returned {len(group)} completions, expected n={n}")
    samples = [_to_sample(adapter, c) for c in group]
    for sample in samples if regex else ():
        sample.meta["regex"] = regex
    return samples


def _to_sample(adapter: str, completion: Completion | str) -> Sample:
    if isinstance(completion, str):
        completion = Completion(text=completion)
    if not isinstance(completion, Completion):
        raise CallerError(f"{adapter}: completion of type {type(completion).__name__}; "
                          f"expected Completion or str")
    return Sample(adapter=adapter, adapter_version=completion.adapter_version,
                  prompt_ids=list(completion.prompt_ids), completion_ids=list(completion.completion_ids),
                  logprobs=list(completion.logprobs), group_id="",
                  temperature=completion.temperature, completion_text=completion.text,
                  finish_reason=completion.finish_reason)


def call_adapter(caller: ModelCaller, adapter: str, prompts: list[ChatMessages], n: int, max_tokens: int,
                 group_prefix: str, regex: str | None = None) -> list[list[Sample]]:
    """Call and stamp group ids `<prefix>/<adapter>/<i>` and sample ids `<group>/<j>` (deterministic)."""
    if not prompts:
        return []
    groups = (caller.complete(adapter, prompts, n, max_tokens, regex=regex) if regex
              else caller.complete(adapter, prompts, n, max_tokens))
    if len(groups) != len(prompts) or any(len(g) != n for g in groups):
        raise CallerError(f"{adapter}: caller returned {[len(g) for g in groups]} samples for "
                          f"{len(prompts)} prompts x n={n}")
    for i, group in enumerate(groups):
        for j, sample in enumerate(group):
            if sample.adapter != adapter:
                raise CallerError(f"caller answered adapter {sample.adapter!r} for a {adapter!r} prompt")
            sample.group_id = f"{group_prefix}/{adapter}/{i}"
            sample.sample_id = f"{sample.group_id}/{j}"
    return groups
