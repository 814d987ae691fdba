"""vLLM's known notices (`coplay.engines.vllm_notices`): dropped from the console with a reason each, and
only those; a verbose run keeps them."""

from __future__ import annotations

import logging

import pytest

from coplay.engines import vllm_notices


@pytest.fixture
def vllm_console(monkeypatch):
    """What reaches a handler on vLLM's root logger, and a clean install state around the test."""
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    root = logging.getLogger("vllm")
    handler = Keep(level=logging.WARNING)
    root.addHandler(handler)
    monkeypatch.setattr(vllm_notices, "_installed", None)
    names = {name for name, _ in vllm_notices.KNOWN.values()}
    before = {name: list(logging.getLogger(name).filters) for name in names}
    yield records
    root.removeHandler(handler)
    for name, filters in before.items():
        logging.getLogger(name).filters[:] = filters


def test_known_notices_are_dropped_and_counted_and_other_warnings_still_reach_the_console(
        vllm_console, monkeypatch):
    monkeypatch.setenv(vllm_notices.ENV, "filter")
    notices = vllm_notices.install()
    assert vllm_notices.install() is notices  # idempotent: one filter, one count
    logging.getLogger("vllm.engine.arg_utils").warning(
        "This model does not officially support disabling chunked prefill. Disabling this manually ...")
    logging.getLogger("vllm.v1.worker.cpu_worker").warning("%s is not found in LD_PRELOAD. ...", "libiomp")
    logging.getLogger("vllm.platforms.cpu").warning("KV cache is too small for max_model_len=%d", 4096)
    assert vllm_console == ["KV cache is too small for max_model_len=4096"]
    assert notices is not None and notices.dropped == 2
    assert all(reason for _, reason in vllm_notices.KNOWN.values())  # every filtered notice says why


def test_a_verbose_run_keeps_every_notice(vllm_console, monkeypatch):
    monkeypatch.delenv(vllm_notices.ENV, raising=False)
    assert vllm_notices.install() is None
    logging.getLogger("vllm.platforms.cpu").warning("Triton is not installed. triton-cpu is expected.")
    assert vllm_console == ["Triton is not installed. triton-cpu is expected."]
