"""The one config tree of a coplay run: typed (pydantic), loaded from YAML, with dotted CLI overrides.

    tree.py     the sections, rooted at `CoplayConfig` (what `coplay config show` prints)
    loading.py  YAML files (`extends:`), dotted overrides that merge like YAML, `ConfigError`

Import from here (`from coplay.config import CoplayConfig, load_config`). Imports only pydantic and yaml.
"""

from coplay.config.loading import ConfigError, apply_override, load_config, parse_override, read_yaml
from coplay.config.tree import (
    ADAPTER_NAMES,
    BANK_ADAPTERS,
    DECISION_ADAPTERS,
    DEFAULT_LORA_TARGETS,
    GAME_KEYS,
    AdapterLearningRates,
    AdapterMinBatches,
    AdapterSpecs,
    BoundaryConfig,
    ClusterConfig,
    ContractConfig,
    CoplayConfig,
    EndpointConfig,
    EngineConfig,
    EvalConfig,
    GameConfig,
    LearnerConfig,
    LoggingConfig,
    LoopConfig,
    LoraSpec,
    MaintenanceConfig,
    MaxTokens,
    ModelConfig,
    OpponentPoolConfig,
    PerAdapter,
    RolloutConfig,
    RunConfig,
    SamplingConfig,
    Section,
    SeedRange,
    SeedsConfig,
    SegmentationConfig,
    SftConfig,
    SkillBankConfig,
    TinyModelConfig,
)

__all__ = [
    "ADAPTER_NAMES", "BANK_ADAPTERS", "DECISION_ADAPTERS", "DEFAULT_LORA_TARGETS", "GAME_KEYS",
    "AdapterLearningRates", "AdapterMinBatches", "AdapterSpecs", "BoundaryConfig", "ClusterConfig",
    "ConfigError", "ContractConfig", "CoplayConfig", "EndpointConfig", "EngineConfig", "EvalConfig",
    "GameConfig", "LearnerConfig", "LoggingConfig", "LoopConfig", "LoraSpec", "MaintenanceConfig",
    "MaxTokens", "ModelConfig", "OpponentPoolConfig", "PerAdapter", "RolloutConfig", "RunConfig",
    "SamplingConfig", "Section", "SeedRange", "SeedsConfig",
    "SegmentationConfig", "SftConfig", "SkillBankConfig", "TinyModelConfig", "apply_override", "load_config",
    "parse_override", "read_yaml",
]
