"""The console line of each metrics record says what that record is."""

from __future__ import annotations

from coplay.driver.metrics import console_line


def test_closing_records_are_not_shown_as_empty_iterations():
    rollout = console_line(3, {"episodes": 8, "generated_tokens_per_s": 366.4,
                               "scores": {"2048": {"mean": 21.0}},
                               "bank_sizes": {"2048": 5}, "versions": {"act": 2}})
    assert rollout.startswith("[bold]it 3[/]: 8 episodes, mean score 2048 21.0, 366 tok/s")
    final_step = console_line(5, {"final_train": {"learner_step": 4, "published": {"act": 5}}})
    assert "final GRPO step" in final_step and "learner step 4" in final_step and "episodes" not in final_step
    final = console_line(5, {"final_versions": {"act": 5}, "final_bank_versions": {"2048": 5}})
    assert final == "[bold]final[/]: adapters act@v5; bank versions 2048 v5"


def test_an_iteration_line_says_which_versions_its_rollouts_and_its_evaluation_used():
    """With staleness 1, iteration 2's rollouts ran on act v1 while the evaluation after its learner step
    used act v2: the line names both (it once said only `versions={'act': 1` beside that evaluation); a
    skill count and a bank version each say what they are (`bank={...}` and `banks={...}` did not)."""
    record = {"episodes": 4, "generated_tokens_per_s": 50.0, "scores": {"2048": {"mean": 12.0}},
              "versions": {"act": 1, "retrieve": 1}, "bank_versions": {"2048": 1}, "bank_sizes": {"2048": 3},
              "maintenance": {"applied": {"merge": 1}},
              "eval": {"2048": {"score": {"mean": 14.5, "ci_low": 9.1, "ci_high": 19.9}}},
              "eval_versions": {"act": 2, "retrieve": 2}}
    assert console_line(2, record).splitlines() == [
        "[bold]it 2[/]: 4 episodes, mean score 2048 12.0, 50 tok/s",
        "  rollouts on adapters act@v1 retrieve@v1; bank versions 2048 v1",
        "  skills per bank: 2048 3; bank operations applied: merge 1",
        "  evaluation on seeds.eval: 2048 14.5 [9.1, 19.9]; adapters act@v2 retrieve@v2"]


def test_an_iteration_without_a_finished_bank_update_does_not_call_the_banks_empty():
    """Iteration 1 of the demo ran on a seed bank of 6 skills, and its line said `skills per bank: none`
    because no bank update had finished yet."""
    record = {"episodes": 4, "scores": {"candy_crush": {"mean": 43.0}}, "versions": {"act": 1},
              "bank_versions": {"candy_crush": 2}, "bank_sizes": {}}
    assert console_line(1, record).splitlines()[1:] == [
        "  rollouts on adapters act@v1; bank versions candy_crush v2",
        "  skills per bank: no bank update finished during this iteration"]


def test_the_cold_start_line_is_not_an_empty_iteration():
    record = {"cold_start": {"sft": {}}, "versions": {"act": 1}, "bank_versions": {"2048": 0},
              "eval": {"2048": {"score": {"mean": 9.0, "ci_low": 5.0, "ci_high": 13.0}}}}
    assert console_line(0, record).splitlines() == [
        "[bold]cold start[/]: adapters act@v1; bank versions 2048 v0",
        "  evaluation on seeds.eval: 2048 9.0 [5.0, 13.0]; adapters act@v1"]


def test_the_loop_records_the_versions_its_evaluation_used():
    from coplay.driver.metrics import iteration_record
    from coplay.driver.records import CollectStats, IterationData
    from coplay.types import BankUpdate

    record = iteration_record(2, IterationData(2, [], [], {}), CollectStats.of([], 1.0), BankUpdate(), None,
                              {"act": 1}, 1.0, {}, {"2048": {"score": {}}}, eval_versions={"act": 2})
    assert record["versions"] == {"act": 1} and record["eval_versions"] == {"act": 2}


def test_the_console_never_breaks_a_line_inside_a_figure(tmp_path, capsys):
    """A log is 80 columns to rich: the lines are printed unwrapped, as `console_line` made them."""
    from coplay.config import LoggingConfig
    from coplay.driver.metrics import MetricsLog
    from coplay.runs import RunDir

    record = {"episodes": 4, "scores": {"2048": {"mean": 12.0}},
              "versions": {a: 7 for a in ("act", "retrieve", "segment", "contract", "curator")},
              "bank_versions": {"avalon/good": 3, "avalon/evil": 3, "diplomacy/FRANCE": 2},
              "bank_sizes": {"avalon/good": 11, "avalon/evil": 9, "diplomacy/FRANCE": 4}}
    log = MetricsLog(RunDir.create(tmp_path, "wrap", "{}\n"), LoggingConfig(tensorboard=False), {})
    capsys.readouterr()
    log.log(3, record)
    log.close()
    printed = capsys.readouterr().err.splitlines()
    assert max(len(line) for line in printed) > 80  # long enough that rich would have wrapped it
    assert printed == console_line(3, {"iteration": 3, **record}).replace("[bold]", "").replace(
        "[/]", "").splitlines()


def _run_and_log(tmp_path, tensorboard: bool):
    from coplay.config import LoggingConfig
    from coplay.driver.metrics import MetricsLog
    from coplay.runs import RunDir

    run = RunDir.create(tmp_path, "tb", "{}\n")
    log = MetricsLog(run, LoggingConfig(tensorboard=tensorboard, console=False), {})
    log.log(1, {"train": {"learner_step": 0, "trained_tokens": 10}})
    log.log(2, {"train": {"learner_step": 1, "trained_tokens": 12}})
    log.log(3, {"final_train": {"learner_step": 2, "trained_tokens": 14}})
    log.close()
    return run


def test_tensorboard_off_leaves_no_tb_folder(tmp_path):
    run = _run_and_log(tmp_path, tensorboard=False)
    assert not run.tb.exists()


def test_the_final_grpo_step_continues_the_train_curves(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = _run_and_log(tmp_path, tensorboard=True)
    events = EventAccumulator(str(run.tb))
    events.Reload()
    steps = [(e.step, e.value) for e in events.Scalars("train/learner_step")]
    assert steps == [(1, 0.0), (2, 1.0), (3, 2.0)]


def test_maintenance_blocks_of_several_banks_add_up():
    from coplay.driver.metrics import maintenance_totals

    reports = [{"maintenance": {"proposed": {"merge": 1, "retire": 2}, "applied": {"merge": 1},
                                "quality_delta": {"merge": 0.25}, "skipped": False}},
               {"maintenance": {"proposed": {"retire": 1}, "rejected": {"retire": 1}}}, {}]
    assert maintenance_totals(reports) == {"proposed": {"merge": 1, "retire": 3}, "applied": {"merge": 1},
                                           "quality_delta": {"merge": 0.25}, "rejected": {"retire": 1}}


def test_each_rollout_workers_time_and_episodes_reach_the_record():
    from coplay.driver.metrics import iteration_record
    from coplay.driver.records import CollectStats, IterationData
    from coplay.types import BankUpdate, RolloutResult

    results = [RolloutResult(b"", ["e1", "e2", "e3"], 4.0, counters={"steps": 9}),
               RolloutResult(b"", [], 0.0, counters={})]
    record = iteration_record(1, IterationData(1, [], [], {}), CollectStats.of(results, 4.5), BankUpdate(),
                              None, {}, 5.0, {})
    assert record["workers"] == {"rollout_s": [4.0, 0.0], "episodes": [3, 0]}  # the second one idled
    assert record["timings"]["generation_s"] == 4.0
