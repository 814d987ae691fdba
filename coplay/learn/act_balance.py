"""Which `act` teacher examples the cold start trains on: spread over the teacher's actions, then over the
states it chose them in (`sft.act_balance`, docs/rewards.md). Pure Python: no torch, no ray.

Why: the teacher's own frequencies are a prior a small model learns first; decoded greedily (or at a low
temperature) any prior becomes one action everywhere. So per game the examples are picked round-robin over
the teacher's actions — every action gets as many as the rarer ones allow, up to the adapter's example
limit — and no action keeps more than `max_action_share` of them (its surplus is dropped) unless the teacher
chose fewer than 1/share distinct actions. Within an action the kept examples are spread evenly over step
depth (the episode's move number), so early and late positions stay. Every choice is deterministic given
the run seed.

Bound (what a user can rely on): in each game's kept `act` examples the most frequent action has at most
max(`max_action_share`, 1/k) of them (k: the distinct actions kept), and, when every action had more
examples than the game's limit / k, every action has floor or ceil of limit / k.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol


class ActExample(Protocol):
    """What balancing reads of an SFT example (`coplay.learn.teacher.ChatExample`)."""

    adapter: str
    game: str
    action: str
    step: int


def action_quotas(counts: dict[str, int], total: int, max_share: float, rng: random.Random) -> dict[str, int]:
    """How many examples of each action to keep, out of `counts[action]` available, `total` at most:
    water-filling (each round gives every action with examples left an equal number; the last few go to
    actions drawn with `rng`), then the share cap (the largest per-action count c with
    c <= max(max_share, 1/k) x the kept total)."""
    quotas = dict.fromkeys(counts, 0)
    left = min(total, sum(counts.values()))
    open_actions = sorted(a for a, n in counts.items() if n > 0)
    while left > 0 and open_actions:
        level = left // len(open_actions)
        if level == 0:
            for action in rng.sample(open_actions, left):
                quotas[action] += 1
            break
        for action in open_actions:
            give = min(level, counts[action] - quotas[action])
            quotas[action] += give
            left -= give
        open_actions = [a for a in open_actions if quotas[a] < counts[a]]
    kept = [q for q in quotas.values() if q > 0]
    if not kept:
        return quotas
    bound = max(max_share, 1.0 / len(kept))
    low, high = 1, max(kept)  # share(c) = c / sum(min(q, c)) grows with c: the largest c within the bound
    while low < high:
        mid = (low + high + 1) // 2
        if mid <= bound * sum(min(q, mid) for q in kept) + 1e-9:
            low = mid
        else:
            high = mid - 1
    return {a: min(q, low) for a, q in quotas.items()}


def spread_over_depth(indices: list[int], steps: list[int], keep: int, rng: random.Random) -> list[int]:
    """`keep` of `indices` (positions into `steps`), evenly spaced over step depth (sorted by step, then by
    position) from a random offset."""
    if keep >= len(indices):
        return list(indices)
    ordered = sorted(indices, key=lambda i: (steps[i], i))
    offset = rng.random()
    return [ordered[int((j + offset) * len(ordered) / keep)] for j in range(keep)]


def game_limits(sizes: dict[str, int], limit: int) -> dict[str, int]:
    """The adapter's example limit split over games in proportion to their examples (largest remainders
    first), never more than a game has."""
    total = sum(sizes.values())
    if total <= limit:
        return dict(sizes)
    exact = {g: limit * n / total for g, n in sizes.items()}
    out = {g: int(x) for g, x in exact.items()}
    for g in sorted(exact, key=lambda g: (out[g] - exact[g], g))[:limit - sum(out.values())]:
        out[g] += 1
    return out


def balance_act_examples(examples: Sequence[Any], limit: int, max_share: float,
                         seed: int) -> tuple[list[Any], dict[str, Any]]:
    """The examples with each game's `act` ones balanced (module docstring) and at most `limit` `act`
    examples in all; the other adapters' examples pass through in order, after them. Returns (examples,
    report): per game the teacher's and the kept action counts (the 8 most frequent), the top action's
    share before and after, and the bound that held."""
    act = [e for e in examples if e.adapter == "act"]
    rest = [e for e in examples if e.adapter != "act"]
    by_game: dict[str, list[Any]] = {}
    for e in act:
        by_game.setdefault(e.game, []).append(e)
    limits = game_limits({g: len(v) for g, v in by_game.items()}, limit)
    kept: list[Any] = []
    report: dict[str, Any] = {}
    for game, mine in by_game.items():
        rng = random.Random(f"act-balance/{seed}/{game}")
        counts = Counter(e.action for e in mine)
        quotas = action_quotas(dict(counts), limits[game], max_share, rng)
        steps = [e.step for e in mine]
        chosen: list[int] = []
        for action in sorted(quotas):
            positions = [i for i, e in enumerate(mine) if e.action == action]
            chosen += spread_over_depth(positions, steps, quotas[action], rng)
        picked = [mine[i] for i in sorted(chosen)]  # the teacher's order: by seed, then by step
        kept += picked
        after = Counter(e.action for e in picked)
        report[game] = {"teacher": _summary(counts), "kept": _summary(after),
                        "bound": max(max_share, 1.0 / max(1, len(after)))}
    return kept + rest, report


def _summary(counts: Counter[str]) -> dict[str, Any]:
    n = sum(counts.values())
    top = counts.most_common(8)
    return {"examples": n, "actions": len(counts), "top_share": top[0][1] / n if n else 0.0,
            "most_common": [[a, c] for a, c in top]}
