"""Mario bots over 20 seeded episodes each (slow: about 3 minutes on one core): the expert reaches the flag
of 1-1 within 200 actions and goes much further than the random bot."""

from __future__ import annotations

import statistics

import pytest

from coplay_envs.mario.bots import evaluate

SEEDS = range(1000, 1020)


@pytest.mark.slow
def test_expert_reaches_the_flag_and_beats_random_over_20_seeds():
    expert = evaluate("expert", SEEDS)
    random = evaluate("random", SEEDS)
    flags = sum(episode["flag"] for episode in expert)
    assert flags >= 18, [(episode["seed"], episode["score"]) for episode in expert]
    assert all(episode["steps"] <= 200 for episode in expert)
    expert_mean = statistics.mean(episode["score"] for episode in expert)
    random_mean = statistics.mean(episode["score"] for episode in random)
    assert expert_mean > 3000 and expert_mean > 3 * random_mean
    assert not any(episode["flag"] for episode in random)
