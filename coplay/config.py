"""The one config tree of a coplay run: typed (pydantic), loaded from YAML, with dotted CLI overrides.

Every tunable of every part lives here, so a run is fully described by its resolved `config.yaml`.
Unknown keys and bad values are rejected with the key path, the value and what is allowed.
Imports only pydantic and yaml: reading a config must stay cheap.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

GAME_KEYS = ("2048", "candy_crush", "tetris", "mario", "avalon", "diplomacy")
ADAPTER_NAMES = ("act", "retrieve", "segment", "contract", "curator")
DEFAULT_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class ConfigError(ValueError):
    """A config that cannot be used: the message names the source, the key, the value and what is allowed."""


class Section(BaseModel):
    """Base of every config section: unknown keys are errors, assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


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
        description="std of the output projection's random weights; with the usual 0.02 and hidden 64 no logit "
                    "margin can exceed about 1, so no adapter could make the tiny model's answers peaked")
    cache_dir: str | None = Field(None, description="default: $XDG_CACHE_HOME/coplay or ~/.cache/coplay")


class ModelConfig(Section):
    """The frozen base model: `tiny` (built locally) or a Hugging Face id or local folder."""

    name_or_path: str = "tiny"
    trust_remote_code: bool = False
    dtype: Literal["float32", "bfloat16", "float16", "auto"] = "auto"
    tiny: TinyModelConfig = TinyModelConfig()


class LoraSpec(Section):
    """One LoRA adapter's shape (PEFT `LoraConfig`)."""

    r: int = Field(16, ge=1, le=512)
    alpha: int = Field(32, ge=1)
    dropout: float = Field(0.05, ge=0.0, lt=1.0)
    target_modules: list[str] = list(DEFAULT_LORA_TARGETS)


def known_adapter_keys(value: dict[str, Any]) -> dict[str, Any]:
    """A per-adapter mapping whose keys are all adapter names (a typo is an error, never a silent default)."""
    unknown = sorted(set(value) - set(ADAPTER_NAMES))
    if unknown:
        raise ValueError(f"unknown adapter(s) {unknown}; expected some of {list(ADAPTER_NAMES)}")
    return value


def _default_adapters() -> dict[str, LoraSpec]:
    return {name: LoraSpec() for name in ADAPTER_NAMES}


class EngineConfig(Section):
    """Inference engines (token-in/token-out) in the rollout workers."""

    backend: Literal["vllm", "hf"] = "vllm"
    max_loras: int = Field(12, ge=1, description="LoRA slots: current + previous version of each adapter + opponents")
    max_lora_rank: int = Field(16, ge=1)
    max_model_len: int = Field(8192, ge=128)
    max_num_seqs: int = Field(64, ge=1)
    enable_prefix_caching: bool = True
    enforce_eager: bool = False
    gpu_memory_utilization: float = Field(0.85, gt=0.0, le=1.0)
    cpu_kvcache_gib: int = Field(1, ge=1, description="VLLM_CPU_KVCACHE_SPACE on the CPU build")
    dtype: Literal["float32", "bfloat16", "float16", "auto"] = "auto"


class SamplingConfig(Section):
    """How completions are sampled; behaviour log-probs are taken at this temperature."""

    temperature: float = Field(1.0, ge=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    eval_temperature: float = Field(0.3, ge=0.0)
    max_tokens: dict[str, int] = {"act": 96, "retrieve": 16, "segment": 64, "contract": 256, "curator": 32}


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
    """Training start states and evaluation start states come from disjoint ranges (DESIGN.md §2)."""

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
    """Who fills the other seats in self-play (DESIGN.md §6)."""

    current: float = Field(0.5, ge=0.0)
    frozen: float = Field(0.3, ge=0.0)
    expert: float = Field(0.1, ge=0.0)
    random: float = Field(0.1, ge=0.0)
    openai: float = Field(0.0, ge=0.0)
    openai_base_url: str | None = Field(None, description="OpenAI-compatible API root incl. /v1, e.g. http://127.0.0.1:8000/v1")
    openai_model: str | None = None
    openai_api_key_env: str | None = Field(None, description="environment variable holding the API key; None: no key")
    openai_timeout_s: float = Field(30.0, gt=0.0, description="per request")
    openai_max_retries: int = Field(2, ge=0, description="on connection errors, timeouts, 408/409/429/5xx")

    @model_validator(mode="after")
    def _openai_endpoint(self) -> OpponentPoolConfig:
        missing = [key for key in ("openai_base_url", "openai_model") if not getattr(self, key)]
        if self.openai > 0 and missing:
            raise ValueError(f"openai weight {self.openai} > 0 needs {' and '.join(missing)} (an OpenAI-compatible "
                             "endpoint, e.g. openai_base_url=http://127.0.0.1:8000/v1); or set openai=0")
        if self.openai_base_url and not self.openai_base_url.startswith(("http://", "https://")):
            raise ValueError(f"openai_base_url {self.openai_base_url!r}: expected an http:// or https:// URL "
                             "ending in the API root, e.g. http://127.0.0.1:8000/v1")
        return self


class RolloutConfig(Section):
    """Episode runners in the rollout workers."""

    workers: int = Field(1, ge=1)
    group_size: int = Field(4, ge=1, description="G episodes per start state")
    start_states: int = Field(2, ge=1, description="start states per game per iteration")
    max_steps: int | None = Field(None, ge=1, description="override of each game's horizon")
    history_len: int = Field(4, ge=0)
    retrieve_every: int = Field(0, ge=0, description="K: retrieval every K steps (0 = only when due)")
    top_k_skills: int = Field(3, ge=1)
    concurrent_episodes: int = Field(16, ge=1)
    opponents: OpponentPoolConfig = OpponentPoolConfig()


class GameConfig(Section):
    """Per-game settings: reward scale for `act` and constructor arguments of the env."""

    reward_scale: float = Field(1.0, gt=0.0)
    env_kwargs: dict[str, Any] = {}


def _default_games() -> dict[str, GameConfig]:
    scales = {"2048": 0.01, "candy_crush": 0.05, "tetris": 0.1, "mario": 0.01, "avalon": 1.0, "diplomacy": 1.0}
    return {key: GameConfig(reward_scale=scales[key]) for key in GAME_KEYS}


class SkillBankConfig(Section):
    """The skill-bank agent's thresholds (DESIGN.md §4, issue 6)."""

    use_model: bool = True
    eff_freq: float = Field(0.5, gt=0.0, le=1.0)
    pass_threshold: float = Field(0.7, gt=0.0, le=1.0)
    boundary_radius: int = Field(2, ge=0)
    boundary_threshold: float = Field(1.0, ge=0.0)
    new_skill_penalty: float = Field(1.0, ge=0.0)
    min_instances: int = Field(3, ge=1)
    merge_jaccard: float = Field(0.85, gt=0.0, le=1.0)
    split_pass_rate: float = Field(0.7, gt=0.0, le=1.0)
    split_child_pass_rate: float = Field(0.8, gt=0.0, le=1.0)
    retire_after: int = Field(5, ge=1, description="R: iterations unused before retirement")
    score_floor: float = Field(0.2, ge=0.0, le=1.0)
    max_skills: int = Field(64, ge=1)
    queue_size: int = Field(8, ge=1)
    group_size: int = Field(4, ge=1)
    literal_window: int = Field(2, ge=1, description="steps in a segment's start and end windows")
    trivial_literal_rate: float = Field(0.8, gt=0.0, le=1.0,
                                        description="literals holding in this share of all segments are not effects")
    min_literals: int = Field(2, ge=1, description="a materialized skill's contract has at least this many")
    duration_prior: dict[str, float] = Field(
        default_factory=lambda: {"2048": 6.0, "candy_crush": 4.0, "tetris": 5.0, "mario": 8.0, "avalon": 4.0,
                                 "diplomacy": 3.0},
        description="typical segment length (steps) per game: the segmentation's duration prior")
    max_segment_len: int = Field(40, ge=1)
    segment_margin: float = Field(1.0, ge=0.0, description="label margins below this go to the segment adapter")
    segment_rank_weight: float = Field(1.0, ge=0.0, description="score bonus of the segment adapter's first choice")
    max_segment_prompts: int = Field(16, ge=0)
    contract_refresh: int = Field(
        4, ge=0, description="per update, skills that gained evidence (most first) whose protocol the contract "
                             "adapter rewrites, besides the skills maintenance created or changed")
    heldout_every: int = Field(4, ge=2, description="every k-th trajectory (sorted by episode id) is held out")
    evidence_limit: int = Field(32, ge=1, description="recent instances kept per skill")
    pending_limit: int = Field(256, ge=1, description="NEW instances kept for materialization")
    size_penalty: float = Field(0.005, ge=0.0, description="bank quality penalty per skill")


class LearnerConfig(Section):
    """GRPO over the five adapters (DESIGN.md §5)."""

    backend: Literal["deepspeed", "torch"] = "deepspeed"
    zero_stage: Literal[2, 3] = 2
    offload_optimizer: bool = False
    ranks: int = Field(1, ge=1)
    lr: float = Field(1e-5, gt=0.0)
    adapter_lr: dict[str, float] = {}
    epochs: int = Field(1, ge=1)
    micro_batch_size: int = Field(8, ge=1)
    eps_low: float = Field(0.2, ge=0.0)
    eps_high: float = Field(0.28, ge=0.0)
    kl_beta: float = Field(0.0, ge=0.0)
    loss_agg: Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"] = "token-mean"
    grad_clip: float = Field(1.0, gt=0.0)
    gamma: float = Field(1.0, ge=0.0, le=1.0)
    bf16: bool | None = Field(None, description="None: bf16 on GPU, float32 on CPU")

    @field_validator("adapter_lr")
    @classmethod
    def _known_adapters(cls, value: dict[str, float]) -> dict[str, float]:
        return known_adapter_keys(value)


class SftConfig(Section):
    """Cold-start SFT on teacher data."""

    enabled: bool = True
    teacher: Literal["bots", "openai"] = "bots"
    episodes_per_game: int = Field(60, ge=1)
    max_steps: int | None = Field(None, ge=1, description="horizon of teacher episodes (None: the game's own)")
    max_examples_per_adapter: int = Field(2000, ge=1, description="cap on SFT examples per adapter (evenly spread)")
    epochs: int = Field(1, ge=1)
    min_batches_per_adapter: int = Field(
        0, ge=0, description="repeat an adapter's few examples (more epochs) until it gets at least this many "
                             "optimizer batches; the bank adapters often have a handful of teacher examples")
    adapter_min_batches: dict[str, int] = Field(
        {}, description="per-adapter override of min_batches_per_adapter, e.g. {contract: 150}: a long JSON answer "
                        "needs far more passes over its few examples than a one-line verdict")
    lr: float = Field(1e-4, gt=0.0)
    openai_base_url: str | None = Field(None, description="OpenAI-compatible API root incl. /v1, e.g. http://127.0.0.1:8000/v1")
    openai_model: str | None = None
    openai_api_key_env: str | None = Field(None, description="environment variable holding the API key; None: no key")
    openai_timeout_s: float = Field(60.0, gt=0.0, description="per request")
    openai_max_retries: int = Field(2, ge=0, description="on connection errors, timeouts, 408/409/429/5xx")
    openai_concurrency: int = Field(8, ge=1, description="teacher requests in flight")

    @field_validator("adapter_min_batches")
    @classmethod
    def _known_adapters(cls, value: dict[str, int]) -> dict[str, int]:
        if any(n < 0 for n in known_adapter_keys(value).values()):
            raise ValueError("adapter_min_batches must be >= 0")
        return value

    def min_batches(self) -> dict[str, int]:
        """Minimum SFT optimizer batches of every adapter (the per-adapter override, else the common floor)."""
        return {a: self.adapter_min_batches.get(a, self.min_batches_per_adapter) for a in ADAPTER_NAMES}

    @model_validator(mode="after")
    def _openai_endpoint(self) -> SftConfig:
        missing = [key for key in ("openai_base_url", "openai_model") if not getattr(self, key)]
        if self.enabled and self.teacher == "openai" and missing:
            raise ValueError(f"teacher 'openai' needs {' and '.join(missing)} (an OpenAI-compatible endpoint, "
                             "e.g. openai_base_url=http://127.0.0.1:8000/v1); or use teacher=bots")
        if self.openai_base_url and not self.openai_base_url.startswith(("http://", "https://")):
            raise ValueError(f"openai_base_url {self.openai_base_url!r}: expected an http:// or https:// URL "
                             "ending in the API root, e.g. http://127.0.0.1:8000/v1")
        return self


class LoopConfig(Section):
    """The co-evolution schedule (DESIGN.md §6)."""

    iterations: int = Field(10, ge=1)
    staleness: int = Field(1, ge=0)
    eval_every: int = Field(5, ge=0, description="evaluate on seeds.eval every E iterations (0 = never)")
    eval_at_start: bool = Field(
        False, description="also evaluate the cold-start adapters (learner step 0: SFT only) as iteration 0")
    eval_episodes_single: int = Field(16, ge=1, description="episodes per single-player game (paper: 16)")
    eval_episodes_per_seat: int = Field(10, ge=1, description="episodes per seat in Avalon/Diplomacy (paper: 10)")
    eval_opponents: Literal["expert", "random", "self"] = "expert"
    checkpoint_every: int = Field(5, ge=1)


class ClusterConfig(Section):
    """Where Ray runs: None = a local in-process cluster on loopback with no dashboard."""

    address: str | None = None
    num_cpus: int | None = Field(None, ge=1)
    num_gpus: int | None = Field(None, ge=0)
    include_dashboard: bool = False
    max_restarts: int = Field(3, ge=0)
    artifact_max_failures: int = Field(3, ge=1)
    rollout_worker_gpus: float | None = Field(
        None, ge=0.0, description="GPUs per rollout worker; None: 1 on a cluster with GPUs, else 0 (a CPU slot)")
    learner_rank_gpus: float | None = Field(
        None, ge=0.0, description="GPUs per learner rank; None: 1 on a cluster with GPUs, else 0 (a CPU slot)")


class LoggingConfig(Section):
    """Where metrics go besides `metrics.jsonl`."""

    tensorboard: bool = True
    wandb_project: str | None = None
    console: bool = True


class RunConfig(Section):
    """Name and location of the run folder (DESIGN.md §7)."""

    name: str = "coplay"
    out_dir: str = "runs"


class CoplayConfig(Section):
    """The root of the config tree: everything one run needs."""

    run: RunConfig = RunConfig()
    model: ModelConfig = ModelConfig()
    adapters: dict[str, LoraSpec] = Field(default_factory=_default_adapters)
    engine: EngineConfig = EngineConfig()
    sampling: SamplingConfig = SamplingConfig()
    games: list[str] = ["2048"]
    game: dict[str, GameConfig] = Field(default_factory=_default_games)
    seeds: SeedsConfig = SeedsConfig()
    rollout: RolloutConfig = RolloutConfig()
    skill_bank: SkillBankConfig = SkillBankConfig()
    learner: LearnerConfig = LearnerConfig()
    sft: SftConfig = SftConfig()
    loop: LoopConfig = LoopConfig()
    cluster: ClusterConfig = ClusterConfig()
    logging: LoggingConfig = LoggingConfig()

    @field_validator("games", mode="before")
    @classmethod
    def _games_as_str(cls, value: Any) -> Any:
        return [str(g) for g in value] if isinstance(value, list) else value

    @field_validator("game", mode="before")
    @classmethod
    def _game_keys_as_str(cls, value: Any) -> Any:
        return {str(k): v for k, v in value.items()} if isinstance(value, dict) else value

    @field_validator("games")
    @classmethod
    def _known_games(cls, value: list[str]) -> list[str]:
        unknown = [g for g in value if g not in GAME_KEYS]
        if unknown or not value:
            raise ValueError(f"games {value}: each must be one of {list(GAME_KEYS)} (at least one)")
        return value

    @field_validator("adapters")
    @classmethod
    def _all_adapters(cls, value: dict[str, LoraSpec]) -> dict[str, LoraSpec]:
        unknown = sorted(set(value) - set(ADAPTER_NAMES))
        if unknown:
            raise ValueError(f"unknown adapter(s) {unknown}; expected {list(ADAPTER_NAMES)}")
        return {name: value.get(name, LoraSpec()) for name in ADAPTER_NAMES}

    @field_validator("game")
    @classmethod
    def _game_keys(cls, value: dict[str, GameConfig]) -> dict[str, GameConfig]:
        unknown = sorted(set(value) - set(GAME_KEYS))
        if unknown:
            raise ValueError(f"unknown game key(s) {unknown}; expected some of {list(GAME_KEYS)}")
        return {**_default_games(), **value}

    def to_yaml(self) -> str:
        """The resolved config as YAML (what a run folder's `config.yaml` holds)."""
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)


def _format_errors(err: ValidationError, source: str) -> str:
    lines = [f"invalid config ({source}):"]
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "<root>"
        if e["type"] == "extra_forbidden":
            lines.append(f"  {key}: unknown key (value {e['input']!r}); check the spelling against `coplay config show`")
        else:
            lines.append(f"  {key}: {e['msg']} (got {e['input']!r})")
    return "\n".join(lines)


def parse_override(text: str) -> tuple[list[str], Any]:
    """`learner.lr=2e-5` -> (['learner', 'lr'], 2e-05). Values are parsed as YAML scalars/lists."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"override {text!r}: expected KEY=VALUE with a dotted key, e.g. learner.lr=2e-5")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise ConfigError(f"override {text!r}: value {raw!r} is not valid YAML: {exc}") from None
    return key.strip().split("."), value


def apply_override(data: dict[str, Any], path: list[str], value: Any, known: dict[str, Any]) -> None:
    """Set `path` in the raw dict `data`; `known` is the default tree, used to reject unknown keys early."""
    node, ref = data, known
    for i, part in enumerate(path):
        if isinstance(ref, dict) and part not in ref and not _is_open_mapping(path[:i]):
            allowed = ", ".join(sorted(ref)) if isinstance(ref, dict) else ""
            raise ConfigError(f"override {'.'.join(path)}: unknown key {part!r}; allowed here: {allowed}")
        ref = ref.get(part, {}) if isinstance(ref, dict) else {}
        if i == len(path) - 1:
            node[part] = value
        else:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {'.'.join(path)}: {'.'.join(path[: i + 1])} is not a mapping")


def _is_open_mapping(prefix: list[str]) -> bool:
    """Mappings whose keys are data, not schema (validated by their own validators)."""
    return prefix in (["game"], ["adapters"], ["learner", "adapter_lr"], ["sampling", "max_tokens"]) or (
        len(prefix) == 3 and prefix[0] == "game" and prefix[2] == "env_kwargs"
    )


def _deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """`top` over `base`, recursively for mappings (so a file may set one nested key)."""
    out = dict(base)
    for key, value in top.items():
        key = str(key)
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> CoplayConfig:
    """Load YAML (optional), apply dotted overrides, validate. Raises `ConfigError` with every problem."""
    data: dict[str, Any] = {}
    source = "defaults"
    if path is not None:
        source = str(path)
        try:
            loaded = yaml.safe_load(Path(path).read_text())
        except FileNotFoundError:
            raise ConfigError(f"config file {path} does not exist") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"config file {path}: top level must be a mapping, got {type(loaded).__name__}")
        data = loaded or {}
    known = CoplayConfig().model_dump(mode="json")
    data = _deep_merge(known, data)
    for text in overrides or []:
        key_path, value = parse_override(text)
        apply_override(data, key_path, value, known)
    if overrides:
        source = f"{source} + overrides {overrides}"
    try:
        return CoplayConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_errors(err, source)) from None
