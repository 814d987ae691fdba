"""The one config tree of a coplay run: typed (pydantic), loaded from YAML, with dotted CLI overrides.

    tree.py        the sections, rooted at `CoplayConfig` (what `coplay config show` prints)
    base.py        game keys, adapter names, `Section` (the base of every section)
    adapters.py    LoRA shapes and the typed per-adapter mappings
    selfplay.py    line-ups of multi-seat games: seat schedule, full self-play, the league
    skill_bank.py  the skill-bank agent's sections (boundaries, segmentation, contracts, maintenance)
    curriculum.py  skill-guided self-play: the proposer, the task gate, its rewards and routing
    loading.py     YAML files (`extends:`), dotted overrides that merge like YAML, `ConfigError`
    ablation.py    `ablation.variant`: which parts of co-evolution run (the paper's ablation)
    engine.py      the inference engines of the rollout workers (vLLM or hf)
    probe.py       the per-decision probe in a run and the prompts of the served-policy KL
    prompt.py      `rollout.prompt_format`: the act prompt's layout (`full` or `compact`)
    training.py    what a config must pass to train (`require_trainable`), not to evaluate or play

Import from here (`from coplay.config import CoplayConfig, load_config`). Imports only pydantic and yaml.
"""

from coplay.config.ablation import VARIANT_PARTS, AblationConfig, VariantParts
from coplay.config.adapters import (
    AdapterLearningRates,
    AdapterMaxExamples,
    AdapterMinBatches,
    AdapterSpecs,
    LoraSpec,
    MaxTokens,
    PerAdapter,
)
from coplay.config.base import (
    ADAPTER_NAMES,
    BANK_ADAPTERS,
    CURRICULUM_ADAPTERS,
    DECISION_ADAPTERS,
    DEFAULT_LORA_TARGETS,
    GAME_KEYS,
    Section,
    active_adapters,
)
from coplay.config.curriculum import CurriculumConfig
from coplay.config.engine import EngineConfig
from coplay.config.loading import ConfigError, apply_override, load_config, parse_override, read_yaml
from coplay.config.probe import ProbeConfig
from coplay.config.selfplay import LeagueConfig, SelfPlayConfig
from coplay.config.skill_bank import (
    BoundaryConfig,
    ContractConfig,
    MaintenanceConfig,
    SegmentationConfig,
    SkillBankConfig,
)
from coplay.config.training import require_trainable
from coplay.config.tree import (
    ClusterConfig,
    CoplayConfig,
    EndpointConfig,
    EvalConfig,
    GameConfig,
    LearnerConfig,
    LoggingConfig,
    LoopConfig,
    ModelConfig,
    OpponentPoolConfig,
    RolloutConfig,
    RunConfig,
    SamplingConfig,
    SeedRange,
    SeedsConfig,
    SftConfig,
    TinyModelConfig,
)

__all__ = [
    "ADAPTER_NAMES", "BANK_ADAPTERS", "CURRICULUM_ADAPTERS", "VARIANT_PARTS", "AblationConfig",
    "VariantParts",
    "DECISION_ADAPTERS", "DEFAULT_LORA_TARGETS", "GAME_KEYS",
    "AdapterLearningRates", "AdapterMaxExamples", "AdapterMinBatches", "AdapterSpecs", "BoundaryConfig",
    "ClusterConfig",
    "ConfigError", "ContractConfig", "CoplayConfig", "CurriculumConfig",
    "EndpointConfig", "EngineConfig", "EvalConfig",
    "GameConfig", "LeagueConfig", "LearnerConfig", "LoggingConfig", "LoopConfig", "LoraSpec",
    "MaintenanceConfig", "MaxTokens", "ModelConfig", "OpponentPoolConfig", "PerAdapter", "ProbeConfig",
    "RolloutConfig",
    "RunConfig", "SamplingConfig", "Section", "SeedRange", "SeedsConfig", "SegmentationConfig",
    "SelfPlayConfig", "SftConfig", "SkillBankConfig", "TinyModelConfig", "apply_override", "load_config",
    "parse_override", "read_yaml", "require_trainable", "active_adapters",
]
