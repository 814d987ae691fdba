"""The controller refines generation rules from feedback and names saturated skills."""

from __future__ import annotations

import json

import pytest

from coplay.curriculum.controller import refine_rules, saturated_skills
from coplay.skills.schema import Contract, Skill
from coplay.skills.tasking import TaskSpec, TaskUsage

EXAMPLE = {"position": {}, "goal": "make 8", "contract": "max_tile >= 8 and empty_cells >= 2", "bound": 6}


def spec(valid: int, attempts: int, successes: int) -> TaskSpec:
    return TaskSpec(examples=[EXAMPLE], usage=TaskUsage(proposed=10, valid=valid, attempts=attempts,
                                                        successes=successes))


def test_rules_push_towards_mid_difficulty() -> None:
    assert "harder" in refine_rules(spec(10, 20, 19))
    assert "easier" in refine_rules(spec(10, 20, 1))
    assert "about right" in refine_rules(spec(10, 20, 10))
    assert "only 20% of tasks were valid" in refine_rules(spec(2, 8, 4))
    assert "bounds 6-6; contracts over empty_cells, max_tile" in refine_rules(spec(10, 20, 10))


def test_untried_skills_keep_their_rules_and_saturated_ones_are_named() -> None:
    assert refine_rules(TaskSpec(rules="boards with a free corner")) == "boards with a free corner"
    skills = {}
    for sid, successes in (("s1", 20), ("s2", 10)):
        skills[sid] = Skill(id=sid, name=sid, summary="", plan=[], preconditions="", success="", abort="",
                            contract=Contract(), tasking=spec(10, 20, successes))
    assert saturated_skills(skills, 0.95, 8) == ["s1"]


def test_the_bank_update_reads_the_induction_candidates_of_its_iteration(tmp_path) -> None:
    from coplay.driver.curriculum import induction_candidates

    folder = tmp_path / "curriculum"
    folder.mkdir()
    found = {"task": {"goal": "make a 4", "contract": "max_tile >= 4", "bound": 3}, "p": 0.5, "attempts": []}
    (folder / "it3.json").write_text(json.dumps({"2048": {"proposed": 2, "induction_candidates": [found]},
                                                 "tetris": {"proposed": 2, "induction_candidates": []}}))
    assert induction_candidates(tmp_path, 3) == {"2048": [found]}
    assert induction_candidates(tmp_path, 4) == {}  # no curriculum round recorded for that iteration
    (folder / "it5.json").write_text("{not json")
    with pytest.raises(ValueError, match="it5.json: not JSON"):
        induction_candidates(tmp_path, 5)
