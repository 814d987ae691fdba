"""The Skill-SP benchmark (benchmarks/skill_sp.py): it reads each iteration's curriculum summary and the
bank updates' `induce` counts out of a run folder into one row per arm and iteration, and `--quick` runs the
guided and unguided arms for real (slow: local Ray, the tiny model, two iterations each)."""

from __future__ import annotations

import json

import pytest

from coplay.runs import RunDir


def _summary(valid_rate: float, candidates: int) -> dict:
    return {"2048": {"proposed": 8, "valid_rate": valid_rate, "mid_share": valid_rate / 2,
                     "mean_proposer_reward": 0.1, "rejected": {"unparseable": 3}, "saturated": [],
                     "exploration_kept_count": 0, "induction_candidates": [{"p": 0.5}] * candidates}}


def test_each_iteration_reads_its_curriculum_summary_and_the_induce_counts(tmp_path):
    from benchmarks.skill_sp import markdown, per_iteration

    run = RunDir.create(tmp_path, "skill-sp", "run: {}\n")
    folder = run.root / "curriculum"
    folder.mkdir()
    for k, (rate, found) in enumerate([(0.25, 1), (0.5, 0)], start=1):
        (folder / f"it{k}.json").write_text(json.dumps(_summary(rate, found)))
    with (run.root / "metrics.jsonl").open("a") as log:  # the update over iteration 1 runs in iteration 2
        log.write(json.dumps({"iteration": 2, "maintenance": {"proposed": {"induce": 1},
                                                              "applied": {"induce": 1}}}) + "\n")
    points = per_iteration(run.root, "2048")
    assert [p["iteration"] for p in points] == [1, 2]
    assert points[0]["valid_rate"] == 0.25 and points[0]["induction_candidates"] == 1
    assert points[0]["induce"] == {"proposed": 1, "applied": 1}
    assert points[1]["induce"] == {"proposed": 0, "applied": 0}
    text = markdown([{"game": "2048", "arm": "guided", "iterations": points}], "cmd")
    assert "| 2048 | guided | 1 | 8 | 0.25 | 0.12 | 0.100 | unparseable 3 | 1 | 1 |" in text


@pytest.mark.slow
def test_quick_runs_the_guided_and_unguided_arms(tmp_path, tiny_model_config):
    from benchmarks.skill_sp import main

    assert main(["--quick", "--out", str(tmp_path / "out"), f"run.out_dir={tmp_path / 'runs'}",
                 f"model.tiny.cache_dir={tiny_model_config.tiny.cache_dir}"]) == 0
    summary = json.loads((tmp_path / "out" / "skill-sp-quick.json").read_text())
    assert summary["complete"] and [r["arm"] for r in summary["runs"]] == ["guided", "unguided"]
    for run in summary["runs"]:
        assert [p["iteration"] for p in run["iterations"]] == [1, 2]
        assert all(p["proposed"] == 4 for p in run["iterations"])  # 2 prompts x 2 proposals
        assert run["commit"] == summary["commit"]  # each run names the code it started from
    unguided = RunDir.open(summary["runs"][1]["run_dir"])
    assert "unguided: true" in (unguided.root / "config.yaml").read_text()
    assert (tmp_path / "out" / "skill-sp-quick.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_stopped_run_ends_the_benchmark_with_its_one_line_and_exit_code(capsys):
    from benchmarks.learning import run_main
    from coplay.driver.preflight import RunStopped

    line = "stopped (Ctrl-C or SIGTERM); the run folder is resumable: coplay train --resume r"

    def main() -> int:
        raise RunStopped(line, 130)

    assert run_main("python -m benchmarks.skill_sp", main) == 130
    assert capsys.readouterr().err.strip() == f"python -m benchmarks.skill_sp: {line}"
    assert run_main("python -m benchmarks.skill_sp", lambda: 0) == 0
