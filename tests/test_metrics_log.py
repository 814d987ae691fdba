"""The console line of each metrics record says what that record is."""

from __future__ import annotations

from coplay.driver.metrics import console_line


def test_closing_records_are_not_shown_as_empty_iterations():
    rollout = console_line(3, {"episodes": 8, "generated_tokens_per_s": 366.4,
                               "scores": {"2048": {"mean": 21.0}},
                               "bank_sizes": {"2048": 5}, "versions": {"act": 2}})
    assert rollout.startswith("[bold]it 3[/] episodes=8 tok/s=366 2048=21.0")
    final_step = console_line(5, {"final_train": {"learner_step": 4, "published": {"act": 5}}})
    assert "final GRPO step" in final_step and "learner_step=4" in final_step and "episodes" not in final_step
    final = console_line(5, {"final_versions": {"act": 5}, "final_bank_versions": {"2048": 5}})
    assert "final" in final and "'act': 5" in final and "episodes" not in final


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
