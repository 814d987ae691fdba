"""Diplomacy seeded start positions: different seeds differ, the same seed is bit-identical (in and across
processes), positions are legal Spring movement phases, the horizon counts from the start, and the
standard opening stays available."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from coplay_envs.diplomacy import env as env_module
from coplay_envs.diplomacy.bots import ExpertBot
from coplay_envs.diplomacy.env import DiplomacyEnv
from coplay_envs.diplomacy.orders import POWERS
from coplay_envs.diplomacy.start import MAX_START_YEARS

TRAIN_SEEDS = list(range(0, 12))
EVAL_SEEDS = list(range(1_000_000, 1_000_012))  # the disjoint seeds.eval range of the default config


def board(info: dict[str, Any]) -> str:
    engine = info["state"]["engine"]
    return json.dumps([engine["name"], engine["units"], engine["centers"]], sort_keys=True)


def test_different_seeds_give_different_positions_train_and_eval_alike() -> None:
    env = DiplomacyEnv()
    boards = {}
    for seed in TRAIN_SEEDS + EVAL_SEEDS:
        _, infos = env.reset(seed=seed)
        boards[seed] = board(infos["FRANCE"])
    assert len(set(boards.values())) == len(boards)
    assert {json.loads(b)[0] for b in boards.values()} == {"S1902M", "S1903M", "S1904M"}  # all 3 years drawn


def test_same_seed_gives_bit_identical_state_and_observations() -> None:
    first = DiplomacyEnv().reset(seed=41)
    env_module._start_position.cache_clear()  # the second start is computed again, not read from the cache
    second = DiplomacyEnv().reset(seed=41)
    assert json.dumps(first) == json.dumps(second)
    assert json.dumps(DiplomacyEnv().reset(seed=41)) == json.dumps(first)  # and the cached one too


def test_seeded_start_does_not_depend_on_the_process_or_its_hash_seed() -> None:
    script = ("import hashlib, json; from coplay_envs.diplomacy.env import DiplomacyEnv; "
              "print(hashlib.sha256(json.dumps(DiplomacyEnv().reset(seed=1_000_003)).encode()).hexdigest())")
    digests = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": str(hash_seed)}).stdout
               for hash_seed in (1, 2)}
    here = __import__("hashlib").sha256(json.dumps(DiplomacyEnv().reset(seed=1_000_003)).encode()).hexdigest()
    assert digests == {here + "\n"}


@pytest.mark.parametrize("seed", [0, 5, 1_000_001])
def test_seeded_start_is_a_clean_spring_position(seed: int) -> None:
    env = DiplomacyEnv(max_phases=7)
    _, infos = env.reset(seed=seed)
    view, engine = infos["AUSTRIA"]["view"], infos["AUSTRIA"]["state"]["engine"]
    assert view["phase"] in ("S1902M", "S1903M", "S1904M") and view["stage"] == "negotiation"
    assert view["phases_played"] == 0 and infos["AUSTRIA"]["features"]["phases_left"] == 7
    assert view["messages"] == [] and view["last_phase"].startswith(("W", "F"))  # what everyone saw last
    assert all(not retreats for retreats in engine["retreats"].values())
    places = [unit[2:5] for units in view["units"].values() for unit in units]
    assert len(places) == len(set(places))  # one unit per province
    owned = [center for centers in view["centers"].values() for center in centers]
    assert len(owned) == len(set(owned)) <= 34
    for power in POWERS:  # after the winter adjustments: no more units than centres
        assert len(view["units"][power]) <= len(view["centers"][power])


def test_horizon_counts_from_the_start_position() -> None:
    env = DiplomacyEnv(max_phases=4, negotiation_rounds=0)
    _, infos = env.reset(seed=8)
    start_year = int(infos["FRANCE"]["view"]["phase"][1:5])
    bots = {power: ExpertBot(seed=i, agent=power) for i, power in enumerate(POWERS)}
    played = []
    observations = {power: "" for power in POWERS}
    while env.agents:
        played.append(infos[env.agents[0]]["view"]["phase"])
        actions = {power: bots[power].act(observations[power], infos[power]).action for power in env.agents}
        observations, _, _, truncated, infos = env.step(actions)
    assert len(played) == 4 and all(truncated.values())
    assert infos["FRANCE"]["view"]["phases_played"] == 4 and played[0] == f"S{start_year}M"


def test_reset_state_reproduces_a_seeded_start_and_its_continuation() -> None:
    env = DiplomacyEnv(max_phases=6)
    observations, infos = env.reset(seed=17)
    state = json.loads(json.dumps(infos["ITALY"]["state"]))
    restored = DiplomacyEnv(start_years=0)  # the state holds the position: the restoring env's mode is moot
    again_observations, again_infos = restored.reset(options={"state": state})
    assert json.dumps([observations, infos]) == json.dumps([again_observations, again_infos])
    actions = {power: f"to ALL: hello from {power}" for power in POWERS}
    assert json.dumps(env.step(actions)) == json.dumps(restored.step(actions))
    assert json.dumps(env.step({})) == json.dumps(restored.step({}))


def test_standard_opening_stays_available() -> None:
    standard = DiplomacyEnv().reset()  # no seed: the standard opening
    assert standard[1]["FRANCE"]["view"]["phase"] == "S1901M"
    assert json.dumps(DiplomacyEnv(start_years=0).reset(seed=9)) == json.dumps(standard)
    assert json.dumps(DiplomacyEnv(start_years=[0, 0]).reset(seed=10)) == json.dumps(standard)


def test_start_years_choose_the_start_year() -> None:
    for seed in (1, 2, 3):
        assert DiplomacyEnv(start_years=2).reset(seed=seed)[1]["RUSSIA"]["view"]["phase"] == "S1903M"
        assert DiplomacyEnv(start_years=(1, 1)).reset(seed=seed)[1]["RUSSIA"]["view"]["phase"] == "S1902M"


def test_without_random_orders_the_warm_up_is_the_expert_game() -> None:
    """`start_random_share=0`: every seed with the same number of years gives the same (expert) position;
    the random orders are what tells seeds apart."""
    boards = {board(DiplomacyEnv(start_years=2, start_random_share=0.0).reset(seed=seed)[1]["FRANCE"])
              for seed in (0, 1, 2)}
    assert len(boards) == 1


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"start_years": (3, 1)}, r"start_years=\(3, 1\): expected an int or a pair"),
    ({"start_years": -1}, "start_years=-1"),
    ({"start_years": MAX_START_YEARS + 1}, f"<= {MAX_START_YEARS}"),
    ({"start_years": "2"}, "start_years='2'"),
    ({"start_random_share": 1.5}, r"start_random_share=1.5: expected a number in \[0, 1\]"),
])
def test_bad_start_options_are_refused_by_name(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DiplomacyEnv(**kwargs)


def test_a_negative_seed_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="seed=-3: expected a non-negative int"):
        DiplomacyEnv().reset(seed=-3)
