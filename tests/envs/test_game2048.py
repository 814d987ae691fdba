"""2048: rules on hand-made positions, text faithfulness, the env contract, robustness, bots."""

from __future__ import annotations

import json
import random

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

import coplay_envs
from coplay_envs.core import INTENTION_TAGS, BotAction
from coplay_envs.game2048 import features as features_module
from coplay_envs.game2048.bots import ExpertBot, RandomBot
from coplay_envs.game2048.env import RULES, Game2048Env
from coplay_envs.game2048.features import FEATURE_NAMES, features_from_view
from coplay_envs.game2048.rules import (
    apply_move,
    board_from_values,
    legal_directions,
    line_infos,
    slide_left,
    spawn,
)
from coplay_envs.game2048.text import parse_board


def _state(board: list[list[int]], score: int = 0, moves: int = 0, max_moves: int = 200) -> dict:
    return {"board": board, "score": score, "moves": moves, "max_moves": max_moves,
            "rng_key": 12345, "rng_counter": 7}


def _env_at(board: list[list[int]], **kwargs: int) -> tuple[Game2048Env, dict]:
    env = Game2048Env()
    _, info = env.reset(options={"state": _state(board, **kwargs)})
    return env, info


def _one_spawn(before: list[list[int]], after: list[list[int]]) -> None:
    """`after` equals `before` except one cell that was empty and now holds a 2 or a 4."""
    diffs = [(r, c) for r in range(4) for c in range(4) if before[r][c] != after[r][c]]
    assert len(diffs) == 1, (before, after)
    r, c = diffs[0]
    assert before[r][c] == 0 and after[r][c] in (2, 4)


def _row(values: list[int]) -> tuple[int, ...]:
    return board_from_values(values + [0] * 12)[:4]


@pytest.mark.parametrize(("row", "expected", "score"), [
    ([2, 2, 2, 2], [4, 4, 0, 0], 8),
    ([4, 4, 8, 8], [8, 16, 0, 0], 24),
    ([2, 2, 4, 0], [4, 4, 0, 0], 4),  # the new 4 does not merge again in the same move
    ([2, 0, 0, 2], [4, 0, 0, 0], 4),
    ([2, 2, 2, 0], [4, 2, 0, 0], 4),  # the pair nearest the wall merges first
    ([1024, 1024, 0, 0], [2048, 0, 0, 0], 2048),
    ([32768, 32768, 2, 2], [65536, 4, 0, 0], 65540),
])
def test_slide_left_merges_each_tile_at_most_once(row: list[int], expected: list[int], score: int) -> None:
    assert slide_left(_row(row)) == (_row(expected), score)


def test_directions_are_mirrors_and_transposes_of_left_and_conserve_tile_sum() -> None:
    rng = random.Random(3)

    def mirror(b: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(b[r * 4 + 3 - c] for r in range(4) for c in range(4))

    def transpose(b: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(b[c * 4 + r] for r in range(4) for c in range(4))

    for _ in range(500):
        board = tuple(rng.choice([0, 0, 1, 1, 2, 3, 11, 16]) for _ in range(16))
        left = apply_move(board, "left")
        assert apply_move(mirror(board), "right") == (mirror(left[0]), left[1])
        assert apply_move(transpose(board), "up") == (transpose(left[0]), left[1])
        assert apply_move(mirror(transpose(board)), "down")[1] == apply_move(mirror(board), "left")[1]
        for direction in ("up", "down", "left", "right"):
            after, score = apply_move(board, direction)
            assert sum(1 << e for e in after if e) == sum(1 << e for e in board if e)
            assert (after is board) == (direction not in legal_directions(*line_infos(board)))
            assert score % 4 == 0


def test_each_direction_merges_toward_the_wall_moved_to() -> None:
    board = [[2, 2, 2, 0], [0, 0, 0, 0], [2, 0, 0, 0], [2, 0, 0, 0]]
    for action, expected in [
        ("left", [[4, 2, 0, 0], [0, 0, 0, 0], [2, 0, 0, 0], [2, 0, 0, 0]]),
        ("right", [[0, 0, 2, 4], [0, 0, 0, 0], [0, 0, 0, 2], [0, 0, 0, 2]]),
        ("up", [[4, 2, 2, 0], [2, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]),
        ("down", [[0, 0, 0, 0], [0, 0, 0, 0], [2, 0, 0, 0], [4, 2, 2, 0]]),
    ]:
        env, _ = _env_at(board)
        _, reward, terminated, truncated, info = env.step(action)
        _one_spawn(expected, info["view"]["board"])
        assert (reward, terminated, truncated, info["invalid_action"]) == (4.0, False, False, False)
        assert info["score"] == 4 and info["state"]["moves"] == 1


def test_big_tiles_merge_with_exact_python_int_scores() -> None:
    env, _ = _env_at([[32768, 32768, 1024, 1024], [0] * 4, [0] * 4, [0] * 4], score=10**6)
    _, reward, _, _, info = env.step("left")
    assert reward == 65536 + 2048
    assert info["score"] == 10**6 + 65536 + 2048 and type(info["score"]) is int
    assert info["view"]["board"][0][:2] == [65536, 2048] and info["features"]["max_tile"] == 65536


def test_move_that_changes_nothing_scores_zero_spawns_nothing_and_is_flagged() -> None:
    board = [[2, 4, 8, 16], [0] * 4, [0] * 4, [0] * 4]
    env, info = _env_at(board)
    assert info["legal_actions"] == ["down"]
    for action in ("up", "left", "right", "UP", "jump", "", None, b"\xff", 3):
        _, reward, terminated, _, info = env.step(action)
        assert (reward, terminated, info["invalid_action"]) == (0.0, False, True)
        assert info["view"]["board"] == board
    assert info["state"]["moves"] == 9  # every step counts toward the move limit
    _, reward, _, _, info = env.step("  Down \n")
    assert reward == 0.0 and not info["invalid_action"]


def test_game_ends_when_no_move_changes_the_board() -> None:
    dead = [[2, 4, 2, 4], [4, 2, 4, 2], [2, 4, 2, 4], [4, 2, 4, 2]]
    env, info = _env_at(dead)
    assert info["legal_actions"] == [] and info["features"]["legal_moves"] == 0
    _, reward, terminated, truncated, info = env.step("left")
    assert (reward, terminated, truncated) == (0.0, True, False)
    assert info["legal_actions"] == [] and "Game over" in env.step("up")[0]


def test_truncated_at_the_move_limit() -> None:
    env = Game2048Env(max_moves=5)
    obs, info = env.reset(seed=3)
    for step in range(5):
        obs, _, terminated, truncated, info = env.step(info["legal_actions"][0])
        assert truncated == (step == 4) and not terminated
    assert info["legal_actions"] == [] and "limit" in obs
    _, reward, _, truncated, info = env.step("up")  # after the end: nothing happens
    assert reward == 0.0 and truncated and info["invalid_action"]


def test_spawns_are_twos_with_p_0_9_and_only_on_empty_cells() -> None:
    empty = (0,) * 16
    fours = sum(max(spawn(empty, key, 0)) == 2 for key in range(20000))
    assert 0.09 < fours / 20000 < 0.11
    assert spawn((1,) * 15 + (0,), 99, 3)[15] in (1, 2)


def _play(env: Game2048Env, seed: int, n: int, rng: random.Random) -> list[str]:
    obs, info = env.reset(seed=seed)
    trace = [json.dumps([obs, info], sort_keys=True)]
    for _ in range(n):
        action = rng.choice(["up", "down", "left", "right", "x"])
        obs, reward, terminated, truncated, info = env.step(action)
        trace.append(json.dumps([obs, reward, terminated, truncated, info], sort_keys=True))
        if terminated or truncated:
            break
    return trace


def test_same_seed_and_actions_give_identical_trajectories() -> None:
    assert _play(Game2048Env(), 7, 200, random.Random(1)) == _play(Game2048Env(), 7, 200, random.Random(1))
    assert _play(Game2048Env(), 7, 5, random.Random(1)) != _play(Game2048Env(), 8, 5, random.Random(1))


def test_state_round_trip_mid_game_continues_identically() -> None:
    env = Game2048Env()
    _, info = env.reset(seed=11)
    for i in range(40):
        _, _, _, _, info = env.step(["left", "down", "right", "up"][i % 4])
    saved = json.loads(json.dumps(info["state"]))
    actions = ["down", "left", "up", "right", "left"] * 10
    twin = Game2048Env()
    obs_b, info_b = twin.reset(options={"state": saved})
    assert info_b["state"] == info["state"] and info_b["view"] == info["view"]
    for action in actions:
        a = env.step(action)
        b = twin.step(action)
        assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_observation_text_parses_back_to_the_exact_board() -> None:
    env = Game2048Env(max_moves=400)
    rng = random.Random(5)
    obs, info = env.reset(seed=2)
    seen_values: set[int] = set()
    for _ in range(400):
        assert parse_board(obs) == board_from_values(info["state"]["board"])
        seen_values.update(v for row in info["state"]["board"] for v in row)
        if info["legal_actions"] == []:
            break
        obs, _, _, _, info = env.step(rng.choice(info["legal_actions"]))
    env = Game2048Env(render_mode="ansi")
    obs, info = env.reset(options={"state": _state([[65536, 32768, 2048, 1024], [2, 0, 4, 0], [0] * 4,
                                                    [0, 0, 0, 131072]])})
    assert env.render() == obs
    assert parse_board(obs) == board_from_values(info["state"]["board"])
    assert "131072" in obs and "Legal moves:" in obs and len(seen_values) > 4


def test_info_contract_and_features_come_from_the_view() -> None:
    env = Game2048Env()
    obs, info = env.reset(seed=0)
    for _ in range(60):
        assert set(info) >= {"legal_actions", "state", "view", "features", "score", "invalid_action"}
        assert set(info["features"]) == set(FEATURE_NAMES)
        assert features_from_view(info["view"]) == info["features"]
        assert "rng_key" not in json.dumps(info["view"])
        assert all(f"`{name}`" in (features_module.__doc__ or "") for name in info["features"])
        if not info["legal_actions"]:
            break
        obs, _, _, _, info = env.step(info["legal_actions"][-1])
    assert len(RULES.splitlines()) <= 12


def test_gymnasium_check_env_and_registry() -> None:
    check_env(gymnasium.make("coplay/2048-v0").unwrapped)
    env = gymnasium.make("coplay/2048-v0")
    obs, _ = env.reset(seed=1)
    assert env.observation_space.contains(obs)
    assert isinstance(coplay_envs.make_env("2048"), Game2048Env)
    assert coplay_envs.rules("2048") == RULES


def test_thousand_random_and_garbage_actions_never_raise() -> None:
    rng = random.Random(0)
    garbage = ["", " ", "UP", "le ft", "up down", "x" * 100000, "🙂", "\x00", "ŭp", None, b"up", b"\xfe",
               3, 2.5, ["up"], {"a": 1}, "right\n", "\tleft"]
    env = Game2048Env()
    obs, info = env.reset(seed=0)
    for _ in range(1000):
        kind = rng.random()
        if kind < 0.4:
            action = rng.choice(garbage)
        elif kind < 0.6:
            action = "".join(chr(rng.randrange(0, 0x2FFF)) for _ in range(rng.randrange(0, 30)))
        else:
            action = rng.choice(["up", "down", "left", "right"])
        obs, reward, terminated, truncated, info = env.step(action)
        assert env.observation_space.contains(obs) and reward >= 0
        if terminated or truncated:
            obs, info = env.reset()


@pytest.mark.parametrize("bot_class", [ExpertBot, RandomBot])
def test_bots_play_legal_tagged_moves_from_the_view_only(bot_class: type) -> None:
    bot = bot_class(seed=3)
    env = Game2048Env(max_moves=30)
    obs, info = env.reset(seed=3)
    done = False
    while not done:
        view_only = {"view": info["view"], "legal_actions": info["legal_actions"]}
        decision = bot.act(obs, view_only)
        assert isinstance(decision, BotAction) and decision.intention in INTENTION_TAGS and decision.reason
        assert decision.action in info["legal_actions"]
        obs, _, terminated, truncated, info = env.step(decision.action)
        assert not info["invalid_action"]
        done = terminated or truncated
    assert coplay_envs.make_bot("2048", "expert", seed=1).act(obs, info).intention in INTENTION_TAGS


@pytest.mark.slow
def test_expert_beats_random_over_20_seeded_episodes() -> None:
    """The figures in the report come from `python -m benchmarks.env_bench.game2048 --bots`."""
    from coplay.eval.stats import summarize

    scores: dict[str, list[float]] = {"expert": [], "random": []}
    for name, bot_class in (("expert", ExpertBot), ("random", RandomBot)):
        for seed in range(1000, 1020):
            env, bot = Game2048Env(), bot_class(seed=seed)
            obs, info = env.reset(seed=seed)
            done = False
            while not done:
                obs, _, terminated, truncated, info = env.step(bot.act(obs, info).action)
                done = terminated or truncated
            scores[name].append(float(info["score"]))
    expert, random_ = summarize(scores["expert"]), summarize(scores["random"])
    assert expert.ci_low > random_.ci_high and expert.mean > 1.8 * random_.mean


def test_show_merges_lists_each_legal_move_with_what_it_scores_and_changes_only_the_text() -> None:
    """The line a reader of `show_merges` sees: every legal move once, in the fixed order, followed by the
    points that move scores at once (the step's reward); the state, legality and rewards stay the same."""
    plain, shown = Game2048Env(max_moves=40), Game2048Env(max_moves=40, show_merges=True)
    rng = random.Random(5)
    for seed in range(4):
        obs_a, info_a = plain.reset(seed=seed)
        obs_b, info_b = shown.reset(seed=seed)
        while info_b["legal_actions"]:
            assert info_a["state"] == info_b["state"] and info_a["legal_actions"] == info_b["legal_actions"]
            line = next(ln for ln in obs_b.splitlines() if ln.startswith("Legal moves"))
            listed = [item.split(": ") for item in line.split("score at once: ", 1)[1].split(", ")]
            assert [m for m, _ in listed] == info_b["legal_actions"]
            assert [int(p) for _, p in listed] == info_b["merges"] and "merges" not in info_a
            for move, points in zip(info_b["legal_actions"], info_b["merges"], strict=True):
                assert apply_move(board_from_values(info_b["state"]["board"]), move)[1] == points
            assert parse_board(obs_b) == parse_board(obs_a)
            action = rng.choice(info_b["legal_actions"])
            listed_points = info_b["merges"][info_b["legal_actions"].index(action)]
            obs_a, reward_a, *_, info_a = plain.step(action)
            obs_b, reward_b, *_, info_b = shown.step(action)
            assert reward_a == reward_b == listed_points
    assert "Legal moves: none" in obs_b and "merges" in info_b and info_b["merges"] == []


def test_a_compact_prompt_refers_to_the_merges_line_instead_of_listing_the_moves_again() -> None:
    from coplay.agent.prompts import act_messages
    from coplay_envs.registry import text_kwargs

    env = coplay_envs.make_env("2048", show_merges=True)
    obs, info = env.reset(seed=3)
    user = act_messages("2048", RULES, obs, info["legal_actions"], None, [], prompt_format="compact",
                        skill_section=False)[1]["content"]
    assert "Legal actions: see the observation." in user
    assert all(user.count(f"{a}: ") == 1 for a in info["legal_actions"])
    assert text_kwargs("2048", {"show_merges": True, "max_moves": 50}) == {"show_merges": True}
