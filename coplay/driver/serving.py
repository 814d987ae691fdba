"""The serving set's frozen opponents: which earlier `act` versions every rollout worker loads besides the
current adapters (docs/selfplay.md), decided without Ray.

Frozen versions are loaded only where they can be drawn: some configured game has seats besides the
policy's (Avalon, Diplomacy) and the opponent pool draws frozen versions (`rollout.opponents.frozen > 0`);
a single-player run serves none. They are capped so that the current and previous version of every adapter
plus the frozen ones fit the engine's LoRA slots: at most `engine.max_loras - 2 x adapters` of them.
Within the cap they follow the pool's rule (half the draws the newest, the rest spread over older ones):
the newest earlier version, then older ones evenly spaced back to the first. The opponent pool then draws
only from this list (`coplay.driver.plans.draw_opponent` gets it), so every drawn version is loaded.
Imports the game facts from `coplay_envs`; no ray, no torch.
"""

from __future__ import annotations

from coplay.config import CoplayConfig


def frozen_slots(cfg: CoplayConfig) -> int:
    """LoRA slots left for frozen versions after the current and previous version of every adapter."""
    return max(0, cfg.engine.max_loras - 2 * len(cfg.active_adapters))


def draws_frozen(cfg: CoplayConfig) -> bool:
    """Whether any episode of this config can seat a frozen version."""
    import coplay_envs

    multi_seat = any(len(coplay_envs.seats(game)) > 1 for game in cfg.games)
    return multi_seat and cfg.rollout.opponents.frozen > 0


def frozen_opponents(cfg: CoplayConfig, act_versions: list[int], current: int) -> list[int]:
    """The frozen `act` versions to serve next to `current` (module docstring), oldest first."""
    older = sorted({v for v in act_versions if v < current})
    cap = frozen_slots(cfg) if draws_frozen(cfg) else 0
    if len(older) <= cap:
        return older
    if cap == 0:
        return []
    rest = older[:-1]
    picks = {rest[round(i * (len(rest) - 1) / max(1, cap - 2))] for i in range(cap - 1)} if cap > 1 else set()
    return sorted(picks | {older[-1]})
