"""PettingZoo entry points for Avalon, by the usual `<game>_v0` convention: `env()` (wrapped AEC env),
`raw_env()` (the bare `AvalonEnv`). Keyword arguments go to `AvalonEnv` (`discussion_rounds`,
`auto_approve_fifth`, `role_names`, `max_message_chars`, `render_mode`).

Avalon is turn-based (one seat acts at a time), so there is no `parallel_env`. Never imports `coplay`.
"""

from __future__ import annotations

from typing import Any

from pettingzoo.utils import wrappers

from coplay_envs.avalon.env import RULES, AvalonEnv

__all__ = ["RULES", "AvalonEnv", "env", "raw_env"]


def raw_env(**kwargs: Any) -> AvalonEnv:
    """The bare AEC env."""
    return AvalonEnv(**kwargs)


def env(**kwargs: Any) -> wrappers.OrderEnforcingWrapper:
    """The AEC env in PettingZoo's order-enforcing wrapper (it refuses step/observe before reset)."""
    return wrappers.OrderEnforcingWrapper(raw_env(**kwargs))
