"""Skills carry what a proposer needs (rules, examples, validator, usage) in the bank file; bank files written
before these fields existed still load."""

from __future__ import annotations

import json

import pytest

from coplay.runs import RunDir
from coplay.skills.schema import Bank, BankError, Contract, Skill, load_bank, save_bank
from coplay.skills.tasking import MAX_EXAMPLES, TaskSpec, TaskUsage


def skill() -> Skill:
    return Skill(id="s1", name="merge", summary="merge tiles", plan=["slide"], preconditions="merges >= 1",
                 success="max_tile >= 8", abort="legal_moves == 0", contract=Contract(add=["max_tile↑"]))


def test_tasking_round_trips_through_the_bank_file(tmp_path) -> None:
    s = skill()
    s.tasking = TaskSpec(rules="boards with two equal tiles side by side", validator="merges >= 1")
    s.tasking.add_example({"position": {"board": [[2, 2, 0, 0]] + [[0] * 4] * 3}, "goal": "make a 4",
                           "contract": "max_tile >= 4", "bound": 3})
    s.tasking.usage.record(iteration=5, valid=True, outcomes=[True, False, False, True])
    s.tasking.usage.record(iteration=6, valid=False, outcomes=[])
    run = RunDir.create(tmp_path, "t", "x: 1\n")
    save_bank(run, Bank("2048", version=1, skills={"s1": s}))
    loaded = load_bank(run, "2048").get("s1")
    assert loaded.tasking == s.tasking
    usage = loaded.tasking.usage
    assert (usage.proposed, usage.valid, usage.attempts, usage.successes, usage.last_used) == (2, 1, 4, 2, 6)
    assert usage.valid_share == 0.5 and usage.solver_success == 0.5


def test_an_old_bank_file_without_tasking_loads_with_defaults() -> None:
    data = Bank("2048", version=1, skills={"s1": skill()}).to_json()
    for s in data["skills"]:
        del s["tasking"]
    loaded = Bank.from_bytes(json.dumps(data).encode()).get("s1")
    assert loaded.tasking == TaskSpec()
    assert loaded.tasking.usage.solver_success is None


def test_a_bad_validator_makes_the_bank_unreadable_with_its_name() -> None:
    data = Bank("2048", version=1, skills={"s1": skill()}).to_json()
    data["skills"][0]["tasking"]["validator"] = "open('x')"
    with pytest.raises(BankError, match="bank <bytes>: malformed"):
        Bank.from_bytes(json.dumps(data).encode())


def test_only_the_newest_examples_are_kept() -> None:
    spec = TaskSpec()
    for i in range(MAX_EXAMPLES + 3):
        spec.add_example({"goal": str(i)})
    assert [e["goal"] for e in spec.examples] == [str(i) for i in range(3, MAX_EXAMPLES + 3)]
    assert TaskUsage().valid_share == 0.0


def test_the_bank_report_shows_the_task_statistics(tmp_path) -> None:
    from coplay.report.bank import bank_report_html, show_bank

    s = skill()
    s.tasking.usage.record(iteration=3, valid=True, outcomes=[True, False, False, False])
    run = RunDir.create(tmp_path, "t", "x: 1\n")
    save_bank(run, Bank("2048", version=1, skills={"s1": s, "s2": Skill.from_json({**skill().to_json(),
                                                                                    "id": "s2"})}))
    text = show_bank(run)
    assert "curriculum tasks of s1: 1 proposed, 100% valid, solver success 25% over 4 attempts" in text
    assert "curriculum tasks of s2" not in text  # never proposed: no line
    assert "curriculum tasks: 1 proposed, 100% valid, solver success 25%" in bank_report_html(run)


def test_the_bank_report_shows_the_runs_curriculum_statistics(tmp_path) -> None:
    from coplay.report.bank import bank_report_html, show_bank

    run = RunDir.create(tmp_path, "t", "x: 1\n")
    save_bank(run, Bank("2048", version=1, skills={"s1": skill()}))
    assert "curriculum tasks of s1" not in show_bank(run)
    live = TaskSpec(usage=TaskUsage(proposed=4, valid=2, attempts=8, successes=6, last_used=3))
    (run.root / "curriculum").mkdir()
    (run.root / "curriculum" / "tasking.json").write_text(json.dumps({"2048": {"s1": live.to_json(),
                                                                                "s9": live.to_json()}}))
    text = show_bank(run)
    assert "curriculum tasks of s1: 4 proposed, 50% valid, solver success 75% over 8 attempts" in text
    assert "4 proposed, 50% valid" in bank_report_html(run)
    (run.root / "curriculum" / "tasking.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a curriculum tasking file"):
        show_bank(run)
