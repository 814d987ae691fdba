"""The per-decision probe (`coplay.eval.probe`): a rebuild gives the same bytes, regret is 0 for the best
move and best - fallback for an unusable answer, a hand-made 2048 position values its moves as a person
would, a corrupt cache is rebuilt, and the expert bot scores a lower regret than the random bot."""

from __future__ import annotations

import json
import logging

import pytest

from coplay.eval import probe as probe_mod
from coplay.eval.probe import (
    FALLBACK_ACTION,
    PROBE_VERSION,
    ProbeSet,
    bot_actions,
    build_probe,
    cache_path,
    intervals_disjoint,
    judge,
    load_or_build,
    make_position,
    observe,
    probe_params,
    regret,
    resolve_action,
    score_actions,
)
from coplay.eval.probe_values import rekey, rollout_key

SMALL = {"n": 6, "horizon": 3, "rollouts": 2}


@pytest.fixture(scope="module")
def small_2048() -> ProbeSet:
    return build_probe("2048", **SMALL)


def _merge_board(horizon: int, rollouts: int = 4):
    """Two 64s stacked in column 0: up and down merge them (128 points), left and right merge nothing."""
    state = {"board": [[64, 0, 0, 2], [64, 0, 0, 4], [0, 0, 0, 0], [0, 0, 0, 0]], "score": 0, "moves": 0,
             "max_moves": 200, "rng_key": 12345, "rng_counter": 0}
    return make_position(probe_params("2048", horizon=horizon, rollouts=rollouts), state)


def test_a_rebuild_gives_the_same_bytes_and_the_file_round_trips(small_2048):
    again = build_probe("2048", **SMALL)
    assert again.to_bytes() == small_2048.to_bytes()
    assert ProbeSet.from_bytes(small_2048.to_bytes()) == small_2048
    doc = json.loads(small_2048.to_bytes())
    assert doc["probe_version"] == PROBE_VERSION and doc["sha256"] == small_2048.sha256


def test_positions_come_from_both_bots_on_probe_seeds_and_restore_exactly(small_2048):
    positions = small_2048.positions
    assert len(positions) == 6
    assert {p.source for p in positions} == {"expert", "random"}
    assert all(p.seed >= 2_000_000 for p in positions)
    assert len({p.step for p in positions}) > 1
    for p in positions:
        _, info = observe(p)
        assert info["legal_actions"] == p.legal_actions and info["state"] == p.state
        assert len(p.values) == len(p.legal_actions) >= 2 and p.best_value == max(p.values)


def test_regret_is_zero_for_a_best_move_and_best_minus_fallback_for_an_unusable_answer(small_2048):
    for p in small_2048.positions:
        best = p.best_actions[0]
        assert regret(p, best) == 0.0 and judge(p, best).best
        for unusable in (None, "", FALLBACK_ACTION, "fly to the moon"):
            verdict = judge(p, unusable)
            assert verdict.invalid and verdict.action is None
            assert verdict.regret == p.best_value - p.fallback_value
        worst = min(p.legal_actions, key=p.value_of)
        assert regret(p, worst) == p.best_value - p.value_of(worst) >= 0


def test_the_merging_moves_are_worth_128_more_and_spellings_the_game_accepts_count():
    p = _merge_board(horizon=0)
    assert p.legal_actions == ["up", "down", "left", "right"]
    assert [p.value_of(a) for a in p.legal_actions] == [128.0, 128.0, 0.0, 0.0]
    assert p.fallback_value == 0.0 and sorted(p.best_actions) == ["down", "up"]
    assert regret(p, "left") == 128.0 and regret(p, "UP ") == 0.0
    assert resolve_action(p, " Down") == "down"
    # with rollouts after the move the order stays: merging now beats hoping the rollout merges later
    q = _merge_board(horizon=2, rollouts=8)
    assert min(q.value_of("up"), q.value_of("down")) > max(q.value_of("left"), q.value_of("right"))
    assert max(q.value_of("left"), q.value_of("right")) > q.fallback_value - 1e-9


def test_a_move_that_changes_nothing_scores_the_fallback():
    state = {"board": [[2, 4, 8, 16], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]], "score": 0, "moves": 0,
             "max_moves": 200, "rng_key": 7, "rng_counter": 0}
    p = make_position(probe_params("2048", horizon=1, rollouts=2), state)
    assert "up" not in p.legal_actions
    assert judge(p, "up").invalid and regret(p, "up") == p.best_value - p.fallback_value


def test_rollouts_see_different_futures_of_the_same_visible_position(small_2048):
    p = small_2048.positions[0]
    keys = [rollout_key(p.seed, p.step, r) for r in range(3)]
    assert len(set(keys)) == 3 and keys[0] == rollout_key(p.seed, p.step, 0)
    states = [rekey("2048", p.state, k) for k in keys]
    assert all(s["board"] == p.state["board"] for s in states)
    assert len({s["rng_key"] for s in states}) == 3
    tetris = build_probe("tetris", n=1, horizon=0, rollouts=1).positions[0].state
    again = rekey("tetris", tetris, keys[0])
    assert again["current"] == tetris["current"] and again["queue"][:4] == tetris["queue"][:4]
    assert sorted(again["queue"]) == sorted(tetris["queue"])


def test_load_or_build_reuses_a_good_cache_and_rebuilds_a_corrupt_one(tmp_path, caplog, monkeypatch):
    first = load_or_build("2048", tmp_path, **SMALL)
    path = cache_path(first.params, tmp_path)
    assert path.read_bytes() == first.to_bytes()

    def no_build(*args, **kwargs):
        raise AssertionError("a matching cache must be reused")

    with monkeypatch.context() as m:
        m.setattr(probe_mod, "build_probe", no_build)
        assert load_or_build("2048", tmp_path, **SMALL) == first
    for damage in (b"{not json", first.to_bytes().replace(b'"score":', b'"score":1', 1)):
        path.write_bytes(damage)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="coplay.eval.probe"):
            assert load_or_build("2048", tmp_path, **SMALL) == first
        assert "rebuilding" in caplog.text
        assert path.read_bytes() == first.to_bytes()
    other = load_or_build("2048", tmp_path, **{**SMALL, "horizon": 2})
    assert other.params.horizon == 2 and cache_path(other.params, tmp_path) != path


def test_the_expert_ranks_above_random_on_a_small_probe():
    probe = build_probe("candy_crush", n=24, horizon=0, rollouts=4)
    expert = score_actions(probe, bot_actions(probe, "expert"))
    rand = score_actions(probe, bot_actions(probe, "random"))
    assert expert["n"] == rand["n"] == 24
    assert expert["mean_regret"] < rand["mean_regret"] and expert["best_share"] > rand["best_share"]
    assert intervals_disjoint(expert, rand)
    assert expert["invalid_share"] == rand["invalid_share"] == 0.0
    nothing = score_actions(probe, [None] * 24)
    assert nothing["invalid_share"] == 1.0 and nothing["best_share"] == 0.0
    with pytest.raises(ValueError, match="24 positions"):
        score_actions(probe, ["x"])


def test_the_benchmark_reports_both_bots_per_game(tmp_path):
    from benchmarks.probe import main

    out = tmp_path / "probe-bots.json"
    main(["--games", "candy_crush", "--n", "4", "--out", str(out)])
    report = json.loads(out.read_text())
    game = report["games"]["candy_crush"]
    assert report["command"].startswith("python -m benchmarks.probe") and report["n"] == 4
    assert game["positions"] == 4 and game["params"]["game"] == "candy_crush"
    assert set(game["expert"]["regret"]) >= {"mean", "ci_low", "ci_high", "boot_low", "boot_high"}
    assert isinstance(game["separated"], bool) and "candy_crush_expert_regret" in report["headline"]
