"""Spreading an iteration's episodes over rollout workers (issue 18 part 4): no worker idles when there are
fewer GRPO groups than workers (the shipped Diplomacy self-play config has 16 groups for 24 workers), whole
groups stay together otherwise, every episode lands exactly once, and training refuses a config with more
workers than episodes, saying how many would idle."""

from __future__ import annotations

import pytest

from coplay.config import ConfigError, load_config, require_trainable
from coplay.driver.plans import iteration_plans
from coplay.driver.spread import group_key, spread_plans
from tests.helpers import REPO


def _plans(start_states: int, group_size: int):
    cfg = load_config(None, [f"rollout.start_states={start_states}", f"rollout.group_size={group_size}"])
    return iteration_plans(cfg, 1, dict.fromkeys(("act", "retrieve", "segment", "contract", "curator"), 1),
                           [], 0)


def _check_exactly_once(plans, chunks):
    ids = [p.episode_id for chunk in chunks for p in chunk]
    assert sorted(ids) == sorted(p.episode_id for p in plans)


def test_fewer_groups_than_workers_splits_groups_so_every_worker_rolls_out():
    plans = _plans(start_states=16, group_size=8)  # 16 groups, 128 episodes
    chunks = spread_plans(plans, 24)
    _check_exactly_once(plans, chunks)
    assert sorted({len(c) for c in chunks}) == [5, 6]  # all 24 busy, balanced
    spans = {}
    for w, chunk in enumerate(chunks):
        for p in chunk:
            spans.setdefault(group_key(p), set()).add(w)
    assert max(len(s) for s in spans.values()) <= 3  # contiguous: 8 episodes over chunks of 5-6


def test_with_enough_groups_whole_groups_stay_on_one_worker():
    plans = _plans(start_states=6, group_size=4)
    chunks = spread_plans(plans, 4)
    _check_exactly_once(plans, chunks)
    assert all(chunks)
    for chunk in chunks:
        for key in {group_key(p) for p in chunk}:
            assert sum(group_key(p) == key for p in chunk) == 4


def test_the_diplomacy_selfplay_config_keeps_all_its_workers_busy():
    cfg = load_config(REPO / "launch" / "configs" / "diplomacy-selfplay.yaml")
    require_trainable(cfg)
    plans = iteration_plans(cfg, 1, dict.fromkeys(("act", "retrieve", "segment", "contract", "curator"), 1),
                            [], 0)
    assert all(spread_plans(plans, cfg.rollout.workers))  # every worker gets episodes


def test_more_workers_than_episodes_is_refused_saying_how_many_would_idle():
    cfg = load_config(None, ["rollout.workers=10", "rollout.start_states=2", "rollout.group_size=4"])
    with pytest.raises(ConfigError, match=r"rollout\.workers=10: an iteration plays 8 episodes .* 2 workers "
                                          r"would idle"):
        require_trainable(cfg)
