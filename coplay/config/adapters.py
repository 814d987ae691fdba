"""Per-adapter sections of the config tree: the LoRA shape (`LoraSpec`) and the typed per-adapter mappings
(`adapters`, `sampling.max_tokens`, `learner.adapter_lr`, `sft.adapter_min_batches`). Imports only pydantic.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from coplay.config.base import ADAPTER_NAMES, DEFAULT_LORA_TARGETS, Section


class LoraSpec(Section):
    """One LoRA adapter's shape and placement (PEFT `LoraConfig`): which projections (`target_modules`) of
    which decoder layers (`top_layers`: the N layers nearest the output, PEFT `layers_to_transform`; None:
    all). Fewer, higher layers train much faster on CPU: no gradient flows below the lowest adapted layer."""

    r: int = Field(16, ge=1, le=512)
    alpha: int = Field(32, ge=1)
    dropout: float = Field(0.05, ge=0.0, lt=1.0)
    target_modules: list[str] = Field(list(DEFAULT_LORA_TARGETS), min_length=1)
    top_layers: int | None = Field(
        None, ge=1, description="adapt only the top N decoder layers (None, or N >= the model's layers: all)")


class PerAdapter(Section):
    """A value per adapter (keys `act` ... `propose`; an unknown key is an error naming the allowed ones).
    Reads like a mapping: `m["act"]`, `m.get(a, default)` (default also where the value is unset),
    `m.items()`, `dict(m)`, `"act" in m`, iteration over the adapter names."""

    def __iter__(self) -> Any:  # type: ignore[override]  # a mapping iterates its keys
        return iter(ADAPTER_NAMES)

    def __len__(self) -> int:
        return len(ADAPTER_NAMES)

    def __contains__(self, adapter: object) -> bool:
        return adapter in ADAPTER_NAMES

    def __getitem__(self, adapter: str) -> Any:
        if adapter not in ADAPTER_NAMES:
            raise KeyError(f"unknown adapter {adapter!r}; expected one of {list(ADAPTER_NAMES)}")
        return getattr(self, adapter)

    def get(self, adapter: str, default: Any = None) -> Any:
        value = getattr(self, adapter, None)
        return default if value is None else value

    def keys(self) -> list[str]:
        return list(ADAPTER_NAMES)

    def items(self) -> list[tuple[str, Any]]:
        return [(a, getattr(self, a)) for a in ADAPTER_NAMES]

    def values(self) -> list[Any]:
        return [getattr(self, a) for a in ADAPTER_NAMES]

    def set_values(self) -> dict[str, Any]:
        """The adapters whose value is set (not None)."""
        return {a: v for a, v in self.items() if v is not None}


class AdapterSpecs(PerAdapter):
    """`adapters`: the LoRA shape of each adapter."""

    act: LoraSpec = LoraSpec()
    retrieve: LoraSpec = LoraSpec()
    segment: LoraSpec = LoraSpec()
    contract: LoraSpec = LoraSpec()
    curator: LoraSpec = LoraSpec()
    propose: LoraSpec = LoraSpec()


class MaxTokens(PerAdapter):
    """`sampling.max_tokens`: the completion budget of each adapter's calls."""

    act: int = Field(96, ge=1)
    retrieve: int = Field(16, ge=1)
    segment: int = Field(64, ge=1)
    contract: int = Field(256, ge=1)
    curator: int = Field(32, ge=1)
    propose: int = Field(256, ge=1)


class AdapterLearningRates(PerAdapter):
    """`learner.adapter_lr`: a learning rate per adapter; unset: `learner.lr`."""

    act: float | None = Field(None, gt=0.0)
    retrieve: float | None = Field(None, gt=0.0)
    segment: float | None = Field(None, gt=0.0)
    contract: float | None = Field(None, gt=0.0)
    curator: float | None = Field(None, gt=0.0)
    propose: float | None = Field(None, gt=0.0)


class AdapterMaxExamples(PerAdapter):
    """`sft.adapter_max_examples`: per-adapter override of `sft.max_examples_per_adapter` (an adapter that
    learns its format in a few steps need not pay for as many example passes as `act`)."""

    act: int | None = Field(None, ge=1)
    retrieve: int | None = Field(None, ge=1)
    segment: int | None = Field(None, ge=1)
    contract: int | None = Field(None, ge=1)
    curator: int | None = Field(None, ge=1)
    propose: int | None = Field(None, ge=1)


class AdapterMinBatches(PerAdapter):
    """`sft.adapter_min_batches`: per-adapter override of `sft.min_batches_per_adapter`."""

    act: int | None = Field(None, ge=0)
    retrieve: int | None = Field(None, ge=0)
    segment: int | None = Field(None, ge=0)
    contract: int | None = Field(None, ge=0)
    curator: int | None = Field(None, ge=0)
    propose: int | None = Field(None, ge=0)
