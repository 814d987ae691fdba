"""The bounded serving set (issue 18 part 3): frozen `act` versions are served only where a configured game
seats model opponents that the pool draws frozen, chosen by the pool's rule (the newest, the rest spread over
older ones) and capped so current + previous + frozen fit `engine.max_loras`; the opponent pool draws only
what is served."""

from __future__ import annotations

import pytest

from coplay.config import load_config
from coplay.driver.plans import iteration_plans
from coplay.driver.serving import frozen_opponents
from tests.helpers import REPO


@pytest.mark.parametrize("game", ["2048", "candy_crush", "tetris", "mario"])
def test_single_player_runs_serve_no_frozen_version(game):
    cfg = load_config(None, [f"games=[{game}]", "engine.max_loras=40"])
    assert frozen_opponents(cfg, list(range(1, 11)), 10) == []


def test_a_pool_that_never_draws_frozen_serves_none():
    cfg = load_config(None, ["games=[avalon]", "engine.max_loras=40", "rollout.opponents.frozen=0"])
    assert frozen_opponents(cfg, list(range(1, 11)), 10) == []


@pytest.mark.parametrize("max_loras", [10, 11, 12, 14, 20])
def test_self_play_frozen_versions_fit_the_lora_slots_newest_first_then_spread(max_loras):
    cfg = load_config(None, ["games=[avalon]", f"engine.max_loras={max_loras}"])
    frozen = frozen_opponents(cfg, list(range(1, 31)), 30)
    assert 2 * len(cfg.active_adapters) + len(frozen) <= max_loras
    assert len(frozen) == max_loras - 2 * len(cfg.active_adapters)
    assert all(v < 30 for v in frozen) and frozen == sorted(set(frozen))
    if frozen:
        assert frozen[-1] == 29  # the newest earlier version is always there
    if len(frozen) >= 3:
        assert frozen[0] == 1  # and the rest reach back to the oldest


def test_newer_versions_than_the_current_are_never_frozen_opponents():
    cfg = load_config(None, ["games=[diplomacy]", "engine.max_loras=40"])
    assert frozen_opponents(cfg, [1, 2, 3, 4, 5], 3) == [1, 2]


def test_the_selfplay_config_draws_only_served_versions():
    cfg = load_config(REPO / "launch" / "configs" / "avalon-selfplay.yaml")
    frozen = frozen_opponents(cfg, list(range(0, 40)), 39)
    assert len(frozen) == cfg.engine.max_loras - 2 * len(cfg.active_adapters) > 0
    versions = dict.fromkeys(cfg.active_adapters, 39)
    plans = iteration_plans(cfg, 40, versions, frozen, 38)
    drawn = {int(p.seat.act.split("@v")[1]) for plan in plans for p in plan.players.values()
             if p.kind == "frozen"}
    assert drawn and drawn <= set(frozen)
