"""Where each game lives: one `GameSpec` per game key (docs/architecture.md), resolved lazily so that
`import coplay_envs` stays fast and a game's heavy dependency (the NES emulator, `diplomacy`) loads
only when that game is used.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

GAME_KEYS: tuple[str, ...] = ("2048", "candy_crush", "tetris", "mario", "avalon", "diplomacy")


@dataclass(frozen=True)
class GameSpec:
    """Import paths (``module:attr``) of a game's parts.

    env: for single-player games a gymnasium `Env` class; for multi-seat games a factory returning a
    PettingZoo env (`avalon_v0.env`, `diplomacy_v0.parallel_env`). rules: a short text of the rules that
    prompts show. expert / random: bot classes constructed as ``Bot(seed=..., **kwargs)``; multi-seat bots
    also take ``agent=<seat name>``.
    """

    key: str
    api: str  # "gymnasium", "aec" or "parallel"
    gym_id: str | None
    env: str
    rules: str
    expert: str
    random: str
    seats: str | None = None  # multi-seat games: the agent names, in seat order
    side: str | None = None  # multi-seat games: role id -> the side (or power) whose seats share a goal
    roles: str | None = None  # multi-seat games whose roles differ from the seats: the role ids
    deal: str | None = None  # ... and seed -> each seat's role id, as `reset(seed=...)` deals them
    scales: str | None = None  # feature -> the values a threshold on it may take (`feature_scales`)
    # env kwargs that change only the observation text (not the rules or the state): a run's setting of
    # them also applies where positions come from elsewhere (the probe's recorded positions)
    text_options: tuple[str, ...] = ()


SPECS: dict[str, GameSpec] = {
    "2048": GameSpec("2048", "gymnasium", "coplay/2048-v0", "coplay_envs.game2048.env:Game2048Env",
                     "coplay_envs.game2048.env:RULES", "coplay_envs.game2048.bots:ExpertBot",
                     "coplay_envs.game2048.bots:RandomBot",
                     scales="coplay_envs.game2048.features:FEATURE_SCALES", text_options=("show_merges",)),
    "candy_crush": GameSpec("candy_crush", "gymnasium", "coplay/CandyCrush-v0",
                            "coplay_envs.candy.env:CandyCrushEnv", "coplay_envs.candy.env:RULES",
                            "coplay_envs.candy.bots:ExpertBot", "coplay_envs.candy.bots:RandomBot",
                            scales="coplay_envs.candy.features:FEATURE_SCALES",
                            text_options=("show_clears", "clears_order")),
    "tetris": GameSpec("tetris", "gymnasium", "coplay/Tetris-v0", "coplay_envs.tetris.env:TetrisEnv",
                       "coplay_envs.tetris.env:RULES", "coplay_envs.tetris.bots:ExpertBot",
                       "coplay_envs.tetris.bots:RandomBot",
                       scales="coplay_envs.tetris.features:FEATURE_SCALES"),
    "mario": GameSpec("mario", "gymnasium", "coplay/SuperMarioBros-v0", "coplay_envs.mario.env:MarioEnv",
                      "coplay_envs.mario.env:RULES", "coplay_envs.mario.bots:ExpertBot",
                      "coplay_envs.mario.bots:RandomBot",
                      scales="coplay_envs.mario.features:FEATURE_SCALES"),
    "avalon": GameSpec("avalon", "aec", None, "coplay_envs.avalon_v0:env", "coplay_envs.avalon.env:RULES",
                       "coplay_envs.avalon.bots:ExpertBot", "coplay_envs.avalon.bots:RandomBot",
                       "coplay_envs.avalon.rules:SEATS", "coplay_envs.avalon.rules:side_of",
                       "coplay_envs.avalon.rules:ROLE_IDS", "coplay_envs.avalon.rules:deal"),
    "diplomacy": GameSpec("diplomacy", "parallel", None, "coplay_envs.diplomacy_v0:parallel_env",
                          "coplay_envs.diplomacy.env:RULES", "coplay_envs.diplomacy.bots:ExpertBot",
                          "coplay_envs.diplomacy.bots:RandomBot", "coplay_envs.diplomacy.orders:POWERS",
                          None),
}


def resolve(path: str) -> Any:
    """Import ``module:attr``."""
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def spec(key: str) -> GameSpec:
    """The spec of a game key, with an error listing the valid keys."""
    try:
        return SPECS[key]
    except KeyError:
        raise KeyError(f"unknown game {key!r}; expected one of {list(GAME_KEYS)}") from None


def text_kwargs(key: str, env_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The part of `env_kwargs` that changes only how `key`'s observations read (`GameSpec.text_options`)."""
    options = spec(key).text_options
    return {k: v for k, v in env_kwargs.items() if k in options}


def make_env(key: str, **kwargs: Any) -> Any:
    """A fresh env for `key`: a gymnasium Env (single-player) or a PettingZoo env (multi-seat)."""
    return resolve(spec(key).env)(**kwargs)


def make_bot(key: str, kind: str, seed: int = 0, **kwargs: Any) -> Any:
    """An `expert` or `random` bot for `key`."""
    if kind not in ("expert", "random"):
        raise ValueError(f"bot kind {kind!r}; expected 'expert' or 'random'")
    return resolve(getattr(spec(key), kind))(seed=seed, **kwargs)


def rules(key: str) -> str:
    """The game's short rules text (shown in prompts)."""
    return resolve(spec(key).rules)


def feature_scales(key: str) -> dict[str, tuple[int, ...]]:
    """Per numeric feature the values a threshold on it may take (task contracts, `coplay.curriculum`): the
    game's own scale, e.g. 2048 tiles are powers of two. {} for a game that states none (thresholds free)."""
    path = spec(key).scales
    return dict(resolve(path)) if path else {}


def seats(key: str) -> tuple[str, ...]:
    """The seat (agent) names of a multi-seat game in seat order; () for a single-player game."""
    path = spec(key).seats
    return tuple(resolve(path)) if path else ()


def role_ids(key: str) -> tuple[str, ...]:
    """The role ids a seat of a multi-seat game can hold (Avalon's roles; Diplomacy's powers, which are its
    seats); () for a single-player game."""
    game = spec(key)
    return tuple(resolve(game.roles)) if game.roles else seats(key)


def seat_roles(key: str, seed: int) -> dict[str, str]:
    """Each seat's role id in the game `reset(seed=seed)` starts (Diplomacy: the seat's power)."""
    game = spec(key)
    names = seats(key)
    if game.deal is None:
        return {name: name for name in names}
    return dict(zip(names, resolve(game.deal)(seed), strict=True))


def side(key: str, seat: str, role: str) -> str | None:
    """Which seats share a goal, by role id (never a role's display label): Avalon `good` / `evil`, Diplomacy
    the seat's power; None for a single-player game."""
    game = spec(key)
    if game.seats is None:
        return None
    if game.side is None:
        return seat
    return str(resolve(game.side)(role))
