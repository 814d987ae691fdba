"""The base of the config tree: the names every section shares (game keys, adapter names) and `Section`,
the base class of every section (unknown keys are errors, assignments are validated). Imports only pydantic.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

GAME_KEYS = ("2048", "candy_crush", "tetris", "mario", "avalon", "diplomacy")
ADAPTER_NAMES = ("act", "retrieve", "segment", "contract", "curator", "propose")
DECISION_ADAPTERS = ("act", "retrieve")  # the decision agent's; the rest are the skill-bank agent's
BANK_ADAPTERS = ("segment", "contract", "curator")
CURRICULUM_ADAPTERS = ("propose",)  # built, trained and served only when `curriculum.enabled`


def str_keys(value: Any) -> Any:
    """A mapping's keys as strings (YAML reads the game key `2048` as an int); anything else unchanged: the
    `mode="before"` validator of every section keyed by game."""
    return {str(k): v for k, v in value.items()} if isinstance(value, dict) else value


def active_adapters(curriculum_enabled: bool) -> tuple[str, ...]:
    """The adapters a run builds, trains and serves: every known one, less the proposer unless the
    curriculum is on (a sixth LoRA costs every run memory, optimizer steps and engine slots)."""
    return ADAPTER_NAMES if curriculum_enabled else tuple(a for a in ADAPTER_NAMES
                                                          if a not in CURRICULUM_ADAPTERS)


DEFAULT_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")



class Section(BaseModel):
    """Base of every config section: unknown keys are errors, assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    def with_values(self, changes: dict[str, Any]) -> Any:
        """A validated copy with dotted keys changed, e.g. `{"segmentation.margin": 2.0}`."""
        data = self.model_dump()
        for dotted, value in changes.items():
            node, (*parents, last) = data, dotted.split(".")
            for part in parents:
                node = node[part]
            if last not in node:
                raise KeyError(f"{type(self).__name__} has no key {dotted!r}")
            node[last] = value
        return type(self).model_validate(data)
