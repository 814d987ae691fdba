"""The end-to-end benchmark (benchmarks/e2e.py): the iteration time split, hidden bank and training work,
throughput per slot and the overlap speedup, on hand-made metrics records; the real two-run benchmark
(`python -m benchmarks.e2e --quick`) in the slow tier."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.e2e import (
    PARTS,
    iteration_split,
    measured_records,
    overlap_speedup,
    plot_split,
    slot_count,
    summarize_run,
)

REPO = Path(__file__).resolve().parents[2]


def timings(iteration_s: float, generation_s: float, train_s: float, bank_s: float = 0.0,
            bank_wait_s: float = 0.0, sync_s: float = 0.1, env_s: float = 0.0) -> dict[str, float]:
    return {"iteration_s": iteration_s, "sync_s": sync_s, "rollout_wall_s": generation_s + 0.01,
            "generation_s": generation_s, "env_s": env_s, "bank_s": bank_s, "bank_wait_s": bank_wait_s,
            "train_s": train_s}


def record(k: int, t: dict[str, float], trained: int = 100, generated: int = 200) -> dict:
    return {"iteration": k, "timings": t, "generated_tokens": generated, "train": {"trained_tokens": trained}}


def test_synchronous_split_puts_the_whole_learner_step_on_the_path_and_idle_is_the_rest():
    split = iteration_split(timings(5.0, generation_s=2.5, train_s=1.5, bank_s=1.0, bank_wait_s=0.2,
                                    env_s=0.5), 0, 1)
    assert split["training"] == pytest.approx(1.5) and split["hidden_training"] == 0.0
    assert split["env"] == pytest.approx(0.5) and split["generation"] == pytest.approx(2.0)
    assert split["bank"] == pytest.approx(0.2) and split["hidden_bank"] == pytest.approx(0.8)
    assert split["idle"] == pytest.approx(5.0 - (0.1 + 2.5 + 1.5 + 0.2))
    assert sum(split[p] for p in PARTS) == pytest.approx(5.0)


def test_overlapped_training_shorter_than_the_rollouts_is_fully_hidden():
    split = iteration_split(timings(2.8, generation_s=2.5, train_s=1.9), 1, 1)
    assert split["training"] == 0.0 and split["hidden_training"] == pytest.approx(1.9)
    assert split["idle"] == pytest.approx(0.2)
    assert sum(split[p] for p in PARTS) == pytest.approx(2.8)


def test_overlapped_training_longer_than_the_rollouts_shows_only_its_excess():
    split = iteration_split(timings(4.5, generation_s=2.0, train_s=3.5), 1, 1)
    assert split["training"] == pytest.approx(1.5) and split["hidden_training"] == pytest.approx(2.0)
    assert split["idle"] == pytest.approx(4.5 - (0.1 + 2.0 + 1.5))


def test_env_time_is_per_worker_and_never_exceeds_the_rollouts():
    assert (iteration_split(timings(3.0, generation_s=2.0, train_s=0.0, env_s=1.0), 1, 2)["env"]
            == pytest.approx(0.5))
    capped = iteration_split(timings(3.0, generation_s=2.0, train_s=0.0, env_s=9.0), 1, 2)
    assert capped["env"] == pytest.approx(2.0) and capped["generation"] == 0.0


def test_idle_never_goes_negative_on_clock_noise():
    assert iteration_split(timings(2.59, generation_s=2.5, train_s=0.0), 1, 1)["idle"] == 0.0


def test_measured_iterations_skip_the_first_iteration_and_records_without_timings():
    records = [{"iteration": 0, "cold_start": {}}, record(1, timings(4.0, 3.0, 0.0)),
               record(3, timings(2.0, 1.5, 1.0)),
               record(2, timings(2.5, 2.0, 1.0)), {"iteration": 4, "final_train": {"trained_tokens": 999}}]
    assert [r["iteration"] for r in measured_records(records)] == [2, 3]


def test_run_summary_throughput_hidden_shares_and_median():
    records = [record(1, timings(9.0, 3.0, 0.0), trained=0),
               record(2, timings(2.0, 1.5, 1.0, bank_s=1.0, bank_wait_s=0.0), trained=100, generated=300),
               record(3, timings(3.0, 1.5, 2.0, bank_s=1.0, bank_wait_s=0.5), trained=200, generated=300),
               record(4, timings(5.0, 1.5, 1.0, bank_s=2.0, bank_wait_s=0.5), trained=300, generated=400)]
    summary = summarize_run(records, staleness=1, workers=1, slots=2)
    assert summary["measured_iterations"] == [2, 3, 4]
    assert summary["wall_s"] == pytest.approx(10.0) and summary["iteration_s_median"] == pytest.approx(3.0)
    assert summary["trained_tokens"] == 600 and summary["generated_tokens"] == 1000
    assert summary["trained_tokens_per_s_per_slot"] == pytest.approx(600 / (10.0 * 2))
    assert summary["generated_tokens_per_s_per_slot"] == pytest.approx(1000 / (10.0 * 2))
    assert summary["hidden_bank_share"] == pytest.approx(1 - 1.0 / 4.0)
    # only iteration 3 trains past rollouts
    assert summary["hidden_training_share"] == pytest.approx(1 - 0.5 / 4.0)
    assert sum(summary["split_mean_s"][p] for p in PARTS) == pytest.approx(10.0 / 3)
    assert summary["iterations_with_faults"] == []


def test_iterations_with_faults_are_flagged():
    faulty = {**record(2, timings(2.0, 1.5, 1.0)),
              "faults": {"rollout_reruns": ["it2 chunk 0: worker-0 died"]}}
    summary = summarize_run([faulty, {**record(3, timings(2.0, 1.5, 1.0)), "faults": {}}], 1, 1, 2)
    assert summary["iterations_with_faults"] == [2]


def test_no_bank_work_gives_no_hidden_share_rather_than_a_made_up_number():
    summary = summarize_run([record(2, timings(2.0, 1.5, 1.0))], staleness=0, workers=1, slots=2)
    assert summary["hidden_bank_share"] is None


def test_a_run_without_measured_iterations_is_an_error_that_says_so():
    with pytest.raises(ValueError, match="at least 2 iterations"):
        summarize_run([record(1, timings(2.0, 1.5, 0.0))], staleness=1, workers=1, slots=2)


def test_overlap_speedup_is_the_ratio_of_median_iteration_walls():
    sync_run = summarize_run([record(2, timings(4.0, 2.0, 1.5)), record(3, timings(4.4, 2.0, 1.5)),
                              record(4, timings(9.0, 2.0, 1.5))], staleness=0, workers=1, slots=2)
    overlapped = summarize_run([record(2, timings(2.0, 2.0, 1.5)), record(3, timings(2.2, 2.0, 1.5)),
                                record(4, timings(2.4, 2.0, 1.5))], staleness=1, workers=1, slots=2)
    speedup = overlap_speedup(sync_run, overlapped)
    assert speedup["overlap_speedup"] == pytest.approx(4.4 / 2.2)  # the outlier iteration does not move it
    assert speedup["overlap_speedup_total"] == pytest.approx(17.4 / 6.6)
    # ideal: s = 0's median iteration over its longer part (rollouts 2.0 against training 1.5)
    assert speedup["overlap_speedup_ideal"] == pytest.approx(4.4 / 2.0)
    assert speedup["overlap_share_of_ideal"] == pytest.approx((4.4 / 2.2) / (4.4 / 2.0))


def test_slots_count_cpu_slots_and_shared_gpus_once():
    assert slot_count(workers=1, ranks=1, gpu=False) == 2
    assert slot_count(workers=4, ranks=2, gpu=True) == 6
    assert slot_count(workers=2, ranks=2, gpu=True, worker_gpus=0.5, rank_gpus=0.5) == 2


def test_plot_writes_a_png(tmp_path):
    runs = {"s=1": summarize_run([record(2, timings(2.0, 1.5, 1.0, bank_s=1.0))], 1, 1, 2),
            "s=0": summarize_run([record(2, timings(3.5, 1.5, 1.0, bank_s=1.0))], 0, 1, 2)}
    path = plot_split(runs, tmp_path / "split.png", "test")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_quick_benchmark_runs_both_stalenesses_end_to_end(tmp_path):
    plot = tmp_path / "e2e.png"
    cases = "workers_2_one_group,mario_env_processes"
    done = subprocess.run([sys.executable, "-m", "benchmarks.e2e", "--quick", "--plot", str(plot), "--cases",
                           cases], cwd=REPO, capture_output=True, text=True, timeout=2400)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["iterations"] == 3 and result["workload"]["measured_iterations"] == [2, 3]
    for name in ("staleness_1", "staleness_0"):
        run = result["runs"][name]
        assert run["trained_tokens"] > 0 and run["generated_tokens"] > 0
        assert sum(run["split_mean_s"][p] for p in PARTS) == pytest.approx(run["wall_s"] / 2, rel=1e-3)
    assert result["runs"]["staleness_0"]["hidden_training_share"] == pytest.approx(0.0)
    assert result["overlap_speedup"] > 0 and set(result["headline"]) >= {"overlap_speedup", "iteration_s"}
    split_group = result["cases"]["workers_2_one_group"]  # one group of 8 on two workers: both roll out
    assert split_group["idle_worker_iterations"] == 0 and len(split_group["worker_episodes_mean"]) == 2
    assert sum(split_group["worker_episodes_mean"]) == 8
    mario = result["cases"]["mario_env_processes"]
    assert mario["env_s_mean"] > 0 and mario["split_mean_s"]["env"] == 0.0  # env calls overlap generation
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_case_row_gives_each_workers_time_and_seats_and_counts_idle_ones():
    from benchmarks.e2e import case_row

    records = [record(k, timings(4.0, 3.0, 1.0, env_s=1.0)) for k in (2, 3)]
    records[0]["workers"] = {"rollout_s": [3.0, 2.0], "episodes": [4, 4]}
    records[1]["workers"] = {"rollout_s": [3.0, 0.0], "episodes": [8, 0]}
    row = case_row(records)
    assert row["worker_rollout_s_mean"] == [3.0, 1.0] and row["worker_episodes_mean"] == [6.0, 2.0]
    assert row["idle_worker_iterations"] == 1
    assert 0 < row["env_share"] < 1


def test_with_env_threads_no_rollout_time_is_put_on_env():
    t = timings(5.0, generation_s=4.0, train_s=1.0, env_s=6.0)  # env calls overlapping generation
    overlapped = iteration_split(t, 1, 1, env_overlapped=True)
    assert overlapped["env"] == 0.0 and overlapped["generation"] == pytest.approx(4.0)
    assert iteration_split(t, 1, 1)["env"] == pytest.approx(4.0)  # serial: capped at the rollouts
