"""Line-ups of multi-seat games (Avalon, Diplomacy): who sits where in one GRPO group.

Why per group: GRPO compares the G episodes of a group; if each episode drew its own opponents, the
advantage would mix the opponents' strength with the policy's. So a group's line-up (which seat the learning
policy takes, and the kind, version and seat of every opponent) is drawn once and shared by its G episodes.

Which seat learns: the learner's *role* cycles over the game's roles (Avalon: merlin, servant, minion,
assassin; Diplomacy: the seven powers) in the proportions of `rollout.selfplay.schedule` (integer weights;
default 1 each), by a smooth weighted round robin over the run's groups in order. Any L consecutive groups of
a game (L = the sum of its weights) give every role exactly its weight; an iteration whose
`rollout.start_states` is a multiple of L does so on its own. In Avalon the deal depends on the seed, so the
seat is the one the seed deals that role to (two servants: they alternate). As in SPIRAL (one shared policy
for every role, role-conditioned advantages), each seat's samples form their own group, so advantages are
normalised per role within a group (`coplay.learn.advantages`).

Modes (`rollout.selfplay.mode`): `pool` — one learner seat, the others drawn from the opponent pool
(`rollout.opponents`; a `current` draw plays the current policy without training); `full` — the current policy
in every seat, every seat trains. Pure Python: no ray, no torch.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping

from coplay.agent.decision import ModelSeat, derive_seed
from coplay.agent.openai_player import OpenAIEndpoint
from coplay.config import CoplayConfig
from coplay.rollout.model_episodes import SeatPlayer, with_versions

#: (kind, act version or None) -> draw weight multiplier; the league's PFSP hook (`coplay.league`).
OpponentPriority = Callable[[str, int | None], float]


def role_weights(cfg: CoplayConfig, game: str) -> dict[str, int]:
    """The learner's role schedule of `game`: role id -> weight (every role 1 unless configured)."""
    import coplay_envs

    roles = coplay_envs.role_ids(game)
    configured = cfg.rollout.selfplay.schedule.get(game)
    if configured is None:
        return dict.fromkeys(roles, 1)
    unknown = sorted(set(configured) - set(roles))
    if unknown:
        raise ValueError(f"rollout.selfplay.schedule.{game}: unknown role(s) {unknown}; expected some of "
                         f"{list(roles)}")
    return {role: int(configured.get(role, 0)) for role in roles}


def check_schedule(cfg: CoplayConfig) -> None:
    """Raise a one-line `ValueError` for a schedule naming a single-player game or an unknown role."""
    import coplay_envs

    for game in cfg.rollout.selfplay.schedule:
        if not coplay_envs.seats(game):
            raise ValueError(f"rollout.selfplay.schedule.{game}: {game} is a single-player game; only "
                             f"multi-seat games have a seat schedule")
        role_weights(cfg, game)


def role_cycle(weights: Mapping[str, int]) -> list[str]:
    """One cycle of the smooth weighted round robin: each role appears `weight` times, spread out
    (weights {a: 2, b: 1} -> [a, b, a])."""
    total = sum(weights.values())
    current = dict.fromkeys(weights, 0)
    out = []
    for _ in range(total):
        for role, w in weights.items():
            current[role] += w
        best = max(current, key=lambda r: current[r])  # first maximum: deterministic
        current[best] -= total
        out.append(best)
    return out


def learner_seat(cfg: CoplayConfig, game: str, seed: int, group_index: int) -> tuple[str, str]:
    """(seat, role) of the learning policy in group number `group_index` of the run (0-based, per game)."""
    import coplay_envs

    cycle = role_cycle(role_weights(cfg, game))
    role = cycle[group_index % len(cycle)]
    holders = [seat for seat, r in coplay_envs.seat_roles(game, seed).items() if r == role]
    return holders[(group_index // len(cycle)) % len(holders)], role


def draw_opponent(cfg: CoplayConfig, rng: random.Random, act_versions: list[int], current: ModelSeat,
                  priority: OpponentPriority | None = None) -> SeatPlayer:
    """One opponent from the pool (docs/selfplay.md): the current policy, a frozen earlier version (half the
    draws the newest, the rest spread over older ones), an expert or random bot, or the configured
    OpenAI-compatible endpoint (sampled like the current policy's `act`). `priority` (the league's PFSP)
    multiplies each kind's weight, and picks the frozen version by its own weights."""
    pool = cfg.rollout.opponents
    kinds = ["current", "frozen", "expert", "random", "openai"]
    has_endpoint = pool.endpoint.configured
    weights = [pool.current, pool.frozen if act_versions else 0.0, pool.expert, pool.random,
               pool.openai if has_endpoint else 0.0]
    older = sorted(act_versions)
    if priority is not None:
        frozen_priority = max((priority("frozen", v) for v in older), default=0.0)
        weights = [w * (frozen_priority if k == "frozen" else priority(k, None))
                   for k, w in zip(kinds, weights, strict=True)]
    kind = rng.choices(kinds, weights=weights)[0] if sum(weights) > 0 else "current"
    if kind == "current":
        return SeatPlayer("current", current)
    if kind == "frozen":
        if priority is not None:
            version = rng.choices(older, weights=[priority("frozen", v) for v in older])[0]
        else:
            version = older[-1] if rng.random() < 0.5 or len(older) == 1 else rng.choice(older[:-1])
        return SeatPlayer("frozen", with_versions(current, f"act@v{version}", None))
    if kind == "openai":
        return SeatPlayer("openai", current, OpenAIEndpoint.from_config(pool.endpoint))
    return SeatPlayer(kind)


def draw_lineup(cfg: CoplayConfig, game: str, seed: int, group_index: int, group: str, iteration: int,
                act_versions: list[int], current: ModelSeat,
                priority: OpponentPriority | None = None) -> dict[str, SeatPlayer]:
    """Every seat's player for one group: the learner's scheduled seat is `model`; in `pool` mode the others
    are drawn from the pool (one draw per seat, seeded by (run seed, iteration, group, seat)); in `full` mode
    every seat is `model`."""
    import coplay_envs

    seats = coplay_envs.seats(game)
    if cfg.rollout.selfplay.mode == "full":
        return {seat: SeatPlayer("model", current) for seat in seats}
    mine, _ = learner_seat(cfg, game, seed, group_index)
    lineup = {}
    for seat in seats:
        if seat == mine:
            lineup[seat] = SeatPlayer("model", current)
            continue
        rng = random.Random(derive_seed(cfg.seeds.run, iteration, group, seat, "opponent"))
        lineup[seat] = draw_opponent(cfg, rng, act_versions, current, priority)
    return lineup
