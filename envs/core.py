"""Pieces every coplay game shares: text spaces, the bot interface, intention tags, seeding helpers.

This package (`coplay_envs`) must never import `coplay`: games are usable on their own, like any
gymnasium or PettingZoo environment. Keep this module dependency-light (numpy and gymnasium only).
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from gymnasium import spaces

#: Intention tags of the `act` format (docs/agents.md). Bots tag every action with one of these.
INTENTION_TAGS: tuple[str, ...] = (
    "SETUP", "CLEAR", "MERGE", "ATTACK", "DEFEND", "NAVIGATE", "POSITION",
    "COLLECT", "BUILD", "SURVIVE", "OPTIMIZE", "EXPLORE", "EXECUTE",
)

#: gymnasium's `Text` space defaults to 62 alphanumerics; observations hold spaces, newlines, punctuation.
PRINTABLE_CHARSET: str = string.printable

#: Longest free-text action accepted anywhere (longer strings are still handled: truncated, never raised on).
MAX_ACTION_CHARS: int = 4096


def text_space(max_length: int) -> spaces.Text:
    """A gymnasium `Text` space over printable ASCII (the default charset has no spaces or newlines)."""
    return spaces.Text(max_length=max_length, min_length=0, charset=PRINTABLE_CHARSET)


class ObsStr(str):
    """A `str` with the `dtype` of gymnasium's `Text` space, because PettingZoo's `api_test` compares
    `obs.dtype` with the observation space's (docs/platform.md)."""

    dtype = np.dtype(str)


@dataclass(frozen=True)
class BotAction:
    """One bot decision: the action string plus teacher data for the `act` format (docs/game-contract.md)."""

    action: str
    intention: str
    reason: str

    def __post_init__(self) -> None:
        if self.intention not in INTENTION_TAGS:
            raise ValueError(f"intention {self.intention!r} is not one of {INTENTION_TAGS}")


class Bot(Protocol):
    """A policy that reads only what its seat may know: the observation and `info["view"]`,
    `info["legal_actions"]` (and `info["legal_orders"]` in Diplomacy). Bots never read `info["state"]`."""

    def act(self, observation: str, info: dict[str, Any]) -> BotAction: ...


def normalize_action(action: Any) -> str:
    """Coerce whatever a caller passed as an action into a bounded string; never raises."""
    if isinstance(action, bytes):
        action = action.decode("utf-8", errors="replace")
    if not isinstance(action, str):
        action = "" if action is None else str(action)
    return action[:MAX_ACTION_CHARS]


def seed_rng(seed: int | None) -> np.random.Generator:
    """The one way games derive randomness from a seed (PCG64 via numpy, stable across platforms)."""
    return np.random.default_rng(seed)
