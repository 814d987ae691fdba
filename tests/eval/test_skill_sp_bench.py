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


def _probe(root, iteration: int, regrets: list[float]) -> None:
    mean = sum(regrets) / len(regrets)
    score = {"mean_regret": mean, "n": len(regrets), "regret": {"ci_low": mean - 1, "ci_high": mean + 1},
             "regrets": regrets, "best_share": 0.0, "invalid_share": 0.0}
    body = {"meta": {"iteration": iteration},
            "results": {"candy_crush": {"model": score, "random": score, "expert": score,
                                        "bots_separate": True}}}
    (root / "eval" / f"probe-it{iteration:05d}.json").write_text(json.dumps(body))


def _point(iteration: int, scores: list[float]) -> dict:
    from coplay.eval.stats import summarize

    return {"iteration": iteration, **summarize(scores).as_dict(),
            "per_seed": {str(1000 + i): s for i, s in enumerate(scores)}}


def test_the_solver_is_read_on_the_ruler_and_the_proposer_steps_from_the_log(tmp_path):
    """The proposer's learner steps come from the log's `train` and `final_train` (samples, served KL); the
    arms are compared paired by seed on the final evaluation and by position on the last probe."""
    from benchmarks.skill_sp import arm_differences, markdown, proposer_steps

    runs = []
    for arm, final, regrets in (("guided", [30.0, 40.0, 50.0], [10.0, 12.0, 14.0]),
                                ("unguided", [20.0, 31.0, 39.0], [11.0, 13.0, 16.0])):
        run = RunDir.create(tmp_path / arm, "skill-sp", "run: {}\n")
        train = {"learner_step": 1,
                 "adapters": {"propose": {"samples": 16.0, "updates": 1.0, "grad_norm": 0.5},
                              "act": {"samples": 24.0}},
                 "served_change": {"propose": {"version": 2, "kl": 0.004, "changed_share": 0.9}}}
        with (run.root / "metrics.jsonl").open("a") as log:
            log.write(json.dumps({"iteration": 2, "train": train}) + "\n")
            log.write(json.dumps({"iteration": 3, "final_train": {"learner_step": 2, "adapters": {
                "propose": {"samples": 8.0, "updates": 1.0, "grad_norm": 0.25}}}}) + "\n")
        _probe(run.root, 0, [15.0, 15.0, 15.0])
        _probe(run.root, 3, regrets)
        curve = [_point(0, [20.0, 30.0, 40.0]), _point(3, final)]
        runs.append({"game": "candy_crush", "arm": arm, "run_dir": str(run.root), "iterations": [],
                     "proposer_steps": proposer_steps(run.root),
                     "ruler": {"curve": curve, "bots": {"random": _point(0, [10.0, 12.0, 14.0])},
                               "protocol_check": {"passed": True}, "probe": None,
                               "final_minus_first": None, "final_minus_bots": {}}})
    steps = runs[0]["proposer_steps"]
    assert [(s["iteration"], s["final"], s["samples"]) for s in steps] == [(2, False, 16.0), (3, True, 8.0)]
    assert steps[0]["served_kl"] == 0.004 and steps[1]["served_kl"] is None
    (diff,) = arm_differences(runs)
    assert (diff["arm"], diff["minus"]) == ("unguided", "guided")
    assert diff["final"]["difference"] == -10.0 and diff["final"]["n"] == 3  # 20-30, 31-40, 39-50
    assert round(diff["probe_regret"]["difference"], 6) == round(4 / 3, 6) and diff["probe_regret"]["n"] == 3
    text = markdown(runs, "cmd", [diff])
    assert "| candy_crush | unguided - guided | -10.00 [" in text
    assert "| candy_crush | guided | 2 | 1 | 16 | 1 | 0.500 | 4.00e-03 | 0.90 |" in text
    assert "| candy_crush | guided | 3 (final) | 2 | 8 | 1 | 0.250 | - | - |" in text
    assert "| candy_crush | guided | 30.0 [" in text and "Bots on the same protocol: random 12.0" in text
