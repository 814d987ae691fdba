"""The validity gate on the real 2048 env with its real expert bot: what earns the proposer nothing, and
why, is counted."""

from __future__ import annotations

import json

import pytest

from coplay.curriculum.gate import Gate, play
from coplay.curriculum.rewards import proposer_reward
from coplay.curriculum.task import Task
from coplay.skills.expressions import parse_expression

EASY_BOARD = [[2, 2, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]


def answer(**over: object) -> str:
    data = {"position": {"board": EASY_BOARD}, "goal": "make a 4", "contract": "max_tile >= 4", "bound": 3}
    data.update(over)
    return "Here is my task:\n```json\n" + json.dumps(data) + "\n```"


@pytest.fixture
def gate() -> Gate:
    return Gate("2048", max_bound=20)


def test_a_reachable_task_is_valid_and_the_expert_reaches_it(gate: Gate) -> None:
    verdict = gate.check_answer(answer(), seed=3)
    assert verdict.valid, verdict.detail
    assert verdict.reference is not None and verdict.reference.satisfied and verdict.reference.steps >= 1
    assert verdict.start_state is not None and verdict.start_state["board"] == EASY_BOARD
    assert gate.counts["valid"] == 1


@pytest.mark.parametrize(("text", "reason"), [
    ("I would like the solver to get 2048, good luck!", "unparseable"),
    ('{"goal": "x", "contract": "max_tile >= 4"', "unparseable"),
    (answer(bound=0), "schema"),
    (answer(bound=999), "schema"),
    (answer(extra=1), "schema"),
    (answer(position={"board": [[3, 0, 0, 0]] * 4}), "illegal_position"),
    (answer(position={"board": [[2, 0, 0]]}), "illegal_position"),
    (answer(position={"colour": "red"}), "illegal_position"),
    (answer(position={"board": [[2, 4, 2, 4], [4, 2, 4, 2]] * 2}), "illegal_position"),  # game over
    (answer(contract="max_tile >= 4 and __import__('os')"), "contract"),
    (answer(contract="highest_tile >= 4"), "contract"),
    (answer(contract="max_tile == 6.25"), "off_scale"),       # no 2048 tile is 6.25
    (answer(contract="max_tile >= 4 or score >= 200"), "off_scale"),  # a 2048 score is a sum of tiles
    (answer(contract="max_tile >= 2"), "trivial"),
    (answer(contract="max_tile >= 2048", goal="make 2048 in 5 moves", bound=5), "unreachable"),
])
def test_invalid_answers_earn_nothing_and_are_counted(gate: Gate, text: str, reason: str) -> None:
    verdict = gate.check_answer(text, seed=1)
    assert not verdict.valid
    assert verdict.reason == reason, verdict.detail
    assert proposer_reward(verdict.valid, 0.5) == 0.0
    assert gate.counts[reason] == 1 and gate.counts["valid"] == 0


def test_the_skill_validator_must_hold_at_the_start(gate: Gate) -> None:
    verdict = gate.check_answer(answer(), validator="empty_cells <= 4")
    assert (verdict.valid, verdict.reason) == (False, "validator")
    assert gate.check_answer(answer(), validator="empty_cells >= 10").valid


def test_solver_reference_needs_one_success_among_its_attempts() -> None:
    gate = Gate("2048", max_bound=20, reference="solver")
    task = Task("2048", {"board": EASY_BOARD}, "make a 4", "max_tile >= 4", 3)
    start = gate.start_state(task)
    contract = parse_expression(task.contract)
    stuck = [play(gate.env, start, lambda obs, info: "up", contract, task.bound) for _ in range(2)]
    assert not any(a.satisfied for a in stuck)  # "up" never merges two 2s side by side
    assert gate.check(task, solver=stuck).reason == "unreachable"
    merging = play(gate.env, start, lambda obs, info: "left", contract, task.bound)
    assert merging.satisfied and merging.steps == 1 and merging.game_reward == 4.0
    assert gate.check(task, solver=[*stuck, merging]).valid


def test_multi_seat_games_are_refused() -> None:
    with pytest.raises(ValueError, match="single-player"):
        Gate("avalon")


def test_tetris_tasks_are_judged_on_the_real_env_and_expert() -> None:
    gate = Gate("tetris")
    assert gate.check(Task("tetris", {}, "clear a line", "lines_cleared >= 1", 10)).valid
    assert gate.check(Task("tetris", {}, "x", "pieces_placed >= 3", 10)).reason == "contract"  # not a feature
    verdict = gate.check(Task("tetris", {"board": "not a board"}, "x", "lines_cleared >= 1", 10))
    assert verdict.reason == "illegal_position"


def test_every_threshold_a_games_scale_names_is_one_the_game_can_show() -> None:
    """The scales are facts of the game: expert play reaches the scale's small values and every feature
    value seen on 2048 is either on its scale or beyond the tasks' reach (tiles above 2048)."""
    import coplay_envs
    from coplay.rollout.bot_episodes import play_bot_episodes

    scales = coplay_envs.feature_scales("2048")
    assert scales["max_tile"] == tuple(2 ** k for k in range(1, 12))
    seen: dict[str, set] = {name: set() for name in scales}
    for traj in play_bot_episodes("2048", "expert", [0, 1], max_steps=60):
        for step in traj.steps:
            for name in scales:
                seen[name].add(step.features_before[name])
    for name in ("max_tile", "empty_cells", "merges", "monotonic_lines", "legal_moves"):
        assert seen[name] <= set(scales[name]), (name, seen[name] - set(scales[name]))


@pytest.mark.parametrize(("game", "steps"), [("tetris", 80), ("mario", 40)])
def test_every_feature_value_play_shows_is_on_the_games_scale(game: str, steps: int) -> None:
    """Tetris and Mario state their scales as the ranges the game can show: every value expert and random
    play show of a scaled feature is on its scale (Candy Crush's score scale is a set of round thresholds)."""
    import coplay_envs
    from coplay.rollout.bot_episodes import play_bot_episodes

    scales = coplay_envs.feature_scales(game)
    assert scales and all(isinstance(v, int) for scale in scales.values() for v in scale)
    for bot in ("expert", "random"):
        for traj in play_bot_episodes(game, bot, [0], max_steps=steps):
            for step in traj.steps:
                for name, scale in scales.items():
                    value = step.features_before[name]
                    assert value in scale, (bot, name, value)


def test_a_tetris_threshold_off_the_board_is_off_scale() -> None:
    gate = Gate("tetris")
    assert gate.check(Task("tetris", {}, "x", "max_height >= 25", 10)).reason == "off_scale"
    assert gate.check(Task("tetris", {}, "x", "last_lines == 1.5", 10)).reason == "off_scale"
