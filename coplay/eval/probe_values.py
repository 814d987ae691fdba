"""How the per-decision probe (`coplay.eval.probe`) is built: the build parameters, drawing positions from
bot play, and the Monte-Carlo lookahead value of every action at a position.

Why a separate module: `probe.py` is what a caller scores against (records, regret, files); this is the
part that plays games to make those records, and the part whose choices (horizon, rollouts, rollout
policy) define what "best" means. Changing anything here that changes values must bump `PROBE_VERSION`.

Randomness, measured on the envs (2048, Candy Crush, Tetris): `info["state"]` carries the whole RNG (2048:
`rng_key`/`rng_counter` of a counter-based stream; Candy Crush: `rng_key`, `candy_counter`,
`shuffle_counter`; Tetris: `bag_seed`, `bags_drawn` and the drawn `queue`), and `reset(seed=s,
options={"state": S})` ignores `s` for the game (it only re-seeds gymnasium's unused `np_random`): every
seed replays the same future. So a rollout from `S` as stored would be one clairvoyant sample of the
hidden future, identical every time. Rollout r therefore replaces the hidden part of the RNG by a key
derived from (position seed, step, r) (`rekey`): what the player can see (the board, Tetris's current piece
and 4-piece preview) is kept, and every action of the position is rolled out under the same rekeyed state
and the same rollout-bot seed (common random numbers). Everything is a pure function of the position and
the parameters, so values are bit-for-bit reproducible.

Pure Python + numpy (via the envs). Never imports ray, torch, an engine or `coplay.eval.probe`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

import coplay_envs

#: Bump when anything that changes positions or values changes (a cached probe of another version is
#: rebuilt, never reused).
PROBE_VERSION: int = 1

#: The action stepped to value "what the game does with an answer it cannot use" (env contract: an invalid
#: action never raises and gets the game's documented fallback).
FALLBACK_ACTION: str = "invalid"

#: First probe seed; far from training seeds (0..99999) and evaluation seeds (1000000 onward).
PROBE_SEED_BASE: int = 2_000_000

#: Salt of the rollout keys, so they never coincide with the games' own seeds.
_ROLLOUT_SALT: int = 0x9B0BE
_MASK63 = (1 << 63) - 1
SOURCES: tuple[str, str] = ("expert", "random")


@dataclass(frozen=True)
class ProbeParams:
    """Everything that defines a probe besides `PROBE_VERSION`: where positions come from and how each
    action is valued (`value = reward of the action + return of `rollout_policy` over `horizon` more
    steps, mean over `rollouts` rekeyed futures`)."""

    game: str
    n: int = 128
    seed_base: int = PROBE_SEED_BASE
    max_step: int = 100  # step indices are drawn uniformly from 0..max_step (clamped to the game's end)
    horizon: int = 10
    rollouts: int = 8
    rollout_policy: str = "random"  # "expert" or "random": the game's own bot
    env_kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.game not in coplay_envs.GAME_KEYS or coplay_envs.seats(self.game):
            raise ValueError(f"probe: {self.game!r} is not a single-player game key")
        if self.n < 1 or self.rollouts < 1 or self.horizon < 0 or self.max_step < 0:
            raise ValueError(f"probe: n, rollouts >= 1 and horizon, max_step >= 0, got {self}")
        if self.rollout_policy not in SOURCES:
            raise ValueError(f"probe: rollout_policy {self.rollout_policy!r}; expected one of {SOURCES}")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


#: Per-game defaults, chosen so the expert bot's mean regret is clearly below the random bot's on 128
#: positions with a build of about a minute on one core (docs/evaluation.md has the measured figures).
DEFAULTS: dict[str, dict[str, Any]] = {
    "2048": {"max_step": 150, "horizon": 20, "rollouts": 64, "rollout_policy": "random"},
    "candy_crush": {"max_step": 45, "horizon": 3, "rollouts": 8, "rollout_policy": "random"},
    "tetris": {"max_step": 120, "horizon": 10, "rollouts": 2, "rollout_policy": "expert"},
}


def probe_params(game: str, n: int = 128, **overrides: Any) -> ProbeParams:
    """The default parameters of `game`'s probe, with `overrides` (any `ProbeParams` field)."""
    return ProbeParams(game=game, n=n, **{**DEFAULTS.get(game, {}), **overrides})


# ------------------------------------------------------------------------------------------ rollout keys
def rollout_key(seed: int, step: int, rollout: int) -> int:
    """The 63-bit key of rollout `rollout` at the position (seed, step): a SeedSequence hash, stable across
    platforms and numpy versions."""
    words = np.random.SeedSequence([_ROLLOUT_SALT, seed, step, rollout]).generate_state(2, dtype=np.uint32)
    return ((int(words[0]) << 32) | int(words[1])) & _MASK63


def rekey(game: str, state: dict[str, Any], key: int) -> dict[str, Any]:
    """`state` with its hidden randomness replaced by `key` (the visible position kept): 2048 and Candy
    Crush get a fresh spawn/refill stream; Tetris keeps the current piece and the preview, shuffles the
    drawn but unseen rest of the queue and draws later bags from `key`."""
    out = dict(state)
    if game == "2048":
        out.update(rng_key=key, rng_counter=0)
    elif game == "candy_crush":
        out.update(rng_key=key, candy_counter=0, shuffle_counter=0)
    elif game == "tetris":
        from coplay_envs.tetris.rules import PREVIEW

        queue = list(state["queue"])
        hidden = queue[PREVIEW:]
        order = np.random.default_rng(key).permutation(len(hidden))
        out.update(queue=queue[:PREVIEW] + [hidden[int(i)] for i in order], bag_seed=key & 0x7FFFFFFF)
    else:
        raise ValueError(f"probe: no rekeying for game {game!r}")
    return out


# ------------------------------------------------------------------------------------------ values
def action_values(params: ProbeParams, state: dict[str, Any], actions: list[str], seed: int,
                  step: int) -> list[float]:
    """Mean over `params.rollouts` rekeyed futures of (reward of the action + the rollout policy's return
    over `params.horizon` further steps), for each of `actions` at `state` (the position drawn at
    (seed, step)). Rollout r uses the same rekeyed state and rollout-bot seed for every action."""
    env = coplay_envs.make_env(params.game, **params.env_kwargs)
    totals = [0.0] * len(actions)
    for r in range(params.rollouts):
        key = rollout_key(seed, step, r)
        start = rekey(params.game, state, key)
        for j, action in enumerate(actions):
            env.reset(options={"state": start})
            observation, reward, terminated, truncated, info = env.step(action)
            total = float(reward)
            bot = coplay_envs.make_bot(params.game, params.rollout_policy, seed=key)
            for _ in range(params.horizon):
                if terminated or truncated:
                    break
                observation, reward, terminated, truncated, info = env.step(bot.act(observation, info).action)
                total += float(reward)
            totals[j] += total
    return [t / params.rollouts for t in totals]


# ------------------------------------------------------------------------------------------ positions
@dataclass(frozen=True)
class Draw:
    """One position drawn from bot play, before it is valued."""

    source: str
    seed: int
    step: int
    state: dict[str, Any]
    legal_actions: list[str]


def _candidates(params: ProbeParams) -> Iterator[tuple[int, str, int]]:
    """(seed, source, target step) of candidate games: seeds from `seed_base` upward, sources alternating
    expert / random, the target step uniform in 0..max_step from the seed's own generator."""
    j = 0
    while True:
        seed = params.seed_base + j
        target = int(np.random.default_rng([_ROLLOUT_SALT, seed]).integers(0, params.max_step + 1))
        yield seed, SOURCES[j % 2], target
        j += 1


def draw_position(params: ProbeParams, seed: int, source: str, target: int) -> Draw | None:
    """The position after `target` steps of the `source` bot from `reset(seed=seed)`, or, when the game
    ends first, its last position; only positions with at least two legal actions count (one with a
    single legal action cannot tell choices apart), so the step moves on to the next such position. None
    when the game has none."""
    env = coplay_envs.make_env(params.game, **params.env_kwargs)
    bot = coplay_envs.make_bot(params.game, source, seed=seed)
    observation, info = env.reset(seed=seed)
    found: Draw | None = None
    step = 0
    while True:
        if len(info["legal_actions"]) >= 2:
            found = Draw(source, seed, step, info["state"], list(info["legal_actions"]))
            if step >= target:
                return found
        observation, _, terminated, truncated, info = env.step(bot.act(observation, info).action)
        step += 1
        if terminated or truncated:
            return found


def draw_positions(params: ProbeParams) -> list[Draw]:
    """`params.n` positions, deterministically: candidate games in seed order, a game without a usable
    position skipped (a bounded search: a probe never loops forever on a degenerate game)."""
    draws: list[Draw] = []
    for tries, (seed, source, target) in enumerate(_candidates(params)):
        if len(draws) == params.n:
            return draws
        if tries >= 20 * params.n:
            raise RuntimeError(f"probe: only {len(draws)} of {params.n} positions in {tries} {params.game} "
                               "games; the game never offers two legal actions")
        position = draw_position(params, seed, source, target)
        if position is not None:
            draws.append(position)
    raise AssertionError("unreachable")


def value_draws(params: ProbeParams, draws: list[Draw],
                progress: Callable[[int, int], None] | None = None) -> list[tuple[list[float], float]]:
    """(values of the legal actions, value of the fallback) of each drawn position."""
    out: list[tuple[list[float], float]] = []
    for i, position in enumerate(draws):
        values = action_values(params, position.state, [*position.legal_actions, FALLBACK_ACTION],
                               position.seed, position.step)
        out.append((values[:-1], values[-1]))
        if progress is not None:
            progress(i + 1, len(draws))
    return out


def with_n(params: ProbeParams, n: int) -> ProbeParams:
    """The same parameters for another number of positions (the first positions are the same)."""
    return replace(params, n=n)
