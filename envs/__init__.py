"""coplay_envs: the six coplay games as text environments (gymnasium and PettingZoo).

Never imports `coplay`. Importing this package registers the gymnasium ids (`coplay/2048-v0`,
`coplay/CandyCrush-v0`, `coplay/Tetris-v0`, `coplay/SuperMarioBros-v0`) by entry-point string, so no game
module is imported until it is made.
"""

from __future__ import annotations

import gymnasium

from coplay_envs.registry import (
    GAME_KEYS,
    SPECS,
    feature_scales,
    make_bot,
    make_env,
    role_ids,
    rules,
    seat_roles,
    seats,
    side,
    spec,
)

for _spec in SPECS.values():
    if _spec.gym_id is not None and _spec.gym_id not in gymnasium.registry:
        gymnasium.register(id=_spec.gym_id, entry_point=_spec.env)

__all__ = ["GAME_KEYS", "SPECS", "feature_scales", "make_bot", "make_env", "role_ids", "rules", "seat_roles",
           "seats", "side", "spec"]
