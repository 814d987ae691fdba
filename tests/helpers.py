"""Helpers shared by several test folders (imported as `tests.helpers`, never from a conftest): the tiny loop
run's settings, a scripted engine for deterministic decision-agent tests, the engine settings and LoRA shape
of the engine tests, and the exactly-once audit of a run folder.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from coplay.config import EngineConfig, LoraSpec
from coplay.engines.base import Completion, Engine, GenerationRequest
from coplay.runs import RunDir
from coplay.types import read_shard

REPO = Path(__file__).resolve().parents[1]
DEMO_CONFIG = REPO / "launch" / "configs" / "demo-2048.yaml"
LORA = LoraSpec(r=8, alpha=16, dropout=0.0)


def tiny_loop_overrides(out_dir: str, cache_dir: str) -> list[str]:
    """A co-evolution run small enough for CI on top of the demo's settings (`launch/configs/demo-2048.yaml`,
    passed first as `--config`-equivalent by `tiny_loop_config`): 2048, tiny model, vLLM CPU engine,
    DeepSpeed ZeRO-2, with shorter episodes and a longer SFT than the demo."""
    return [
        f"run.out_dir={out_dir}", "run.name=loop-test", f"model.tiny.cache_dir={cache_dir}",
        "rollout.max_steps=6", "rollout.retrieve_every=2",
        "sampling.max_tokens={act: 24, contract: 96}",
        "sft.episodes_per_game=16", "sft.max_steps=40", "sft.max_examples_per_adapter=96", "sft.epochs=8",
        "learner.lr=1e-3", "learner.micro_batch_size=8", "loop.iterations=2", "eval.every=0",
        "skill_bank.group_size=4", "logging.console=false",
        # a 16-position probe, built once per test session into the session's tiny-model cache
        "probe.positions=16", f"probe.cache_dir={cache_dir}/probes",
    ]


def tiny_loop_config(out_dir: str, cache_dir: str, *extra: str):
    """The demo config with `tiny_loop_overrides` and `extra` overrides."""
    from coplay.config import load_config

    return load_config(DEMO_CONFIG, [*tiny_loop_overrides(out_dir, cache_dir), *extra])


def engine_config(backend: str) -> EngineConfig:
    """Small engine settings that fit the 2-core CPU test machine."""
    return EngineConfig(backend=backend, max_loras=4, max_lora_rank=8, max_model_len=1024, max_num_seqs=8,
                        cpu_kvcache_gib=1, dtype="float32", enforce_eager=True)


Answer = Callable[[GenerationRequest, str], str]


def scripted_logprob(token_id: int, position: int) -> float:
    """The log-prob the scripted engine reports: distinct per token and position, so tests see them
    carried."""
    return -((token_id * 31 + position) % 97 + 1) / 50.0


class ScriptedEngine(Engine):
    """An `Engine` whose completions are given texts (stand-ins for the model's choices), tokenized by the
    real tokenizer and ended with its EOS token. `answer(request, decoded prompt)` picks the text. Records
    every request and the largest number of requests in flight at once (the runners' batching)."""

    backend = "scripted"

    def __init__(self, tokenizer, answer: Answer, delay_s: float = 0.0) -> None:
        self._tokenizer = tokenizer
        self.answer = answer
        self.delay_s = delay_s
        self.requests: list[GenerationRequest] = []
        self.prompts: list[str] = []
        self.active = 0
        self.max_in_flight = 0
        self._adapters: dict[str, str] = {}

    @property
    def tokenizer(self):
        return self._tokenizer

    def _complete(self, request: GenerationRequest) -> Completion:
        prompt = self._tokenizer.decode(request.prompt_ids)
        self.requests.append(request)
        self.prompts.append(prompt)
        text = self.answer(request, prompt)
        ids = self._tokenizer(text, add_special_tokens=False)["input_ids"] + [self._tokenizer.eos_token_id]
        finish = "stop"
        if len(ids) > request.sampling.max_tokens:
            ids, finish = ids[: request.sampling.max_tokens], "length"
        return Completion(token_ids=ids, logprobs=[scripted_logprob(t, i) for i, t in enumerate(ids)],
                          text=self._tokenizer.decode(ids, skip_special_tokens=True), finish_reason=finish,
                          adapter=request.adapter, request_id=request.request_id)

    def generate(self, requests: list[GenerationRequest]) -> list[Completion]:
        return [self._complete(r) for r in requests]

    async def agenerate(self, request: GenerationRequest) -> Completion:
        self.active += 1
        self.max_in_flight = max(self.max_in_flight, self.active)
        try:
            await asyncio.sleep(self.delay_s)  # let other episodes submit, as a batching engine would
            return self._complete(request)
        finally:
            self.active -= 1

    def score(self, prompt_ids: list[int], completion_ids: list[int], adapter: str | None) -> list[float]:
        return [scripted_logprob(t, i) for i, t in enumerate(completion_ids)]

    def load_adapter(self, name: str, version: int, files: dict[str, bytes], sha256: str) -> str:
        self._adapters[f"{name}@v{version}"] = sha256
        return sha256

    def retire_adapter(self, engine_name: str) -> None:
        self._adapters.pop(engine_name, None)

    def loaded_adapters(self) -> list[str]:
        return sorted(self._adapters)

    def in_flight(self, engine_name: str) -> int:
        return 0

    def close(self) -> None:
        self._adapters.clear()


def planned_episodes(cfg, iteration: int) -> set[str]:
    from coplay.driver.plans import start_seeds

    return {f"it{iteration}-2048-s{seed}-g{g}" for seed in start_seeds(cfg, iteration, 0)
            for g in range(cfg.rollout.group_size)}


def assert_every_episode_once(cfg, run: RunDir) -> None:
    """Shards: every planned episode of every iteration exactly once. Training: the last record of each
    learner step trained exactly its iteration's episodes."""
    records = run.read_metrics()
    for k in range(1, cfg.loop.iterations + 1):
        episodes = [t.episode_id for p in sorted(run.shards.glob(f"it{k:05d}-*.msgpack"))
                    for t in read_shard(p).trajectories]
        assert sorted(episodes) == sorted(planned_episodes(cfg, k)), f"iteration {k} shards: {episodes}"
    trained: dict[int, list[str]] = {}
    for record in records:
        for part in (record.get("train"), record.get("final_train")):
            if part and "trained_iteration" in part:
                trained[part["trained_iteration"]] = part["trained_episodes"]
    assert sorted(trained) == list(range(1, cfg.loop.iterations + 1))
    for k, episodes in trained.items():
        assert sorted(episodes) == sorted(planned_episodes(cfg, k)), f"learner step {k} trained {episodes}"


# ------------------------------------------------------------------------------------------ sockets

def listening_sockets(root_pid: int | None = None) -> list[tuple[int, str, str, int]]:
    """(pid, process name, ip, port) of every listening inet socket of a process (default this one) and its
    descendants: what a local run exposes."""
    import psutil

    root = psutil.Process(root_pid)
    found = []
    for proc in [root, *root.children(recursive=True)]:
        try:
            name = proc.name()
            for conn in proc.net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN:
                    found.append((proc.pid, name, conn.laddr.ip, conn.laddr.port))
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            continue
    return found


def is_loopback(ip: str) -> bool:
    """127.0.0.0/8, ::1, or an IPv4-mapped loopback address (a scope suffix `%lo` is ignored)."""
    import ipaddress

    address = ipaddress.ip_address(ip.split("%")[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def bank_generate(engine, cap: int, temperature: float = 1.0):
    """A bank caller's `generate` over `engine` (base model); prompt i's sample j is seeded `seeds[i] + j`
    when seeds are given (the concurrent calls' content seeds), else `17 i + j`."""
    from coplay.agent.prompts import encode
    from coplay.engines.base import GenerationRequest, SamplingParams
    from coplay.skills.caller import Completion

    def generate(adapter, prompts, n, max_tokens, regex=None, seeds=None):
        requests = [GenerationRequest(encode(engine.tokenizer, p), None,
                                      SamplingParams(temperature=temperature,
                                                     max_tokens=min(max_tokens, cap)),
                                      seed=(seeds[i] if seeds else 17 * i) + j, regex=regex)
                    for i, p in enumerate(prompts) for j in range(n)]
        outs = engine.generate(requests)
        return [[Completion(text=o.text, prompt_ids=list(r.prompt_ids), completion_ids=list(o.token_ids),
                            logprobs=list(o.logprobs), temperature=temperature, finish_reason=o.finish_reason)
                 for r, o in zip(requests[i * n:(i + 1) * n], outs[i * n:(i + 1) * n], strict=True)]
                for i in range(len(prompts))]

    return generate


def write_act_shards(run_root: Path, game: str, seed: int, observation: str,
                     actions_by_iteration: dict[int, list[str]], bot_action: str) -> None:
    """A run folder's shards for the choice benchmarks: per iteration one single-step episode per action, each
    sampled by `act` on `observation`, plus one step a bot played there (no act sample: not a decision of the
    policy, so it must not be counted)."""
    from coplay.types import Sample, Shard, Step, Trajectory, encode_shard

    (run_root / "shards").mkdir(exist_ok=True)
    for iteration, actions in actions_by_iteration.items():
        trajectories = []
        for i, action in enumerate(actions):
            sample = Sample("act", 0, [1], [2], [-0.5], f"g{i}", sample_id=f"s{i}")
            step = Step(t=0, observation=observation, action=action, reward=0.0, score=0.0,
                        sample_ids=[f"s{i}"])
            trajectories.append(Trajectory(f"it{iteration}-e{i}", game, "player_0", "player", seed,
                                           steps=[step], samples=[sample]))
        bot_step = Step(t=0, observation=observation, action=bot_action, reward=0.0, score=0.0)
        trajectories.append(Trajectory("bot", game, "player_0", "player", seed, steps=[bot_step]))
        shard = Shard(f"it{iteration:05d}-w000-0000", iteration, 0, trajectories)
        (run_root / "shards" / f"it{iteration:05d}-w000-0000.msgpack").write_bytes(encode_shard(shard))
