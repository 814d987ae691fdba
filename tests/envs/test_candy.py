"""Candy Crush: bitboard rules against a brute-force reference, hand-made positions, cascades, reshuffle,
text faithfulness, the env contract, robustness, bots."""

from __future__ import annotations

import json
import random

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

import coplay_envs
from coplay_envs.candy import features as features_module
from coplay_envs.candy.bots import ExpertBot, RandomBot
from coplay_envs.candy.env import RULES, CandyCrushEnv, parse_swap
from coplay_envs.candy.features import FEATURE_NAMES, features_from_view
from coplay_envs.candy.rules import (
    CandyStream,
    colour_masks,
    is_settled,
    line_cells,
    matching_swaps,
    resolve,
    settle,
    swap_actions,
    swapped,
)
from coplay_envs.candy.text import parse_board
from coplay_envs.core import INTENTION_TAGS, BotAction

COLOURS = "RGBY"
NO_MOVE_BOARD = "".join("RGBY"[(c + 2 * r) % 4] for r in range(8) for c in range(8))
# Row 7 "R R G R": swapping (7,2)-(7,3) makes R R R; the G then sits under the G G of row 6 once they fall.
CASCADE_BOARD = "".join("BY"[(r + c) % 2] for r in range(6) for c in range(8)) + "BGGYBYBY" + "RRGRYBYB"


# ------------------------------------------------------------------ brute-force reference (plain loops)
def _lines_naive(board: str) -> set[int]:
    out: set[int] = set()
    for r in range(8):
        for c in range(8):
            ch = board[r * 8 + c]
            if ch not in COLOURS + "PO":
                continue
            if c <= 5 and board[r * 8 + c + 1] == ch == board[r * 8 + c + 2]:
                out |= {r * 8 + c, r * 8 + c + 1, r * 8 + c + 2}
            if r <= 5 and board[(r + 1) * 8 + c] == ch == board[(r + 2) * 8 + c]:
                out |= {r * 8 + c, (r + 1) * 8 + c, (r + 2) * 8 + c}
    return out


def _swaps_naive(board: str) -> list[str]:
    """Line-making swaps in reading order: per row, its horizontal swaps, then those with the row below."""
    found = []
    for r in range(8):
        for c in range(7):
            if _lines_naive(swapped(board, r * 8 + c, r * 8 + c + 1)):
                found.append(f"swap ({r},{c}) ({r},{c + 1})")
        for c in range(8):
            if r < 7 and _lines_naive(swapped(board, r * 8 + c, r * 8 + c + 8)):
                found.append(f"swap ({r},{c}) ({r + 1},{c})")
    return found


def _resolve_naive(board: str) -> tuple[str, int, int]:
    cleared = waves = 0
    while True:
        gone = _lines_naive(board)
        if not gone:
            return board, cleared, waves
        cleared += len(gone)
        waves += 1
        cells = list(board)
        for c in range(8):
            kept = [cells[r * 8 + c] for r in range(8) if r * 8 + c not in gone]
            column = ["?"] * (8 - len(kept)) + kept
            for r in range(8):
                cells[r * 8 + c] = column[r]
        board = "".join(cells)


def _random_board(rng: random.Random, colours: str = COLOURS) -> str:
    return "".join(rng.choice(colours) for _ in range(64))


def test_bitboard_lines_and_matching_swaps_equal_brute_force() -> None:
    rng = random.Random(0)
    checked = 0
    while checked < 150:
        colours = rng.choice(["RGB", COLOURS, "RGBYPO"])
        board = _random_board(rng, colours)
        masks = colour_masks(board, colours)
        assert {i for i in range(64) if line_cells(masks) >> i & 1} == _lines_naive(board)
        if line_cells(masks):
            continue
        assert swap_actions(*matching_swaps(masks)) == _swaps_naive(board)
        checked += 1


def test_cascades_clear_falling_lines_until_stable() -> None:
    board = swapped(CASCADE_BOARD, 58, 59)  # (7,2) <-> (7,3)
    expected = _resolve_naive(board)
    assert resolve(board, COLOURS, lambda: "?") == expected
    assert expected[2] >= 2  # at least one cascade wave after the swap's own line
    assert _lines_naive(CASCADE_BOARD) == set() and "swap (7,2) (7,3)" in _swaps_naive(CASCADE_BOARD)
    env = CandyCrushEnv()
    _, info = env.reset(options={"state": _state(CASCADE_BOARD)})
    assert "swap (7,2) (7,3)" in info["legal_actions"]
    _, reward, _, _, info = env.step("swap (7,3) (7,2)")  # order-insensitive
    assert reward >= expected[1] and info["cascades"] >= expected[2]
    assert reward == info["score"] and is_settled("".join(info["state"]["board"]), COLOURS)


def test_reshuffle_keeps_the_candies_makes_a_move_and_no_line() -> None:
    assert line_cells(colour_masks(NO_MOVE_BOARD, COLOURS)) == 0 and _swaps_naive(NO_MOVE_BOARD) == []
    stream = CandyStream(42, COLOURS)
    board = settle(NO_MOVE_BOARD, stream)
    assert sorted(board) == sorted(NO_MOVE_BOARD) and board != NO_MOVE_BOARD
    assert is_settled(board, COLOURS) and stream.shuffle_counter > 0 and stream.candy_counter == 0
    with pytest.raises(ValueError, match="no move"):
        CandyCrushEnv().reset(options={"state": _state(NO_MOVE_BOARD)})


def test_env_reshuffles_when_no_move_is_left() -> None:
    env = CandyCrushEnv(n_colours=6, max_moves=10**6)  # six colours run out of moves often
    _, info = env.reset(seed=0)
    reshuffles = 0
    for k in range(6000):
        _, _, _, _, info = env.step(info["legal_actions"][k % len(info["legal_actions"])])
        assert is_settled("".join(info["state"]["board"]), "RGBYPO")
        reshuffles += info["reshuffled"]
        if reshuffles >= 2:
            break
    assert reshuffles >= 2


def _state(board: str, **overrides: int) -> dict:
    state = {"board": [board[r * 8:(r + 1) * 8] for r in range(8)], "colours": COLOURS, "score": 0,
             "moves": 0, "max_moves": 50, "rng_key": 99, "candy_counter": 64, "shuffle_counter": 0}
    state.update(overrides)
    return state


def test_non_matching_swap_costs_a_move_and_changes_nothing() -> None:
    env = CandyCrushEnv()
    _, info = env.reset(options={"state": _state(CASCADE_BOARD, moves=3)})
    assert "swap (0,0) (0,1)" not in info["legal_actions"]
    _, reward, _, _, info = env.step("swap (0,0) (0,1)")
    assert (reward, info["invalid_action"], info["state"]["moves"]) == (0.0, False, 4)
    assert "".join(info["view"]["board"]) == CASCADE_BOARD
    for bad in ("swap (0,0) (1,1)", "swap (0,0) (0,2)", "swap (7,7) (7,8)", "swap (0,0) (0,0)",
                "swap 0 0 0 1", "", None, "🙂"):
        _, reward, _, _, info = env.step(bad)
        assert reward == 0.0 and info["invalid_action"] and "".join(info["view"]["board"]) == CASCADE_BOARD
    assert info["state"]["moves"] == 12


def test_action_parsing_is_order_and_space_insensitive() -> None:
    assert parse_swap("swap (7,2) (7,3)") == parse_swap(" SWAP(7, 3)(7 ,2) ") == (58, 59)
    assert parse_swap("swap (1,0), (0,0)") == (0, 8)
    assert parse_swap("swap (1,0) (0,1)") is None and parse_swap("swap (8,0) (7,0)") is None


def test_game_ends_after_the_moves_and_boards_start_settled() -> None:
    env = CandyCrushEnv(max_moves=4)
    for seed in range(30):
        obs, info = env.reset(seed=seed)
        assert is_settled("".join(info["state"]["board"]), COLOURS) and info["legal_actions"]
    for step in range(4):
        obs, _, terminated, truncated, info = env.step("nonsense")
        assert terminated == (step == 3) and not truncated
    assert info["legal_actions"] == [] and "Game over" in obs
    _, reward, terminated, _, info = env.step(info["state"] and "swap (0,0) (0,1)")
    assert reward == 0.0 and terminated and info["invalid_action"]


def _trace(env: CandyCrushEnv, seed: int, rng: random.Random) -> list[str]:
    obs, info = env.reset(seed=seed)
    out = [json.dumps([obs, info], sort_keys=True)]
    for _ in range(50):
        legal = info["legal_actions"]
        action = rng.choice(legal) if legal and rng.random() < 0.8 else "swap (3,3) (3,4)"
        step = env.step(action)
        info = step[4]
        out.append(json.dumps(step, sort_keys=True))
    return out


def test_same_seed_and_actions_give_identical_trajectories() -> None:
    assert _trace(CandyCrushEnv(), 4, random.Random(2)) == _trace(CandyCrushEnv(), 4, random.Random(2))
    assert _trace(CandyCrushEnv(), 4, random.Random(2))[0] != _trace(CandyCrushEnv(), 5, random.Random(2))[0]


def test_state_round_trip_mid_game_continues_identically() -> None:
    env = CandyCrushEnv()
    _, info = env.reset(seed=21)
    for k in range(20):
        _, _, _, _, info = env.step(info["legal_actions"][k % len(info["legal_actions"])])
    twin = CandyCrushEnv()
    _, info_b = twin.reset(options={"state": json.loads(json.dumps(info["state"]))})
    assert info_b["state"] == info["state"]
    for k in range(30):
        action = info["legal_actions"][(3 * k) % len(info["legal_actions"])]
        a, b = env.step(action), twin.step(action)
        info = a[4]
        assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_observation_text_parses_back_to_the_exact_board() -> None:
    env = CandyCrushEnv(render_mode="ansi")
    obs, info = env.reset(seed=8)
    for k in range(50):
        assert parse_board(obs) == "".join(info["state"]["board"]) and env.render() == obs
        assert all(action in obs for action in info["legal_actions"])
        legal = info["legal_actions"]
        obs, _, _, _, info = env.step(legal[k % len(legal)] if legal else "")


def test_info_contract_and_features_come_from_the_view() -> None:
    env = CandyCrushEnv()
    _, info = env.reset(seed=1)
    for k in range(30):
        assert set(info) >= {"legal_actions", "state", "view", "features", "score", "invalid_action"}
        assert set(info["features"]) == set(FEATURE_NAMES)
        assert features_from_view(info["view"]) == info["features"]
        assert info["features"]["matches_available"] == len(info["legal_actions"])
        assert "rng_key" not in info["view"]
        assert all(f"`{name}`" in (features_module.__doc__ or "") for name in info["features"])
        _, _, _, _, info = env.step(info["legal_actions"][k % len(info["legal_actions"])])
    assert len(RULES.splitlines()) <= 12


def test_gymnasium_check_env_and_registry() -> None:
    check_env(gymnasium.make("coplay/CandyCrush-v0").unwrapped)
    assert isinstance(coplay_envs.make_env("candy_crush"), CandyCrushEnv)
    assert coplay_envs.rules("candy_crush") == RULES


def test_thousand_random_and_garbage_actions_never_raise() -> None:
    rng = random.Random(0)
    garbage = ["", "swap", "swap ()", "swap (a,b) (c,d)", "swap (1,1) (1,2" , "swap (-1,0) (0,0)",
               "swap (" + "9" * 4000 + ",0) (0,0)", "x" * 100000, "🙂", "\x00", None, b"swap (0,0) (0,1)",
               b"\xff", 7, 1.5, ["swap (0,0) (0,1)"], {"swap": 1}]
    env = CandyCrushEnv()
    obs, info = env.reset(seed=0)
    for _ in range(1000):
        kind = rng.random()
        if kind < 0.3:
            action = rng.choice(garbage)
        elif kind < 0.5:
            action = "".join(chr(rng.randrange(0, 0x2FFF)) for _ in range(rng.randrange(0, 30)))
        elif kind < 0.75:
            r, c = rng.randrange(9), rng.randrange(9)
            action = f"swap ({r},{c}) ({r + rng.choice([-1, 0, 1])},{c + rng.choice([-1, 0, 1])})"
        else:
            action = rng.choice(info["legal_actions"] or ["swap (0,0) (0,1)"])
        obs, reward, terminated, truncated, info = env.step(action)
        assert env.observation_space.contains(obs) and reward >= 0
        if terminated or truncated:
            obs, info = env.reset()


@pytest.mark.parametrize("bot_class", [ExpertBot, RandomBot])
def test_bots_play_legal_tagged_moves_from_the_view_only(bot_class: type) -> None:
    bot = bot_class(seed=5)
    env = CandyCrushEnv(max_moves=15)
    obs, info = env.reset(seed=5)
    terminated = False
    while not terminated:
        decision = bot.act(obs, {"view": info["view"], "legal_actions": info["legal_actions"]})
        assert isinstance(decision, BotAction) and decision.intention in INTENTION_TAGS and decision.reason
        assert decision.action in info["legal_actions"]
        obs, reward, terminated, _, info = env.step(decision.action)
        assert reward >= 3
    assert coplay_envs.make_bot("candy_crush", "random", seed=1).act(obs, info).intention in INTENTION_TAGS


@pytest.mark.slow
def test_expert_beats_random_over_20_seeded_episodes() -> None:
    """The figures in the report come from `python -m benchmarks.env_bench.candy --bots`."""
    from coplay.eval.stats import summarize

    scores: dict[str, list[float]] = {"expert": [], "random": []}
    for name, bot_class in (("expert", ExpertBot), ("random", RandomBot)):
        for seed in range(1000, 1020):
            env, bot = CandyCrushEnv(), bot_class(seed=seed)
            obs, info = env.reset(seed=seed)
            terminated = False
            while not terminated:
                obs, _, terminated, _, info = env.step(bot.act(obs, info).action)
            scores[name].append(float(info["score"]))
    expert, random_ = summarize(scores["expert"]), summarize(scores["random"])
    assert expert.ci_low > random_.ci_high and expert.mean > 2 * random_.mean


def test_show_clears_lists_every_swap_once_by_what_it_clears_and_changes_only_the_text() -> None:
    plain, shown = CandyCrushEnv(max_moves=6), CandyCrushEnv(max_moves=6, show_clears=True)
    for seed in range(5):
        obs_a, info_a = plain.reset(seed=seed)
        obs_b, info_b = shown.reset(seed=seed)
        for _ in range(3):
            assert info_a["state"] == info_b["state"] and info_a["legal_actions"] == info_b["legal_actions"]
            board = "".join(info_b["state"]["board"])
            line = next(ln for ln in obs_b.splitlines() if ln.startswith("Swaps that make a line"))
            listed: list[tuple[int, str]] = []
            for group in line.split("by candies cleared at once: ", 1)[1].split("; "):
                count, _, actions = group.partition(": ")
                listed += [(int(count), a) for a in actions.split(", ")]
            assert sorted(a for _, a in listed) == sorted(info_b["legal_actions"])  # each swap once
            assert [c for c, _ in listed] == sorted((c for c, _ in listed), reverse=True)  # most first
            for count, action in listed:  # the count is the lines the swap makes, before cascades
                assert count == len(_lines_naive(swapped(board, *parse_swap(action)))) >= 3
            assert info_b["clears"] == [dict((a, c) for c, a in listed)[a] for a in info_b["legal_actions"]]
            assert parse_board(obs_b) == board and "clears" not in info_a
            action = info_b["legal_actions"][0]
            obs_a, *_, info_a = plain.step(action)
            obs_b, *_, info_b = shown.step(action)


def test_clears_in_board_order_list_each_swap_with_its_count_in_reading_order_and_change_only_the_text():
    counted = CandyCrushEnv(max_moves=6, show_clears=True)
    board_order = CandyCrushEnv(max_moves=6, show_clears=True, clears_order="board")
    for seed in range(5):
        obs_a, info_a = counted.reset(seed=seed)
        obs_b, info_b = board_order.reset(seed=seed)
        for _ in range(3):
            assert info_a["state"] == info_b["state"] and info_a["clears"] == info_b["clears"]
            line = next(ln for ln in obs_b.splitlines() if ln.startswith("Swaps that make a line"))
            items = line.split("each with the candies it clears at once: ", 1)[1].split(", swap ")
            listed = [(a if a.startswith("swap ") else f"swap {a}").rsplit(": ", 1) for a in items]
            assert [a for a, _ in listed] == info_b["legal_actions"]  # reading order, each swap once
            assert [int(c) for _, c in listed] == info_b["clears"]
            assert parse_board(obs_b) == parse_board(obs_a)
            obs_a, *_, info_a = counted.step(info_a["legal_actions"][-1])
            obs_b, *_, info_b = board_order.step(info_b["legal_actions"][-1])
    with pytest.raises(ValueError, match="clears_order"):
        CandyCrushEnv(clears_order="sorted")
