"""TetrisEnv against the env contract: gymnasium checks, faithful text, features from the view,
determinism, state round trips, garbage actions, the registry, and the bots."""

from __future__ import annotations

import json
import random

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

import coplay_envs
from coplay_envs.core import INTENTION_TAGS, BotAction
from coplay_envs.tetris.bots import ExpertBot, RandomBot, play_episode
from coplay_envs.tetris.env import RULES, TetrisEnv
from coplay_envs.tetris.features import compute_features
from coplay_envs.tetris.text import parse_observation

INFO_KEYS = {"legal_actions", "state", "view", "features", "score", "invalid_action"}


def rollout(seed: int, actions: list[object]) -> list[str]:
    """Every observation, reward, flag and info of a run, serialised for exact comparison."""
    env = TetrisEnv()
    obs, info = env.reset(seed=seed)
    record = [json.dumps([obs, info], sort_keys=True)]
    for action in actions:
        record.append(json.dumps(env.step(action), sort_keys=True))
    return record


def test_gymnasium_check_env_passes() -> None:
    check_env(gymnasium.make("coplay/Tetris-v0", render_mode="ansi").unwrapped)


def test_the_registered_ids_and_factories_build_the_game() -> None:
    env = gymnasium.make("coplay/Tetris-v0")
    obs, info = env.reset(seed=3)
    assert obs.startswith("TETRIS") and INFO_KEYS <= set(info)
    assert isinstance(coplay_envs.make_env("tetris"), TetrisEnv)
    assert isinstance(coplay_envs.make_bot("tetris", "expert", seed=1), ExpertBot)
    assert isinstance(coplay_envs.make_bot("tetris", "random", seed=1), RandomBot)
    assert coplay_envs.rules("tetris") == RULES and len(RULES.splitlines()) <= 12


@pytest.mark.parametrize("bot_class", [ExpertBot, RandomBot])
def test_the_rendered_text_parses_back_into_the_position(bot_class: type) -> None:
    env = TetrisEnv(max_placements=60)
    bot = bot_class(seed=4)
    obs, info = env.reset(seed=11)
    terminated = truncated = False
    while True:
        assert INFO_KEYS <= set(info)
        parsed = parse_observation(obs)
        state, view = info["state"], info["view"]
        assert parsed["board"] == state["board"]
        assert parsed["current"] == state["current"] and parsed["preview"] == state["queue"][:4]
        for key in ("placements", "score", "lines", "last_lines", "game_over"):
            assert parsed[key] == state[key], key
        assert parsed["column_heights"] == view["column_heights"] and parsed["holes"] == view["holes"]
        assert parsed["legal_actions"] == info["legal_actions"]
        if not (terminated or truncated):
            assert f"place {state['current']} rot <r> col <c>" in obs
        else:
            break
        obs, _, terminated, truncated, info = env.step(bot.act(obs, info).action)


def test_features_come_from_the_view_alone() -> None:
    env = TetrisEnv()
    bot = RandomBot(seed=2)
    obs, info = env.reset(seed=9)
    for _ in range(15):
        view = json.loads(json.dumps(info["view"]))
        assert compute_features(view) == info["features"]
        assert all(isinstance(v, int | float | bool) for v in info["features"].values())
        obs, _, terminated, _, info = env.step(bot.act(obs, info).action)
        if terminated:
            break


def test_features_on_a_hand_made_board() -> None:
    rows = ["." * 10] * 16 + ["#.#.......", "#.#.#....#", "###.#....#", "####.##.#."]
    env = TetrisEnv()
    _, info = env.reset(options={"state": {
        "board": rows, "current": "I", "queue": ["O", "T", "S", "Z"], "bag_seed": 0, "bags_drawn": 1,
        "placements": 5, "lines": 2, "last_lines": 1, "score": 25, "game_over": False}})
    f = info["features"]
    assert info["view"]["column_heights"] == [4, 2, 4, 1, 3, 1, 1, 0, 1, 3]
    assert f["holes"] == 2 and f["rows_with_holes"] == 1  # row 1 of columns 4 and 9
    assert f["max_height"] == 4 and f["min_height"] == 0 and f["aggregate_height"] == 20
    assert f["bumpiness"] == 2 + 2 + 3 + 2 + 2 + 0 + 1 + 1 + 2
    assert f["deepest_well"] == 2  # columns 1 and 3
    assert f["wells"] == (1 + 2) + (1 + 2) + 1 + 1 + 1  # columns 1, 3 (runs of 2); 4, 7, 9 on row 1
    assert f["filled_cells"] == 18 and f["max_clear_now"] == 0 and not f["can_clear"]
    assert f["lines_cleared"] == 2 and f["last_lines"] == 1 and f["placements_left"] == 195
    assert f["current_is_i"] and not f["i_in_preview"] and not f["danger"] and not f["board_empty"]


def test_same_seed_and_actions_give_the_same_trajectory_bit_for_bit() -> None:
    actions = [f"place {p} rot {r} col {c}" for p, r, c in zip("IOTSZJL" * 6, [0, 1, 2, 3] * 11, range(40),
                                                                strict=False)]
    actions = actions + ["garbage", "", None] * 3
    assert rollout(21, actions) == rollout(21, actions)
    assert rollout(21, actions) != rollout(22, actions)


def test_reset_without_seed_continues_the_seeded_generator() -> None:
    first, second = TetrisEnv(), TetrisEnv()
    first.reset(seed=8)
    second.reset(seed=8)
    assert first.reset()[1]["state"] == second.reset()[1]["state"]


def test_state_round_trip_mid_game_reproduces_the_continuation() -> None:
    env = TetrisEnv()
    bot = ExpertBot(seed=0)
    obs, info = env.reset(seed=31)
    for _ in range(40):
        obs, _, _, _, info = env.step(bot.act(obs, info).action)
    saved = json.loads(json.dumps(info["state"]))
    continuation = []
    for _ in range(30):
        action = bot.act(obs, info).action
        continuation.append(action)
        obs, reward, terminated, truncated, info = env.step(action)
    original_tail = (obs, reward, terminated, truncated, info)

    restored = TetrisEnv()
    obs2, info2 = restored.reset(options={"state": saved})
    assert info2["state"] == saved
    for action in continuation:
        result = restored.step(action)
    assert json.dumps(result, sort_keys=True) == json.dumps(original_tail, sort_keys=True)


def test_a_thousand_random_and_garbage_actions_never_raise() -> None:
    rng = random.Random(0)
    env = TetrisEnv()
    obs, info = env.reset(seed=0)
    garbage: list[object] = ["", " ", "x" * 100_000, "place", "place T", "place T rot", "place T rot 1 col",
                             "🧱 place T rot 0 col 3 🧱", "place\x00T rot 0 col 0", None, b"\xff\xfe", 12,
                             3.5, ["place"], {"a": 1}, "place T rot 99999999999999999999 col 0",
                             "place T rot 0 col 99999999999999999999", "PLACE Ω rot 0 col 0"]
    for i in range(1000):
        if i % 3 == 0 and info["legal_actions"]:
            action: object = rng.choice(info["legal_actions"])
        elif i % 3 == 1:
            action = rng.choice(garbage)
        else:
            action = "".join(chr(rng.randrange(0, 0x2FFF)) for _ in range(rng.randrange(0, 40)))
        obs, reward, terminated, truncated, info = env.step(action)
        assert isinstance(obs, str) and isinstance(reward, float) and INFO_KEYS <= set(info)
        assert env.observation_space.contains(obs)
        if terminated or truncated:
            obs, info = env.reset(seed=i)


def test_bots_give_legal_actions_with_intentions_and_reasons() -> None:
    env = TetrisEnv(max_placements=40)
    for bot in (ExpertBot(seed=0), RandomBot(seed=0)):
        obs, info = env.reset(seed=5)
        while True:
            decision = bot.act(obs, info)
            assert isinstance(decision, BotAction) and decision.intention in INTENTION_TAGS
            assert (decision.action in info["legal_actions"] and decision.reason
                    and "\n" not in decision.reason)
            obs, _, terminated, truncated, info = env.step(decision.action)
            assert not info["invalid_action"]
            if terminated or truncated:
                break


def test_random_bot_is_reproducible_by_seed() -> None:
    env = TetrisEnv()
    scores = [play_episode(env, RandomBot(seed=s), seed=s) for s in (1, 1, 2)]
    assert scores[0] == scores[1]


def test_expert_survives_200_placements_and_far_outscores_random_over_twenty_seeds() -> None:
    """The figures with confidence intervals come from `python -m benchmarks.env_bench.tetris`."""
    env = TetrisEnv()
    expert = [play_episode(env, ExpertBot(seed=s), seed=s) for s in range(20)]
    random_scores = [play_episode(env, RandomBot(seed=s), seed=s)[0] for s in range(20)]
    assert sum(steps == 200 for _, steps in expert) >= 18
    expert_mean = sum(score for score, _ in expert) / 20
    assert expert_mean > 20 * (sum(random_scores) / 20)


def test_a_step_before_any_reset_does_not_raise() -> None:
    obs, reward, terminated, truncated, info = TetrisEnv().step("nonsense")
    assert info["invalid_action"] and reward == 1.0 and obs.startswith("TETRIS")
