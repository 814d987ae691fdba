"""The OpenAI-compatible chat client against a small local endpoint of our own (stdlib `http.server` on
127.0.0.1, a random port, in a thread): credentials, bounded timeout and retries, and every kind of failure
turning into `EndpointError` (the seat then plays the game's fallback). `EndpointServer` is shared with the
other `test_openai_*` files."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from coplay.agent.openai_player import NO_API_KEY, ChatClient, EndpointError, OpenAIEndpoint
from coplay.engines.base import SamplingParams

MODEL = "local-test-model"
GARBAGE = "I would rather not say. Maybe something clever?"
ILLEGAL = "INTENTION: ATTACK surprise them\nACTION: teleport to the moon"


def first_legal_action(messages: list[dict[str, str]]) -> str:
    """The first entry of the prompt's `Legal actions:` block (free-text slots filled in)."""
    user = messages[-1]["content"]
    block = user.split("Legal actions:\n", 1)
    if len(block) < 2:
        return "noop"
    return block[1].splitlines()[0].replace("<text>", "I trust player_2")


def legal_answer(messages: list[dict[str, str]]) -> str:
    return f"INTENTION: EXPLORE take the first option\nACTION: {first_legal_action(messages)}"


class EndpointServer:
    """A local `/v1/chat/completions`. `behaviour(n)` picks how request n (0-based) is answered: `legal`
    (the first legal action in the act format), `garbage` (text without the format), `illegal` (the format
    with an action no game has), `error500`, `not_json` (HTTP 200 with a non-JSON body) or `slow` (waits
    `slow_s`, then answers legally)."""

    def __init__(self, behaviour: Callable[[int], str] = lambda n: "legal", slow_s: float = 2.0) -> None:
        self.behaviour = behaviour
        self.slow_s = slow_s
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def endpoint(self, **kwargs: Any) -> OpenAIEndpoint:
        return OpenAIEndpoint(base_url=self.base_url, model=MODEL,
                              **{"timeout_s": 5.0, "max_retries": 0, **kwargs})

    def __enter__(self) -> EndpointServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                return

            def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("retry-after-ms", "10")
                self.end_headers()
                try:
                    self.wfile.write(body)
                except BrokenPipeError:  # the client gave up first (the timeout test): nothing to answer
                    return

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with server.lock:
                    n = len(server.requests)
                    server.requests.append({"path": self.path,
                                            "authorization": self.headers.get("Authorization"),
                                            "body": body})
                mode = server.behaviour(n)
                if self.path != "/v1/chat/completions":
                    return self._send(404, b'{"error": {"message": "not found"}}')
                if mode == "error500":
                    return self._send(500, b'{"error": {"message": "internal error on demand"}}')
                if mode == "not_json":
                    return self._send(200, b"<html>proxy error</html>", "text/html")
                if mode == "slow":
                    time.sleep(server.slow_s)
                text = {"garbage": GARBAGE, "illegal": ILLEGAL}.get(mode) or legal_answer(body["messages"])
                completion = {"id": f"cmpl-{n}", "object": "chat.completion", "created": 0,
                              "model": body["model"],
                              "choices": [{"index": 0, "finish_reason": "stop",
                                           "message": {"role": "assistant", "content": text}}],
                              "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
                return self._send(200, json.dumps(completion).encode())

        return Handler


def closed_port_url() -> str:
    """A loopback URL where nothing listens (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


MESSAGES = [{"role": "system", "content": "You play."},
            {"role": "user", "content": "Observation:\nboard\n\nLegal actions:\nleft\nright\n\nYour answer:"}]
SAMPLING = SamplingParams(temperature=0.7, top_p=0.9, max_tokens=48)


def complete(endpoint: OpenAIEndpoint, seed: int | None = 7) -> str:
    async def run() -> str:
        client = ChatClient(endpoint)
        try:
            return await client.complete(MESSAGES, SAMPLING, seed=seed)
        finally:
            await client.aclose()

    return asyncio.run(run())


def test_request_carries_the_exact_messages_model_and_sampling():
    with EndpointServer() as server:
        assert complete(server.endpoint()) == "INTENTION: EXPLORE take the first option\nACTION: left"
    (request,) = server.requests
    assert request["path"] == "/v1/chat/completions"
    body = request["body"]
    assert body["messages"] == MESSAGES and body["model"] == MODEL
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["seed"]) == (0.7, 0.9, 48, 7)


def test_api_key_comes_only_from_the_named_variable(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "ambient-secret-must-not-leak")
    monkeypatch.setenv("COPLAY_TEST_ENDPOINT_KEY", "named-key")
    with EndpointServer() as server:
        complete(server.endpoint())
        complete(server.endpoint(api_key_env="COPLAY_TEST_ENDPOINT_KEY"))
    assert [r["authorization"] for r in server.requests] == [f"Bearer {NO_API_KEY}", "Bearer named-key"]


def test_a_named_but_unset_key_variable_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("COPLAY_TEST_MISSING_KEY", raising=False)
    endpoint = OpenAIEndpoint(base_url=closed_port_url(), model=MODEL, api_key_env="COPLAY_TEST_MISSING_KEY")
    with pytest.raises(ValueError, match="COPLAY_TEST_MISSING_KEY"):
        complete(endpoint)


@pytest.mark.parametrize("mode", ["error500", "not_json"])
def test_http_errors_and_malformed_bodies_raise_endpoint_error(mode):
    with EndpointServer(lambda n: mode) as server, pytest.raises(EndpointError, match=server.base_url):
        complete(server.endpoint())


def test_connection_refused_raises_endpoint_error():
    with pytest.raises(EndpointError, match="Connection"):
        complete(OpenAIEndpoint(base_url=closed_port_url(), model=MODEL, timeout_s=2.0, max_retries=0))


def test_transient_500_is_retried_within_the_bound():
    with EndpointServer(lambda n: "error500" if n == 0 else "legal") as server:
        assert complete(server.endpoint(max_retries=1)).endswith("ACTION: left")
        assert len(server.requests) == 2
    with EndpointServer(lambda n: "error500") as server:
        with pytest.raises(EndpointError):
            complete(server.endpoint(max_retries=2))
        assert len(server.requests) == 3  # one try + two retries, then it gives up


def test_a_slow_endpoint_times_out_in_bounded_time():
    with EndpointServer(lambda n: "slow", slow_s=3.0) as server:
        started = time.perf_counter()
        with pytest.raises(EndpointError, match="Timeout"):
            complete(server.endpoint(timeout_s=0.3, max_retries=0))
        assert time.perf_counter() - started < 2.0
