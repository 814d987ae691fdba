"""OpenAI-compatible endpoints as seat players (docs/architecture.md, opponent pool) and as the SFT teacher
(docs/rewards.md).

An endpoint gets the exact chat messages of `act_messages` (the one prompt builder; no skill active) at
`<base_url>/chat/completions`, and its answer goes through `parse_act`, exactly like a model seat's answer.
A failing endpoint never stops a game: after the bounded timeout and retries, the seat plays the empty
action, i.e. the game's documented fallback, and the failure is counted (`openai_endpoint_errors`). An
answer that does not parse is handled like a model's (the game's fallback) and counted
(`openai_parse_errors`); both also appear as the step's `parse_error`. Endpoint seats are opponents: they
produce no Samples and nothing of theirs is trained on.

Credentials: the API key comes from the environment variable the config names (`endpoint.api_key_env`), or
none is configured and the placeholder `EMPTY` is sent (the convention of vLLM and other OpenAI-compatible
servers). A key in `OPENAI_API_KEY` is never picked up implicitly, so it cannot leak to another base URL.

`openai` (the `api` extra) is imported when the first request is made. No torch, no ray, no vllm.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from coplay.agent.decision import derive_seed
from coplay.agent.parsing import parse_act
from coplay.agent.prompts import MULTI_LINE_GAMES, ChatMessages, HistoryEntry, act_messages
from coplay.config import EndpointConfig
from coplay.engines.base import SamplingParams
from coplay.types import Sample, Step

NO_API_KEY = "EMPTY"


class EndpointError(RuntimeError):
    """The endpoint gave no usable response (connection error, timeout, HTTP error, malformed body),
    retries included."""


@dataclass(frozen=True)
class OpenAIEndpoint:
    """Where and how to reach one OpenAI-compatible chat endpoint. `base_url` is the API root that
    `/chat/completions` is appended to, e.g. `http://127.0.0.1:8000/v1`."""

    base_url: str
    model: str
    api_key_env: str | None = None
    timeout_s: float = 30.0
    max_retries: int = 2

    @classmethod
    def from_config(cls, endpoint: EndpointConfig) -> OpenAIEndpoint:
        """From an `EndpointConfig` (`rollout.opponents.endpoint` or `sft.endpoint`)."""
        if not endpoint.base_url or not endpoint.model:
            raise ValueError("an OpenAI-compatible endpoint needs endpoint.base_url and endpoint.model; got "
                             f"{endpoint.base_url!r} and {endpoint.model!r}")
        return cls(base_url=endpoint.base_url, model=endpoint.model, api_key_env=endpoint.api_key_env,
                   timeout_s=endpoint.timeout_s, max_retries=endpoint.max_retries)

    def api_key(self) -> str:
        """The key from the named environment variable, or the no-key placeholder when none is named."""
        if self.api_key_env is None:
            return NO_API_KEY
        key = os.environ.get(self.api_key_env, "")
        if not key:
            raise ValueError(f"endpoint.api_key_env={self.api_key_env!r}: that environment variable is "
                             f"unset or empty; export it, or remove endpoint.api_key_env for an endpoint "
                             f"without a key")
        return key


class ChatClient:
    """Chat completions from one endpoint. Build and use it inside one event loop; `aclose` when done."""

    def __init__(self, endpoint: OpenAIEndpoint) -> None:
        self.endpoint = endpoint
        self._client: Any = None

    def _openai(self) -> Any:
        if self._client is None:
            try:
                from openai import AsyncOpenAI
            except ImportError as exc:
                raise ImportError("OpenAI-compatible endpoints need the `openai` package: "
                                  "pip install 'coplay[api]'") from exc
            self._client = AsyncOpenAI(base_url=self.endpoint.base_url, api_key=self.endpoint.api_key(),
                                       timeout=self.endpoint.timeout_s, max_retries=self.endpoint.max_retries)
        return self._client

    async def complete(self, messages: ChatMessages, sampling: SamplingParams,
                       seed: int | None = None) -> str:
        """The assistant's text for `messages` (empty when it sent none). Raises `EndpointError`."""
        import openai

        client = self._openai()
        where = f"{self.endpoint.base_url} (model {self.endpoint.model})"
        try:
            response = await client.chat.completions.create(
                model=self.endpoint.model, messages=messages, temperature=sampling.temperature,
                top_p=sampling.top_p, max_tokens=sampling.max_tokens, seed=seed)
        except openai.OpenAIError as exc:
            raise EndpointError(f"{where}: {type(exc).__name__}: {exc}") from exc
        choices = getattr(response, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise EndpointError(f"{where}: the response has no choices: {str(response)[:200]!r}")
        message = getattr(choices[0], "message", None)
        content = getattr(message, "content", None)
        return content if isinstance(content, str) else ""

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


def client_for(clients: dict[OpenAIEndpoint, ChatClient], endpoint: OpenAIEndpoint) -> ChatClient:
    """The shared client of `endpoint` in `clients` (one per endpoint, so connections are pooled)."""
    if endpoint not in clients:
        clients[endpoint] = ChatClient(endpoint)
    return clients[endpoint]


async def close_clients(clients: dict[OpenAIEndpoint, ChatClient]) -> None:
    """Close and forget every client (a later request builds a new one)."""
    while clients:
        _, client = clients.popitem()
        await client.aclose()


@dataclass
class OpenAISeat:
    """One seat played by an endpoint for one episode. Same face as `DecisionAgent` (`decide`,
    `observe_outcome`), so the runner treats both alike; `decide` never returns Samples."""

    game: str
    rules: str
    client: ChatClient
    sampling: SamplingParams
    history_len: int
    seed_parts: tuple[object, ...]
    counters: dict[str, int]
    history: list[HistoryEntry] = field(default_factory=list)
    prompt_format: str = "full"  # `rollout.prompt_format`, as the model seats' prompts

    def _count(self, key: str) -> None:
        self.counters[key] = self.counters.get(key, 0) + 1

    async def decide(self, t: int, observation: str, info: dict[str, Any]) -> tuple[Step, list[Sample]]:
        legal = list(info.get("legal_actions", []))
        history = self.history[-self.history_len:] if self.history_len else []
        messages = act_messages(self.game, self.rules, observation, legal, None, history,
                                prompt_format=self.prompt_format)
        step = Step(t=t, observation=observation, action="", reward=0.0, score=float(info.get("score", 0.0)),
                    features_before=dict(info.get("features", {})))
        self._count("openai_calls")
        try:
            text = await self.client.complete(messages, self.sampling,
                                              seed=derive_seed(*self.seed_parts, t, "act"))
        except EndpointError as exc:
            self._count("openai_endpoint_errors")
            step.parse_error = f"endpoint error, fallback played: {exc}"
            return step, []
        parsed = parse_act(text, legal, multi_line=self.game in MULTI_LINE_GAMES)
        step.action, step.intention, step.parse_error = parsed.action, parsed.intention, parsed.error
        if parsed.error:
            self._count("openai_parse_errors")
        return step, []

    def observe_outcome(self, step: Step) -> None:
        """After the game stepped: extends the history the next prompt shows."""
        self.history.append(HistoryEntry(step.t, step.intention, step.action, step.reward))
        del self.history[: max(0, len(self.history) - max(self.history_len, 1))]
