"""The `hf` backend: transformers + peft, batched generation over several named LoRA adapters at once.

For machines where vLLM cannot run, and the reference in parity tests. One forward per decoding step for
the whole batch (left-padded, KV cache), each row with its own adapter (PEFT mixed-adapter batches), its own
temperature, top-p and seeded generator. Log-probs are taken under the distribution each token is drawn
from, computed the way vLLM's sampler does it (temperature, then top-p by ascending cumulative mass).
Concurrent `agenerate` calls are collected by a batching thread into one `generate`.

Imports torch/transformers/peft (lazily, in the constructor); never vllm.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import secrets
import threading
from typing import Any

from coplay.config import EngineConfig, ModelConfig
from coplay.engines.adapters import (
    ADAPTER_WEIGHTS,
    AdapterEntry,
    AdapterRegistry,
    check_fits_base,
    verify_bundle,
)
from coplay.engines.base import AdapterRejected, Completion, Engine, GenerationRequest, engine_name
from coplay.engines.token_masks import TokenMasks, mask_logits

_Queued = tuple[GenerationRequest, AdapterEntry | None, concurrent.futures.Future]
_BASE = "__base__"  # PEFT's name for "no adapter" in a mixed-adapter batch
_BATCH_WINDOW_S = 0.002  # how long the batching thread waits for more concurrent requests


def resolve_dtype(model_cfg: ModelConfig, engine_cfg: EngineConfig, on_gpu: bool) -> str:
    """engine.dtype, else model.dtype, else float32 on CPU (exact parity) and bfloat16 on GPU; on a CPU
    without native bfloat16, bfloat16 runs as float32 unless `model.cpu_bf16` is `keep`."""
    from coplay.models.precision import cpu_dtype

    for name in (engine_cfg.dtype, model_cfg.dtype):
        if name != "auto":
            return name if on_gpu else cpu_dtype(name, model_cfg.cpu_bf16, "engine.dtype")
    return "bfloat16" if on_gpu else "float32"


def sampling_logprobs(logits: Any, temperature: Any, top_p: Any) -> Any:
    """Log-probs [rows, vocab] of the sampling distribution: logits / T (T=0 rows use 1), then top-p.

    Top-p as in vLLM: sort ascending, drop tokens whose cumulative mass is <= 1 - p (the top token stays).
    """
    import torch

    scaled = logits.float() / torch.where(temperature > 0, temperature, 1.0).unsqueeze(1)
    if bool((top_p < 1.0).any()):
        ordered, order = scaled.sort(dim=-1, descending=False)
        cumulative = ordered.softmax(dim=-1).cumsum(dim=-1)
        drop = cumulative <= (1.0 - top_p).unsqueeze(1)
        drop[:, -1] = False
        ordered = ordered.masked_fill(drop, float("-inf"))
        scaled = torch.empty_like(scaled).scatter_(-1, order, ordered)
    return scaled.log_softmax(dim=-1)


class HfEngine(Engine):
    """transformers + peft engine. Thread-safe: one model call at a time."""

    backend = "hf"

    def __init__(self, model_cfg: ModelConfig, engine_cfg: EngineConfig, device: str | None = None) -> None:
        import torch

        from coplay.models.loading import load_base_model

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = resolve_dtype(model_cfg, engine_cfg, self.device != "cpu")
        self._model, self._tokenizer = load_base_model(model_cfg.model_copy(update={"dtype": dtype}),
                                                       self.device)
        self._base_shapes = {name: tuple(module.weight.shape) for name, module in self._model.named_modules()
                             if isinstance(module, torch.nn.Linear)}
        self._engine_cfg = engine_cfg
        self._registry = AdapterRegistry()
        self._model_lock = threading.RLock()
        self._next_internal_id = 1
        self._queue: queue.Queue[_Queued | None] = queue.Queue()
        self._batcher: threading.Thread | None = None
        self._batcher_lock = threading.Lock()
        self._closed = False
        self._masks: TokenMasks | None = None

    # ----------------------------------------------------------------------------------------- interface
    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    @property
    def model(self) -> Any:
        """The underlying model (a PeftModel once an adapter is loaded). For reference computations."""
        return self._model

    def generate(self, requests: list[GenerationRequest]) -> list[Completion]:
        if not requests:
            return []
        for request in requests:
            self._check_length(request)
        entries: list[AdapterEntry | None] = []
        try:
            for request in requests:
                entries.append(self._registry.acquire(request.adapter))
            out: list[Completion] = []
            for start in range(0, len(requests), self._engine_cfg.max_num_seqs):
                stop = start + self._engine_cfg.max_num_seqs
                out.extend(self._generate_batch(requests[start:stop], entries[start:stop]))
            return out
        finally:
            for entry in entries:
                self._drop(self._registry.release(entry))

    async def agenerate(self, request: GenerationRequest) -> Completion:
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._check_length(request)
        self._ensure_batcher()
        entry = self._registry.acquire(request.adapter)  # a retirement after this waits for the request
        self._queue.put((request, entry, future))
        return await asyncio.wrap_future(future)

    def score(self, prompt_ids: list[int], completion_ids: list[int], adapter: str | None) -> list[float]:
        import torch

        table = self.logprob_table(prompt_ids, completion_ids, adapter)
        return table.gather(
            1, torch.tensor(completion_ids, device=table.device).unsqueeze(1)).squeeze(1).tolist()

    def logprob_table(self, prompt_ids: list[int], completion_ids: list[int], adapter: str | None,
                      temperature: float = 1.0, top_p: float = 1.0) -> Any:
        """Teacher-forced sampling log-probs [len(completion), vocab] at `temperature` and `top_p`."""
        import torch

        entry = self._registry.acquire(adapter)
        try:
            ids = torch.tensor([list(prompt_ids) + list(completion_ids)], device=self.device)
            with self._model_lock, torch.no_grad():
                logits = self._model(input_ids=ids, **self._adapter_kwargs([entry])).logits[0]
            rows = logits[len(prompt_ids) - 1: len(prompt_ids) - 1 + len(completion_ids)]
            n = rows.shape[0]
            return sampling_logprobs(rows, torch.full((n,), float(temperature), device=rows.device),
                                     torch.full((n,), float(top_p), device=rows.device))
        finally:
            self._drop(self._registry.release(entry))

    def load_adapter(self, name: str, version: int, files: dict[str, bytes], sha256: str) -> str:
        label, loaded = self._registry.begin_load(name, version, sha256)
        if loaded:
            return sha256
        try:
            verified = verify_bundle(files, sha256, self._engine_cfg.max_lora_rank, label)
            check_fits_base(verified, self._base_shapes, label)
            internal = self._attach(verified.config, verified.files[ADAPTER_WEIGHTS], label)
        except BaseException:
            self._registry.abort_load(label)
            raise
        self._registry.finish_load(label, internal)
        return verified.sha256

    def retire_adapter(self, engine_name: str) -> None:
        self._drop(self._registry.retire(engine_name))

    def loaded_adapters(self) -> list[str]:
        return self._registry.active()

    def in_flight(self, engine_name: str) -> int:
        return self._registry.in_flight(engine_name)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._batcher is not None:
            self._queue.put(None)
            self._batcher.join()

    # ------------------------------------------------------------------------------------------ adapters
    def _attach(self, config: dict[str, Any], weights: bytes, label: str) -> str:
        """Add the adapter to the PeftModel under a fresh internal name; AdapterRejected if it does not
        fit."""
        from peft import PeftConfig, PeftModel, get_peft_model, set_peft_model_state_dict
        from safetensors.torch import load as load_safetensors

        try:
            lora_config = PeftConfig.from_peft_type(**{**config, "inference_mode": True})
            state = load_safetensors(weights)
        except (TypeError, ValueError) as err:
            raise AdapterRejected(f"adapter {label}: cannot be read by peft ({err})") from err
        with self._model_lock:
            internal = f"adapter{self._next_internal_id}"
            self._next_internal_id += 1
            try:
                if isinstance(self._model, PeftModel):
                    self._model.add_adapter(internal, lora_config)
                else:
                    self._model = get_peft_model(self._model, lora_config, adapter_name=internal)
            except (ValueError, KeyError) as err:
                raise AdapterRejected(f"adapter {label}: does not fit the base model ({err})") from err
            expected = {k for k in self._model.state_dict() if f".{internal}." in k and "lora_" in k}
            state = {k: v.to(self.device) for k, v in state.items()}
            try:
                result = set_peft_model_state_dict(self._model, state, adapter_name=internal)
            except RuntimeError as err:  # tensor shapes that do not fit the base model's layers
                self._model.delete_adapter(internal)
                raise AdapterRejected(f"adapter {label}: tensors do not fit the base model ({err})") from err
            missing = sorted(k for k in result.missing_keys if k in expected)
            if result.unexpected_keys or missing or not expected:
                self._model.delete_adapter(internal)
                raise AdapterRejected(f"adapter {label}: tensors do not match the base model "
                                      f"(unexpected {list(result.unexpected_keys)[:3]}, "
                                      f"missing {missing[:3]})")
            self._model.eval()
            for param in self._model.parameters():
                param.requires_grad_(False)
        return internal

    def _drop(self, entry: AdapterEntry | None) -> None:
        if entry is not None:
            with self._model_lock:
                self._model.delete_adapter(entry.handle)

    def _adapter_kwargs(self, entries: list[AdapterEntry | None]) -> dict[str, Any]:
        from peft import PeftModel

        if not isinstance(self._model, PeftModel):
            return {}
        return {"adapter_names": [e.handle if e is not None else _BASE for e in entries]}

    # ------------------------------------------------------------------------------------------ decoding
    def _generate_batch(self, requests: list[GenerationRequest],
                        entries: list[AdapterEntry | None]) -> list[Completion]:
        import torch

        rows, device = len(requests), self.device
        width = max(len(r.prompt_ids) for r in requests)
        pad_id = self._tokenizer.pad_token_id
        input_ids = torch.full((rows, width), pad_id, dtype=torch.long, device=device)
        mask = torch.zeros((rows, width), dtype=torch.long, device=device)
        for i, request in enumerate(requests):
            input_ids[i, width - len(request.prompt_ids):] = torch.tensor(request.prompt_ids, device=device)
            mask[i, width - len(request.prompt_ids):] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        temperature = torch.tensor([r.sampling.temperature for r in requests], device=device)
        top_p = torch.tensor([r.sampling.top_p for r in requests], device=device)
        generators = []
        for request in requests:
            seed = request.effective_seed
            generators.append(torch.Generator(device=device).manual_seed(
                seed if seed is not None else secrets.randbits(63)))
        stops = [{self._tokenizer.eos_token_id, *r.sampling.stop_token_ids} for r in requests]
        matchers = [self._token_masks().matcher(r.regex) if r.regex else None for r in requests]
        bitmask = self._token_masks().allocate(rows) if any(matchers) else None
        tokens: list[list[int]] = [[] for _ in requests]
        logprobs: list[list[float]] = [[] for _ in requests]
        finish = [""] * rows
        adapter_kwargs = self._adapter_kwargs(entries)
        past, step_ids = None, input_ids
        with self._model_lock, torch.no_grad():
            for _ in range(max(self._budget(r) for r in requests)):
                out = self._model(input_ids=step_ids, attention_mask=mask, position_ids=positions,
                                  past_key_values=past, use_cache=True, **adapter_kwargs)
                past = out.past_key_values
                logits = out.logits[:, -1, :].float()
                if bitmask is not None:  # constrained rows: the masked distribution (all bits set elsewhere)
                    bitmask.fill_(-1)
                    for i, matcher in enumerate(matchers):
                        if matcher is not None and not finish[i]:
                            matcher.fill_next_token_bitmask(bitmask, i)
                    logits = mask_logits(logits, bitmask)
                table = sampling_logprobs(logits, temperature, top_p)
                chosen = []
                for i, request in enumerate(requests):
                    if finish[i]:
                        chosen.append(pad_id)
                        continue
                    if request.sampling.greedy:
                        token = int(logits[i].argmax())
                    else:
                        token = int(torch.multinomial(table[i].exp(), 1, generator=generators[i]))
                    tokens[i].append(token)
                    logprobs[i].append(float(table[i, token]))
                    if matchers[i] is not None and not matchers[i].is_terminated():
                        matchers[i].accept_token(token)
                    if token in stops[i]:
                        finish[i] = "stop"
                    elif len(tokens[i]) >= self._budget(request):
                        finish[i] = "length"
                    chosen.append(token)
                if all(finish):
                    break
                step_ids = torch.tensor(chosen, device=device).unsqueeze(1)
                mask = torch.cat([mask, torch.ones((rows, 1), dtype=mask.dtype, device=device)], dim=1)
                positions = positions[:, -1:] + 1
        return [
            Completion(token_ids=tokens[i], logprobs=logprobs[i], text=self._decode(tokens[i]),
                       finish_reason=finish[i], adapter=requests[i].adapter,
                       request_id=requests[i].request_id)
            for i in range(rows)
        ]

    def _token_masks(self) -> TokenMasks:
        """The constraint masks over this model's vocabulary (built on the first constrained request)."""
        if self._masks is None:
            vocab = int(self._model.get_output_embeddings().weight.shape[0])
            self._masks = TokenMasks(self._tokenizer, vocab)
        return self._masks

    def _check_length(self, request: GenerationRequest) -> None:
        """As vLLM: a prompt must leave room for one new token within max_model_len."""
        if len(request.prompt_ids) >= self._engine_cfg.max_model_len:
            raise ValueError(f"request {request.request_id!r}: prompt of {len(request.prompt_ids)} tokens "
                             f"does not fit engine.max_model_len={self._engine_cfg.max_model_len}")

    def _budget(self, request: GenerationRequest) -> int:
        """New tokens allowed: max_tokens, cut so prompt + completion stays within max_model_len."""
        return min(request.sampling.max_tokens, self._engine_cfg.max_model_len - len(request.prompt_ids))

    def _decode(self, token_ids: list[int]) -> str:
        return self._tokenizer.decode(token_ids, skip_special_tokens=True)

    # ------------------------------------------------------------------------------------------ batching
    def _ensure_batcher(self) -> None:
        if self._closed:
            raise RuntimeError("engine is closed")
        with self._batcher_lock:
            if self._batcher is None:
                self._batcher = threading.Thread(target=self._batch_loop, name="hf-engine-batcher",
                                                 daemon=True)
                self._batcher.start()

    def _batch_loop(self) -> None:
        """Collect concurrent requests (up to max_num_seqs) and run them as one batch."""
        while True:
            item = self._queue.get()
            if item is None:
                return
            batch = [item]
            while len(batch) < self._engine_cfg.max_num_seqs:
                try:
                    more = self._queue.get(timeout=_BATCH_WINDOW_S)
                except queue.Empty:
                    break
                if more is None:
                    self._queue.put(None)
                    break
                batch.append(more)
            self._run_batch(batch)

    def _run_batch(self, batch: list[_Queued]) -> None:
        live = []
        for request, entry, future in batch:
            if future.set_running_or_notify_cancel():
                live.append((request, entry, future))
            else:
                self._drop(self._registry.release(entry))
        if not live:
            return
        error: Exception | None = None
        try:
            completions = self._generate_batch([r for r, _, _ in live], [e for _, e, _ in live])
        except Exception as err:  # handed to every waiting caller below, never swallowed
            error = err
        finally:  # a caller that has its result no longer counts against its adapter
            for _, entry, _ in live:
                self._drop(self._registry.release(entry))
        for i, (_, _, future) in enumerate(live):
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(completions[i])


__all__ = ["HfEngine", "engine_name", "resolve_dtype", "sampling_logprobs"]
