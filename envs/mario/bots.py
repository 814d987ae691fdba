"""Mario bots: `ExpertBot`, a run-and-jump controller reading the RAM grid of `info["view"]` (jumps over
pits, pipes, walls and enemies), and `RandomBot`, uniform over the legal actions. Both read only the
observation, `info["view"]` and `info["legal_actions"]`, never `info["state"]`.

`evaluate(kind, seeds)` plays seeded episodes and returns the scores (used by the benchmark and the slow
test that compare the bots).

Never imports `coplay`.
"""

from __future__ import annotations

from typing import Any

from coplay_envs.core import BotAction, seed_rng
from coplay_envs.mario.features import compute_features
from coplay_envs.mario.ram import HARMLESS_KINDS, SOLID_SYMBOLS

#: how close (pixels, left edge to left edge) a harmful enemy ahead must be to trigger a jump.
ENEMY_JUMP_PIXELS: int = 64
#: rows of height difference within which an enemy counts as in Mario's way.
ENEMY_ROWS: int = 1
#: a ceiling this close above Mario's head cuts a jump short (a hop), so under one Mario jumps at an
#: enemy from further away (`ENEMY_LOW_CEILING_PIXELS`): the hop comes down on it.
CEILING_ROWS: int = 3
ENEMY_LOW_CEILING_PIXELS: int = 48


def _enemy_in_way(view: dict, reach: int) -> str | None:
    """The kind of the first harmful enemy within `reach` px ahead at about Mario's height, or None."""
    mario = view["mario"]
    if not mario["rows"]:
        return None
    feet = mario["rows"][-1]
    for obj in view["objects"]:
        if obj["kind"] in HARMLESS_KINDS or obj["kind"].startswith("power-up"):
            continue
        dx = obj["x"] - view["x"]
        if -4 <= dx <= reach and abs(obj["row"] - feet) <= ENEMY_ROWS:
            return obj["kind"]
    return None


def _ceiling_low(view: dict) -> bool:
    """A solid cell within `CEILING_ROWS` above Mario's head, in his column or the next: a jump taken
    here would bonk."""
    mario = view["mario"]
    if not mario["rows"]:
        return False
    head = mario["rows"][0]
    tiles = view["tiles"]
    for col in (mario["col"], mario["col"] + 1):
        if 0 <= col < len(tiles[0]):
            if any(tiles[row][col] in SOLID_SYMBOLS for row in range(max(head - CEILING_ROWS, 0), head)):
                return True
    return False


def _has_floor(tiles: list[str], col: int, below_row: int) -> bool:
    return 0 <= col < len(tiles[0]) and any(
        tiles[row][col] in SOLID_SYMBOLS for row in range(max(below_row + 1, 0), len(tiles)))


def _landing_before_pit(view: dict) -> bool:
    """Mario falls over solid ground whose next column is a pit (a stair top before a gap)."""
    mario = view["mario"]
    if not mario["rows"]:
        return False
    feet, col, tiles = mario["rows"][-1], mario["col"], view["tiles"]
    return _has_floor(tiles, col, feet) and not _has_floor(tiles, col + 1, feet)


class ExpertBot:
    """Runs right holding B. On the ground it jumps (right+A+B) when a pit, a solid obstacle or an enemy
    is close ahead (from further away under a low ceiling); while rising it keeps A held only as long as
    something is still ahead at its height (so it lands on stair tops instead of overshooting); falling
    at a pit edge it brakes; it releases A in the air so the next jump registers on landing."""

    def __init__(self, seed: int = 0, **kwargs: Any) -> None:
        self.seed = seed

    def act(self, observation: str, info: dict[str, Any]) -> BotAction:
        view = info["view"]
        mario = view["mario"]
        features = compute_features(view)
        a_held = "A" in view["last_action"]
        if not mario["on_ground"]:
            if mario["vy"] > 0 and _landing_before_pit(view):
                return BotAction("left", "SURVIVE", "falling at a pit edge: brake to land before it")
            if a_held and mario["vy"] < 0:
                if features["obstacle_ahead"] or features["gap_ahead"]:
                    return BotAction("right+A+B", "NAVIGATE", "rising: hold A to clear what is ahead")
                if _enemy_in_way(view, ENEMY_JUMP_PIXELS) is not None:
                    return BotAction("right+A+B", "SURVIVE", "rising: hold A to pass over the enemy")
            return BotAction("right+B", "NAVIGATE", "airborne: release A and drift right")
        low_ceiling = _ceiling_low(view)
        enemy = _enemy_in_way(view, ENEMY_LOW_CEILING_PIXELS if low_ceiling else ENEMY_JUMP_PIXELS)
        if features["gap_ahead"]:
            reason = "pit ahead: jump it"
        elif features["obstacle_ahead"]:
            reason = f"obstacle {features['obstacle_height']} tiles high ahead: jump onto or over it"
        elif enemy is not None:
            reason = f"{enemy} ahead: jump over or onto it"
        else:
            return BotAction("right+B", "NAVIGATE", "clear ground: run right")
        if a_held:
            return BotAction("right+B", "SETUP", "A still held: release it so the next jump registers")
        tag = "SURVIVE" if enemy is not None and not features["gap_ahead"] else "NAVIGATE"
        return BotAction("right+A+B", tag, reason)


class RandomBot:
    """Uniform over `info["legal_actions"]` with its own seeded RNG."""

    def __init__(self, seed: int = 0, **kwargs: Any) -> None:
        self._rng = seed_rng(seed)

    def act(self, observation: str, info: dict[str, Any]) -> BotAction:
        legal = info["legal_actions"]
        action = legal[int(self._rng.integers(len(legal)))]
        return BotAction(action, "EXPLORE", "random legal action")


def play_episode(env: Any, bot: Any, seed: int) -> dict[str, Any]:
    """One episode of `bot` in `env` from `reset(seed=seed)`: score, steps, flag, total reward."""
    observation, info = env.reset(seed=seed)
    total, steps, terminated, truncated = 0.0, 0, False, False
    while not (terminated or truncated):
        decision = bot.act(observation, info)
        observation, reward, terminated, truncated, info = env.step(decision.action)
        total += reward
        steps += 1
    return {"seed": seed, "score": info["score"], "steps": steps, "flag": info["flag_get"],
            "reward": total, "x": info["view"]["x"]}


def evaluate(kind: str, seeds: range | list[int], **env_kwargs: Any) -> list[dict[str, Any]]:
    """Play one episode per seed with the `expert` or `random` bot (bot seeded with the episode seed)."""
    from coplay_envs.mario.env import MarioEnv

    bot_class = {"expert": ExpertBot, "random": RandomBot}[kind]
    env = MarioEnv(**env_kwargs)
    try:
        return [play_episode(env, bot_class(seed=seed), seed) for seed in seeds]
    finally:
        env.close()


__all__ = ["ExpertBot", "RandomBot", "evaluate", "play_episode"]
