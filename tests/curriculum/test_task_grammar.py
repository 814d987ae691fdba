"""The proposer's answer grammar (`curriculum.constrained_tasks`): well-formed tasks match it and malformed
ones do not, and sampled under it even the random-weight tiny model writes only tasks the schema accepts
(the gate then judges positions and contracts as before)."""

from __future__ import annotations

import json
import re

import pytest

import coplay_envs
from coplay.config import CurriculumConfig
from coplay.curriculum.gate import Gate
from coplay.curriculum.round import run_round
from coplay.curriculum.routing import Router
from coplay.curriculum.task_grammar import task_regex
from coplay.skills.literals import feature_kinds

BOARD = [[2, 2, 0, 0], [0, 0, 0, 0], [0, 0, 4, 0], [0, 0, 0, 0]]


def _regex(game: str = "2048", max_bound: int = 12) -> str:
    _, info = coplay_envs.make_env(game).reset(seed=0)
    regex = task_regex(game, feature_kinds(info["features"]), max_bound)
    assert regex is not None
    return regex


def _task(**changes) -> str:
    return json.dumps({"position": {"board": BOARD}, "goal": "make an 8", "contract": "max_tile >= 8",
                       "bound": 6, **changes})


@pytest.mark.parametrize("answer", [_task(), _task(contract="max_tile >= 8 and empty_cells > 10"),
                                    _task(bound=12), _task(contract="not merges == 0 or score >= 16"),
                                    _task(contract="max_tile == 2048 or tile_sum >= 1024")])
def test_well_formed_tasks_match(answer: str) -> None:
    assert re.fullmatch(_regex(), answer)


@pytest.mark.parametrize("answer", [
    _task(position={"board": [[3, 2, 0, 0]] * 4}),          # 3 is not a 2048 tile
    _task(position={"board": BOARD[:3]}),                    # three rows
    _task(bound=13), _task(bound=0),                         # outside [1, max_bound]
    _task(contract="height >= 3"),                           # not a 2048 feature
    _task(contract="max_tile(8)"),                           # not the expression language
    _task(contract="max_tile == 6.25"),                      # not a tile: off the game's scale
    _task(contract="max_tile >= 200"),                       # not a power of two
    _task(contract="empty_cells > 17"),                      # a 4 x 4 board has 16 cells
    _task(contract="score >= 12.5"),                         # a 2048 score is a sum of merged tiles
    _task(goal='say "hi"'),                                  # a quote would need escaping
    "Here is a task: " + _task(),                            # prose around the object
])
def test_malformed_tasks_do_not(answer: str) -> None:
    assert re.fullmatch(_regex(), answer) is None


def test_games_without_a_position_grammar_stay_free() -> None:
    assert task_regex("tetris", {"holes": "number"}, 8) is None
    assert re.fullmatch(_regex("candy_crush"), json.dumps(
        {"position": {"board": ["RGBYRGBY"] * 8}, "goal": "clear", "contract": "score >= 30", "bound": 3}))
    assert re.fullmatch(_regex("candy_crush"), json.dumps(  # not a score six moves reach, on its scale
        {"position": {"board": ["RGBYRGBY"] * 8}, "goal": "clear", "contract": "score >= 31",
         "bound": 3})) is None


def test_the_tiny_model_under_the_grammar_writes_only_tasks_the_schema_accepts(constrained_tiny_caller):
    cfg = CurriculumConfig(enabled=True, prompts=2, proposals=2, attempts=1, constrained_tasks=True,
                           max_bound=6, exploration_share=1.0)
    result = run_round(constrained_tiny_caller, Gate("2048", max_bound=6), Router(exploration_share=1.0), {},
                       cfg, 1, "rules", {"propose": 400, "act": 16}, max_tasks=0)
    proposer = [s for s in result.samples if s.adapter == "propose"]
    assert all(s.meta.get("regex") for s in proposer)
    assert not result.counts["unparseable"] and not result.counts["schema"], result.counts
    verdicts = sum(v for k, v in result.counts.items() if k != "unplayed")
    assert verdicts == 4  # each got a verdict past the schema
    # a valid task left unplayed (max_tasks=0) takes its group of 2 out of training; the others train
    assert 4 - 2 * result.counts["unplayed"] <= len(proposer) <= 4 and len(proposer) % 2 == 0


def test_dealt_positions_are_written_empty_and_the_game_deals_a_legal_board() -> None:
    """`curriculum.position: dealt`: the grammar admits only `"position": {}`, a board is refused (also
    without the grammar), and on Candy Crush, where the env refuses a written board with a line, every
    answer's start is the round's deal, which the gate accepts; the prompt shows that deal."""
    from coplay.curriculum.task import TaskRejected, parse_task
    from coplay.skills.caller import FunctionCaller

    _, info = coplay_envs.make_env("candy_crush").reset(seed=0)
    regex = task_regex("candy_crush", feature_kinds(info["features"]), 6, dealt=True)
    dealt = json.dumps({"position": {}, "goal": "clear", "contract": "score >= 30", "bound": 3})
    written = json.dumps({"position": {"board": ["RGBYRGBY"] * 8}, "goal": "clear", "contract": "score >= 30",
                          "bound": 3})
    assert re.fullmatch(regex, dealt) and re.fullmatch(regex, written) is None
    with pytest.raises(TaskRejected, match="positions are dealt"):
        parse_task(written, "candy_crush", max_bound=6, dealt=True)
    line = json.dumps({"position": {"board": ["RRRBRGBY"] + ["GBYRGBYR", "BYRGBYRG"] * 3 + ["YRGBYRGB"]},
                       "goal": "clear", "contract": "score >= 30", "bound": 3})
    prompts: list = []

    def generate(adapter, batch, n):
        prompts.extend(batch)
        return [[dealt, line][:n] for _ in batch]

    cfg = CurriculumConfig(enabled=True, prompts=1, proposals=2, attempts=1, max_bound=6,
                           exploration_share=1.0, position="dealt")
    result = run_round(FunctionCaller(generate), Gate("candy_crush", max_bound=6),
                       Router(exploration_share=1.0), {}, cfg, 1, "rules", {"propose": 400, "act": 16},
                       max_tasks=0)
    # the dealt answer passed the gate's position check (a valid task beyond max_tasks is `unplayed`)
    assert result.counts["schema"] == 1 and not result.counts["illegal_position"], result.counts
    assert "dealt by the game" in prompts[0][1]["content"]
    assert json.dumps(info["state"], sort_keys=True)[:40] in prompts[0][1]["content"]
    written_cfg = cfg.model_copy(update={"position": "written"})
    written_result = run_round(FunctionCaller(generate), Gate("candy_crush", max_bound=6),
                               Router(exploration_share=1.0), {}, written_cfg, 1, "rules",
                               {"propose": 400, "act": 16}, max_tasks=0)
    assert written_result.counts["illegal_position"] == 1 and not written_result.counts["schema"]
