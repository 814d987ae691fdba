"""The bank's model calls as futures, answered from a content-keyed cache (issue 35 item 3).

Why: a bank update asks three rounds (segment, curator, contract) of a handful of prompts each. On the old
path every round was one blocking call to one rollout worker, so an update cost three round trips through
an engine that is busy with rollouts, each as long as its slowest answer, one after another. Here:
- a round's prompts go out as futures over every worker at once (`Backend.submit`), and are waited for only
  when a round needs them (`ConcurrentCaller.complete`);
- each prompt's sampling seed is derived from its content (`prompt_seed`: run seed, engine adapter name,
  the prompt, n, max_tokens, constraint), never from call order, chunking or completion order, so the same
  prompt gets the same answers however the calls were split, batched or raced;
- that makes the answers a pure function of the key, so they are cached (`calls.cache_size` groups): a
  prompt asked again (a duplicate segment, a curator or contract prompt that `prefetch` sent ahead,
  `coplay.skills.update.speculate`) is answered from the cache and never sent twice. Every answer handed
  out is a fresh `Sample`, so the GRPO groups and counts are what a fresh call would give.
No ray, no torch: the SkillBankActor supplies a `Backend` that calls the workers (`ray` futures); tests and
benchmarks supply in-process ones.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter, OrderedDict
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from coplay.skills.caller import CallerError, CallUsage, ChatMessages, Completion, group_samples
from coplay.types import Sample

SEED_MODULUS = 2**31 - 1  # engines take a non-negative 32-bit seed; per-sample seeds add j < n to it
Answer = list["Completion | str"]


class Backend(Protocol):
    """Where the prompts go. `submit` must not block on the answers; `wait` returns, for one handle, the n
    completions of each of its prompts in order. `seeds[i]` is prompt i's seed; sample j uses seeds[i] + j."""

    def submit(self, adapter: str, prompts: list[ChatMessages], seeds: list[int], n: int, max_tokens: int,
               regex: str | None) -> Any: ...

    def wait(self, handle: Any) -> list[Answer]: ...

    def ready(self, handle: Any) -> bool: ...


def prompt_key(engine_adapter: str, prompt: ChatMessages, n: int, max_tokens: int, regex: str | None) -> str:
    """The cache key of one prompt: everything its answers depend on (the engine name carries the adapter's
    version, so a retrained adapter never answers from an older one's cache)."""
    text = json.dumps([engine_adapter, prompt, n, max_tokens, regex], ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def prompt_seed(run_seed: int, key: str) -> int:
    """Prompt i's sampling seed: from the run seed and its key only (see the module docstring)."""
    digest = hashlib.sha256(f"{run_seed}/{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % SEED_MODULUS


@dataclass
class _Flight:
    """One submitted call: its handle, adapter, the keys of its prompts (in order) and when it left."""

    handle: Any
    adapter: str
    keys: list[str]
    sent: float
    speculative: bool


class ConcurrentCaller:
    """A `ModelCaller` (`complete`) with `prefetch` (send now, answer later) over a `Backend`.

    `engine_names`: adapter -> engine name (None: the base model); it is part of every key. `usage` per
    adapter counts what reached the engines (calls, prompts, completions, tokens in and out) and the seconds a
    round waited; `cached` counts prompts answered without a call, `speculative` prompts sent ahead by
    `prefetch` and `unused` those of them no round asked for."""

    def __init__(self, backend: Backend, engine_names: dict[str, str | None], run_seed: int,
                 cache: OrderedDict[str, Answer] | None = None, cache_size: int = 256,
                 chunk_prompts: int = 0) -> None:
        self.backend = backend
        self.engine_names = dict(engine_names)
        self.run_seed = run_seed
        self.cache: OrderedDict[str, Answer] = cache if cache is not None else OrderedDict()
        self.cache_size = cache_size
        self.chunk_prompts = chunk_prompts
        self.flights: list[_Flight] = []
        self.in_flight: dict[str, _Flight] = {}
        self.asked: set[str] = set()  # keys a round has asked for (the rest of the prefetched are unused)
        self.prefetched: dict[str, str] = {}  # key -> adapter, of prompts sent ahead by `prefetch`
        self.usage: dict[str, CallUsage] = {}
        self.calls: dict[str, int] = {}
        self.counts: Counter[tuple[str, str]] = Counter()  # (adapter, cached | speculative | ...)

    # ------------------------------------------------------------------------------------------ sending
    def _key(self, adapter: str, prompt: ChatMessages, n: int, max_tokens: int, regex: str | None) -> str:
        return prompt_key(self.engine_names.get(adapter) or "", prompt, n, max_tokens, regex)

    def _send(self, adapter: str, prompts: list[ChatMessages], n: int, max_tokens: int, regex: str | None,
              speculative: bool) -> list[str]:
        """Submit every prompt neither cached nor in flight (once, even if listed twice); returns all keys."""
        keys = [self._key(adapter, p, n, max_tokens, regex) for p in prompts]
        todo: dict[str, ChatMessages] = {}
        for key, prompt in zip(keys, prompts, strict=True):
            if key not in self.cache and key not in self.in_flight:
                todo.setdefault(key, prompt)
        if todo:
            size = self.chunk_prompts or len(todo)
            items = list(todo.items())
            for start in range(0, len(items), size):
                chunk = items[start:start + size]
                handle = self.backend.submit(adapter, [p for _, p in chunk],
                                             [prompt_seed(self.run_seed, k) for k, _ in chunk], n, max_tokens,
                                             regex)
                flight = _Flight(handle, adapter, [k for k, _ in chunk], time.perf_counter(), speculative)
                self.flights.append(flight)
                for key, _ in chunk:
                    self.in_flight[key] = flight
        return keys

    def prefetch(self, adapter: str, prompts: list[ChatMessages], n: int, max_tokens: int,
                 regex: str | None = None) -> int:
        """Send prompts a later round will probably ask; returns how many went out (new ones only)."""
        known = set(self.cache) | set(self.in_flight)
        keys = self._send(adapter, prompts, n, max_tokens, regex, speculative=True)
        fresh = {k for k in keys if k not in known}
        sent = len(fresh)
        self.prefetched.update((k, adapter) for k in fresh)
        self.counts[(adapter, "speculative")] += sent
        return sent

    # ----------------------------------------------------------------------------------------- receiving
    def _land(self, flight: _Flight, since: float | None) -> None:
        """Wait for one call and cache its answers; `since`: when the round started waiting (its seconds are
        counted up to the answers' arrival), None for calls landed without waiting (`finish`)."""
        groups = self.backend.wait(flight.handle)
        waited = time.perf_counter() - since if since is not None else 0.0
        if len(groups) != len(flight.keys):
            raise CallerError(f"{flight.adapter}: backend returned {len(groups)} groups for "
                              f"{len(flight.keys)} prompts")
        self.usage.setdefault(flight.adapter, CallUsage()).add(groups, waited)
        self.calls[flight.adapter] = self.calls.get(flight.adapter, 0) + sum(len(g) for g in groups)
        for key, group in zip(flight.keys, groups, strict=True):
            self.cache[key] = list(group)
            self.cache.move_to_end(key)
            self.in_flight.pop(key, None)
        self.flights.remove(flight)

    def _trim(self, keep: set[str]) -> None:
        """Drop the least recently used answers beyond `cache_size`, never those in `keep` nor prefetched
        ones no round has asked for yet."""
        keep = keep | (set(self.prefetched) - self.asked)
        while len(self.cache) > self.cache_size:
            oldest = next((k for k in self.cache if k not in keep), None)
            if oldest is None:
                return
            del self.cache[oldest]

    def complete(self, adapter: str, prompts: list[ChatMessages], n: int, max_tokens: int,
                 regex: str | None = None) -> list[list[Sample]]:
        """n Samples per prompt in prompt order (the `ModelCaller` contract): from the cache where the key
        is there, else from the call that carries it (sent now if nobody sent it yet)."""
        if not prompts:
            return []
        started = time.perf_counter()
        known = set(self.cache) | set(self.in_flight)
        keys = self._send(adapter, prompts, n, max_tokens, regex, speculative=False)
        seen: set[str] = set()
        for key in keys:  # each prompt is sent now, or was sent ahead (prefetch_used), or is `cached`
            if key in self.prefetched and key not in self.asked and key not in seen:
                self.counts[(adapter, "prefetch_used")] += 1
            elif key in known or key in seen:
                self.counts[(adapter, "cached")] += 1
            seen.add(key)
        waiting = {id(self.in_flight[k]): self.in_flight[k] for k in keys if k in self.in_flight}
        for flight in waiting.values():
            self._land(flight, started)
        self.asked.update(keys)
        out = [group_samples(adapter, self.cache[key], n, regex) for key in keys]
        self._trim(set(keys))
        return out

    def finish(self) -> None:
        """End of an update: land the prefetched calls that are done (their cost is counted), leave the rest
        running (never waited for) and count the prefetched prompts no round asked for as `unused`."""
        for flight in list(self.flights):
            if self.backend.ready(flight.handle):
                self._land(flight, None)
        for key, adapter in self.prefetched.items():
            if key not in self.asked:
                self.counts[(adapter, "unused")] += 1
                self.in_flight.pop(key, None)
        self.prefetched = {}
        self.flights = [f for f in self.flights if any(k in self.in_flight for k in f.keys)]
        self._trim(set())

    def usage_json(self) -> dict[str, dict[str, float]]:
        """Per adapter: `CallUsage` plus the prompt counts `cached`, `speculative`, `prefetch_used` and
        `unused` (see the class docstring)."""
        out: dict[str, dict[str, float]] = {}
        for adapter in sorted(set(self.usage) | {a for a, _ in self.counts}):
            row: dict[str, float] = asdict(self.usage.get(adapter, CallUsage()))
            for part in ("cached", "speculative", "prefetch_used", "unused"):
                row[part] = self.counts[(adapter, part)]
            out[adapter] = row
        return out

