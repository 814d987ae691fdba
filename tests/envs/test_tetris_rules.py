"""Tetris rules on hand-made positions: pieces, drops, line clears, the 7-bag, game over, fallbacks."""

from __future__ import annotations

import pytest

from coplay_envs.tetris.bots import ExpertBot
from coplay_envs.tetris.env import TetrisEnv
from coplay_envs.tetris.pieces import DISTINCT_ROTATIONS, PIECE_NAMES, ROTATIONS
from coplay_envs.tetris.rules import HEIGHT, WIDTH, TetrisGame, bag


def board(*bottom_rows: str) -> list[str]:
    """A 20-row board whose last rows (given top to bottom) are ``bottom_rows``; the rest empty."""
    assert all(len(row) == WIDTH for row in bottom_rows)
    return ["." * WIDTH] * (HEIGHT - len(bottom_rows)) + list(bottom_rows)


def state(rows: list[str], current: str, queue: str = "OTSZ", **counters: int) -> dict:
    return {
        "board": rows, "current": current, "queue": list(queue), "bag_seed": 7, "bags_drawn": 1,
        "placements": counters.get("placements", 10), "lines": counters.get("lines", 0),
        "last_lines": 0, "score": counters.get("score", 10), "game_over": False,
    }


def env_at(rows: list[str], current: str, queue: str = "OTSZ", **kwargs: int) -> tuple[TetrisEnv, dict]:
    env = TetrisEnv(**kwargs)
    _, info = env.reset(options={"state": state(rows, current, queue)})
    return env, info


def test_each_piece_has_four_cells_and_the_right_number_of_distinct_rotations() -> None:
    expected = {"I": 2, "O": 1, "T": 4, "S": 2, "Z": 2, "J": 4, "L": 4}
    for piece in PIECE_NAMES:
        assert len(DISTINCT_ROTATIONS[piece]) == expected[piece]
        assert all(len(ROTATIONS[piece][r].cells) == 4 for r in range(4))


@pytest.mark.parametrize(("piece", "count"), [("I", 7 + 10), ("O", 9), ("T", 8 + 9 + 8 + 9),
                                              ("S", 8 + 9), ("Z", 8 + 9), ("J", 34), ("L", 34)])
def test_empty_board_lists_every_distinct_placement_once(piece: str, count: int) -> None:
    _, info = env_at(board(), piece)
    assert len(info["legal_actions"]) == count == len(set(info["legal_actions"]))


def test_piece_falls_onto_the_stack_and_rests_on_the_highest_cell_below_it() -> None:
    env, _ = env_at(board("..#.......", "#.#......."), "T")
    _, reward, terminated, _, info = env.step("place T rot 2 col 1")
    # rot 2 is "###" above ".#.": its stem (column 2) rests on the cell at row 2, so the bar sits on row 4.
    assert info["view"]["board"][-4:] == [".###......", "..#.......", "..#.......", "#.#......."]
    assert reward == 1.0 and not terminated and not info["invalid_action"]
    assert info["view"]["column_heights"][:4] == [1, 4, 4, 4]
    assert info["features"]["holes"] == 6  # rows 1-3 of columns 1 and 3


@pytest.mark.parametrize(("rows", "piece", "action", "lines", "left"), [
    (board("#########."), "I", "place I rot 1 col 9", 1, [".........#", ".........#", ".........#"]),
    (board("########..", "########.."), "O", "place O rot 0 col 8", 2, []),
    (board("#.........", "#########.", "#########.", "#########."), "I", "place I rot 1 col 9", 3,
     ["#........#"]),
    (board("#########.", "#########.", "#########.", "#########."), "I", "place I rot 1 col 9", 4, []),
])
def test_clearing_one_to_four_lines_scores_ten_per_line_and_drops_the_rows_above(
        rows: list[str], piece: str, action: str, lines: int, left: list[str]) -> None:
    env, before = env_at(rows, piece)
    assert before["features"]["max_clear_now"] == lines and before["features"]["can_clear"]
    assert before["features"]["tetris_ready"] is (lines == 4)
    _, reward, _, _, info = env.step(action)
    assert reward == 1.0 + 10.0 * lines
    assert info["lines"] == lines and info["features"]["last_lines"] == lines
    assert info["features"]["lines_cleared"] == lines
    assert info["score"] == 10 + 1 + 10 * lines
    expected = board(*left) if left else board()
    assert info["view"]["board"] == expected


def test_rows_above_a_cleared_line_fall_keeping_their_holes() -> None:
    env, _ = env_at(board("#.#.......", "###.......", "#########."), "I")
    _, reward, _, _, info = env.step("place I rot 1 col 9")
    assert reward == 11.0
    assert info["view"]["board"][-3:] == [".........#", "#.#......#", "###......#"]


def test_bag_gives_each_piece_once_per_seven_from_a_bag_boundary() -> None:
    env = TetrisEnv()
    bot = ExpertBot(seed=0)
    observation, info = env.reset(seed=123)
    sequence = [info["view"]["current"]]
    for _ in range(69):
        observation, _, terminated, _, info = env.step(bot.act(observation, info).action)
        assert not terminated
        sequence.append(info["view"]["current"])
    for start in range(0, 70, 7):
        assert sorted(sequence[start:start + 7]) == sorted(PIECE_NAMES)
    assert sequence[:7] == bag(123, 0) and sequence[7:14] == bag(123, 1)
    assert TetrisGame.new(123).current == sequence[0]


def test_bags_depend_on_the_seed() -> None:
    assert bag(1, 0) == bag(1, 0)
    assert len({tuple(bag(seed, 0)) for seed in range(20)}) > 10


def test_preview_shows_the_next_four_pieces_in_order() -> None:
    env = TetrisEnv()
    _, info = env.reset(seed=5)
    preview = info["view"]["preview"]
    assert len(preview) == 4
    for expected in preview:
        _, _, _, _, info = env.step(info["legal_actions"][0])
        assert info["view"]["current"] == expected


def test_game_over_when_the_new_piece_cannot_enter() -> None:
    # Rows 1-18 filled but for column 0; the O on columns 3-4 fills rows 19-20 where the next T spawns.
    tower = ["..........", ".........."] + [".#########"] * 18
    env, _ = env_at(tower, "O", "TSZI")
    obs, reward, terminated, truncated, info = env.step("place O rot 0 col 3")
    assert reward == 1.0 and terminated and not truncated and not info["invalid_action"]
    assert info["features"]["game_over"] and info["legal_actions"] == []
    assert "GAME OVER: the T piece cannot enter" in obs
    after, reward, terminated, _, info = env.step("place T rot 0 col 3")
    assert reward == 0.0 and terminated and info["invalid_action"] and after == obs


def test_game_over_when_spawn_cells_are_occupied_at_reset() -> None:
    rows = ["....#....."] + ["#########."] * 19
    env = TetrisEnv()
    obs, info = env.reset(options={"state": state(rows, "T")})
    assert info["legal_actions"] == [] and info["features"]["game_over"]
    assert "GAME OVER" in obs


def test_truncated_after_the_placement_limit() -> None:
    env = TetrisEnv(max_placements=3)
    _, info = env.reset(seed=0)
    flags = []
    for _ in range(3):
        _, _, terminated, truncated, info = env.step(info["legal_actions"][-1])
        flags.append((terminated, truncated))
    assert flags == [(False, False), (False, False), (False, True)]
    assert info["legal_actions"] == [] and info["features"]["placements_left"] == 0


@pytest.mark.parametrize("action", ["", "hello", "place T rot 0 col 9", "place S rot 0 col 0",
                                    "place T rot 7 col 0", "place T rot 0 col -1", None, b"\xff"])
def test_an_invalid_action_loses_the_move_dropping_the_piece_at_its_spawn(action: object) -> None:
    env, _ = env_at(board(), "T")
    _, reward, _, _, info = env.step(action)
    assert info["invalid_action"] and info["played"] == "place T rot 0 col 3"
    assert reward == 1.0 and info["view"]["placements"] == 11
    assert info["view"]["board"][-2:] == ["....#.....", "...###...."]


def test_fallback_takes_the_first_legal_placement_when_the_spawn_one_is_not_legal() -> None:
    rows = board()
    rows[0] = "...#......"  # a floating cell over column 3 blocks T rot 0 col 3 from above, not the spawn
    env, info = env_at(rows, "T")
    assert "place T rot 0 col 3" not in info["legal_actions"]
    _, _, _, _, info = env.step("nonsense")
    assert info["invalid_action"] and info["played"] == "place T rot 0 col 0"


def test_equal_rotations_are_accepted_as_the_canonical_placement() -> None:
    env, _ = env_at(board(), "O")
    _, _, _, _, info = env.step("PLACE o ROT 3 COL 8")
    assert not info["invalid_action"] and info["played"] == "place O rot 0 col 8"
    env, _ = env_at(board(), "I")
    _, _, _, _, info = env.step("place I rot 3 col 9")
    assert not info["invalid_action"] and info["played"] == "place I rot 1 col 9"


def test_case_spacing_quotes_and_a_final_period_are_tolerated() -> None:
    env, _ = env_at(board(), "T")
    _, _, _, _, info = env.step("  `Place  t rot 1\tcol 7`. ")
    assert not info["invalid_action"] and info["played"] == "place T rot 1 col 7"


def test_no_placement_that_would_stick_out_of_the_top_is_legal() -> None:
    rows = ["#........."] * 3 + ["##........"] * 17  # column 0 full to the top, column 1 17 high
    env, info = env_at(rows, "I")
    assert "place I rot 0 col 0" not in info["legal_actions"]
    assert "place I rot 1 col 1" not in info["legal_actions"]  # rows 18-21: one cell out of the top
    assert {"place I rot 0 col 1", "place I rot 1 col 2"} <= set(info["legal_actions"])
