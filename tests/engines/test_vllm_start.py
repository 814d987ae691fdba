"""`engine.cpu_start` (coplay/engines/vllm_engine.py): the lean start, which runs vLLM's model worker inside
its engine core process, serves what vLLM's own start serves. The session's `vllm_engine` starts lean (the
default); this module starts one more engine the old way and sends both the same requests: greedy and
seeded sampled, with and without an adapter. A lean start that quietly fell back to vLLM's start would pass
that, so the process trees are checked too."""

from __future__ import annotations

import pytest

from coplay.engines.base import GenerationRequest, SamplingParams
from tests.helpers import engine_config

LOGPROB_TOL = 1e-4


@pytest.fixture(scope="module")
def vllm_start_engine(tiny_model_config, bundles, cpu_lora_marker):
    """An engine on vLLM's own start (`engine.cpu_start: vllm`), with act@v1 loaded."""
    pytest.importorskip("vllm")
    from coplay.engines.factory import make_engine

    engine = make_engine(tiny_model_config, engine_config("vllm").model_copy(update={"cpu_start": "vllm"}))
    files, sha = bundles["act@v1"]
    engine.load_adapter("act", 1, files, sha)
    yield engine
    engine.close()


def _core_children(engine) -> list[str]:
    """Names of the processes vLLM's engine core process started (its model worker, if it has one)."""
    import psutil

    procs = engine._llm.engine_core.resources.engine_manager.processes
    assert len(procs) == 1, "one engine core per engine"
    return [child.name() for child in psutil.Process(procs[0].pid).children(recursive=True)]


def test_lean_start_runs_the_model_in_the_engine_core(vllm_engine, vllm_start_engine):
    if not vllm_engine.on_cpu:
        pytest.skip("cpu_start applies to vLLM's CPU build only")
    assert vllm_engine._engine_cfg.cpu_start == "lean"
    assert not any("Worker" in name for name in _core_children(vllm_engine))
    assert any("Worker" in name for name in _core_children(vllm_start_engine))


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_lean_start_serves_the_same_tokens(vllm_engine, vllm_start_engine, prompts, temperature):
    sampling = SamplingParams(temperature=temperature, max_tokens=16)
    requests = [GenerationRequest(p, adapter, sampling, seed=100 + i, request_id=f"r{i}-{adapter}")
                for i, p in enumerate(prompts) for adapter in (None, "act@v1")]
    lean = vllm_engine.generate(requests)
    old = vllm_start_engine.generate(requests)
    for request, a, b in zip(requests, lean, old, strict=True):
        assert a.token_ids == b.token_ids, request.request_id
        assert a.logprobs == pytest.approx(b.logprobs, abs=LOGPROB_TOL), request.request_id
        assert (a.text, a.finish_reason) == (b.text, b.finish_reason)
    by_adapter = [[c.token_ids for r, c in zip(requests, lean, strict=True) if r.adapter == name]
                  for name in (None, "act@v1")]
    assert by_adapter[0] != by_adapter[1], "the adapter must change the answers"


def test_threads_bind_all_gives_the_model_every_core_of_the_process(tiny_model_config, cpu_lora_marker,
                                                                     prompts):
    """`engine.cpu_threads_bind: all`: the model's OpenMP threads are pinned one to each CPU this process may
    use (vLLM's automatic binding leaves one core out), the setting does not outlive the start in this
    process's environment, and the engine serves."""
    import os

    import psutil

    pytest.importorskip("vllm")
    from coplay.engines.factory import make_engine

    before = os.environ.get("VLLM_CPU_OMP_THREADS_BIND")
    cfg = engine_config("vllm").model_copy(update={"cpu_threads_bind": "all"})
    engine = make_engine(tiny_model_config, cfg)
    try:
        if not engine.on_cpu:
            pytest.skip("cpu_threads_bind applies to vLLM's CPU build only")
        assert os.environ.get("VLLM_CPU_OMP_THREADS_BIND") == before
        procs = engine._llm.engine_core.resources.engine_manager.processes
        threads = psutil.Process(procs[0].pid).threads()
        pinned = {cpu for t in threads for cpu in os.sched_getaffinity(t.id)
                  if len(os.sched_getaffinity(t.id)) == 1}
        assert pinned == os.sched_getaffinity(0)
        greedy = SamplingParams(temperature=0.0, max_tokens=4)
        out = engine.generate([GenerationRequest(prompts[0], None, greedy, seed=1, request_id="bind")])
        assert out[0].token_ids
    finally:
        engine.close()
