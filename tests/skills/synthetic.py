"""Hand-made trajectories with known answers for the skill-bank tests.

Behaviour A ("MERGE"): x rises every step, `flag` becomes true after the first step, y stays.
Behaviour B ("BUILD"): y falls every step, `flag` becomes false after the first step, x stays.
Behaviour C ("DEFEND"): z rises by 2 every step, `shield` becomes true (A and B set it false again).
`score` rises every step in both (a literal that says nothing about either behaviour).
"""

from __future__ import annotations

import random

from coplay.types import Step, Trajectory

BEHAVIOURS = {"A": "MERGE", "B": "BUILD", "C": "DEFEND"}


def behaviour_block(kind: str, length: int, state: dict, t0: int) -> list[Step]:
    steps = []
    for i in range(length):
        before = dict(state)
        if kind == "A":
            state["x"] += 1
            state["flag"] = True
        elif kind == "B":
            state["y"] -= 1
            state["flag"] = False
        elif kind == "C":
            state["z"] += 2
            state["shield"] = True
        if kind != "C":
            state["shield"] = False
        state["score"] += 1
        steps.append(Step(t=t0 + i, observation=f"obs {t0 + i}", action=f"act{kind}",
                          reward=1.0 if kind == "A" else 0.0,
                          score=float(state["score"]), intention=f"{BEHAVIOURS[kind]} do {kind}",
                          features_before=before, features_after=dict(state)))
    return steps


def alternating_trajectory(seed: int, blocks: int = 8, kinds: str = "AB", game: str = "2048",
                           min_len: int = 4, max_len: int = 6) -> Trajectory:
    """Blocks of the given behaviours in turn, lengths drawn from [min_len, max_len] with `seed`."""
    rng = random.Random(seed)
    state = {"x": 0.0, "y": 100.0, "z": 0.0, "flag": False, "shield": False, "score": 0}
    steps: list[Step] = []
    for b in range(blocks):
        kind = kinds[b % len(kinds)]
        steps += behaviour_block(kind, rng.randint(min_len, max_len), state, len(steps))
    return Trajectory(episode_id=f"{game}-syn-{seed:04d}", game=game, seat="player_0", role="player",
                      seed=seed, steps=steps)


def shard(n: int, first_seed: int = 0, **kwargs) -> list[Trajectory]:
    return [alternating_trajectory(first_seed + i, **kwargs) for i in range(n)]
