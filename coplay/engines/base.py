"""The token-in/token-out engine interface that every backend (`vllm`, `hf`) implements.

A request is prompt token ids + an adapter engine name (`act@v3`, or None for the base model) + sampling
settings + a seed; a completion is the sampled token ids with their log-probs **under the sampling
distribution** (temperature applied, and top-p truncation when top_p < 1: exactly the distribution each
token was drawn from), the decoded text, the finish reason and the adapter that produced it.

Greedy requests (temperature 0) report log-probs at temperature 1 (the model's own distribution).
A request with a `regex` samples from the distribution masked to the tokens the regex still allows, and
reports log-probs of that masked distribution (`coplay.engines.token_masks`).

Adapter versions arrive as bytes (see `coplay.engines.adapters` for the bundle format and its sha256);
`<adapter>@v<n>` names one set of weights for ever, so no cache entry can be stale.

Imports only the standard library: no torch, no vllm, no transformers.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from coplay.artifacts.bundle import ArtifactError

_ENGINE_NAME = re.compile(r"^(?P<adapter>[A-Za-z][A-Za-z0-9_\-]*)@v(?P<version>0|[1-9][0-9]*)$")


class AdapterRejected(ArtifactError, ValueError):
    """An adapter version that failed verification (checksum, format, shape); earlier versions keep
    serving."""


class AdapterNotLoaded(LookupError):
    """A request named an adapter version this engine does not serve (never loaded, or retired)."""


def engine_name(adapter: str, version: int) -> str:
    """`act`, 3 -> `act@v3` (docs/architecture.md)."""
    name = f"{adapter}@v{version}"
    parse_engine_name(name)
    return name


def parse_engine_name(name: str) -> tuple[str, int]:
    """`act@v3` -> ("act", 3); anything else raises ValueError naming the value and the expected form."""
    match = _ENGINE_NAME.match(name)
    if match is None:
        raise ValueError(f"adapter engine name {name!r}: expected '<adapter>@v<version>', e.g. 'act@v3'")
    return match["adapter"], int(match["version"])


@dataclass(frozen=True)
class SamplingParams:
    """How one completion is sampled. temperature 0 is greedy. `seed` is the default when a request has
    none."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 64
    stop_token_ids: tuple[int, ...] = ()
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature={self.temperature}: must be >= 0 (0 = greedy)")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p={self.top_p}: must be in (0, 1]")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens={self.max_tokens}: must be >= 1")
        object.__setattr__(self, "stop_token_ids", tuple(int(t) for t in self.stop_token_ids))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass(frozen=True)
class GenerationRequest:
    """One model call. `adapter` is an engine name (`act@v3`) or None for the base model.

    The seed used is `seed` when given, else `sampling.seed`, else the engine draws one.
    """

    prompt_ids: list[int]
    adapter: str | None = None
    sampling: SamplingParams = field(default_factory=SamplingParams)
    seed: int | None = None
    request_id: str = ""
    regex: str | None = None  # a constraint on the whole completion (`coplay.engines.token_masks`)

    def __post_init__(self) -> None:
        if not self.prompt_ids:
            raise ValueError(f"request {self.request_id!r}: empty prompt_ids")
        if self.adapter is not None:
            parse_engine_name(self.adapter)

    @property
    def effective_seed(self) -> int | None:
        return self.seed if self.seed is not None else self.sampling.seed


@dataclass
class Completion:
    """What the engine sampled for one request.

    `logprobs[i]` is the log-prob of `token_ids[i]` under the sampling distribution (see module docstring).
    `token_ids` include the stop token when one ended the completion (it was sampled and is trained on);
    `text` is the decoded completion without special tokens. `finish_reason`: "stop" or "length".
    """

    token_ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: str
    adapter: str | None
    request_id: str = ""


class Engine(ABC):
    """One base model serving many LoRA adapter versions, token-in/token-out."""

    backend: str = ""

    @property
    @abstractmethod
    def tokenizer(self) -> Any:
        """The base model's tokenizer (Hugging Face interface)."""

    @abstractmethod
    def generate(self, requests: list[GenerationRequest]) -> list[Completion]:
        """Complete every request (batched together), in request order."""

    @abstractmethod
    async def agenerate(self, request: GenerationRequest) -> Completion:
        """Complete one request; many concurrent calls are batched together by the engine."""

    @abstractmethod
    def score(self, prompt_ids: list[int], completion_ids: list[int], adapter: str | None) -> list[float]:
        """Log-probs (temperature 1) of a given completion after a prompt: what the engine would assign."""

    @abstractmethod
    def load_adapter(self, name: str, version: int, files: dict[str, bytes], sha256: str) -> str:
        """Verify and register `<name>@v<version>`; returns the sha256 it loaded.

        Raises AdapterRejected on a checksum mismatch, a malformed bundle, a rank over the engine's limit,
        or a name that is already loaded with different bytes. A rejection changes nothing else.
        """

    @abstractmethod
    def retire_adapter(self, engine_name: str) -> None:
        """Stop accepting requests for `engine_name`; its weights are dropped once no request uses them."""

    @abstractmethod
    def loaded_adapters(self) -> list[str]:
        """Engine names that new requests may use, sorted."""

    @abstractmethod
    def in_flight(self, engine_name: str) -> int:
        """How many requests are using `engine_name` now (0 when unknown or dropped)."""

    @abstractmethod
    def close(self) -> None:
        """Release the engine's processes, threads and files. Idempotent."""

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
