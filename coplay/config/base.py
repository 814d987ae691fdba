"""The base of the config tree: the names every section shares (game keys, adapter names) and `Section`,
the base class of every section (unknown keys are errors, assignments are validated). Imports only pydantic.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

GAME_KEYS = ("2048", "candy_crush", "tetris", "mario", "avalon", "diplomacy")
ADAPTER_NAMES = ("act", "retrieve", "segment", "contract", "curator")
DECISION_ADAPTERS = ("act", "retrieve")  # the decision agent's; the rest are the skill-bank agent's
BANK_ADAPTERS = ("segment", "contract", "curator")
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
