"""The phase timeline's record (`coplay.driver.phases`): laps on the driver's clock add up to the line's
wall time, `other` takes the rest and the shares sum to 1; a learner step's publishing and update measure
move out of its lap; the busy view carries the bank's calls per kind and the learner's parts; the run's
totals sum the lines."""

from __future__ import annotations

import random

import pytest

from coplay.driver.metrics import console_line
from coplay.driver.phases import OTHER, Laps, PhaseClock, iteration_phases, phase_record, run_totals
from coplay.driver.records import CollectStats
from coplay.types import BankUpdate, TrainStep


class Ticks:
    """A clock that moves only when told (the laps become exact numbers)."""

    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_laps_add_up_and_take_starts_afresh():
    ticks = Ticks()
    clock = PhaseClock(ticks)
    ticks.t += 2.0
    assert clock.lap("sync") == 2.0
    ticks.t += 5.0
    clock.lap("rollouts")
    ticks.t += 1.0
    clock.lap("sync")  # laps of one name add up
    ticks.t += 0.5  # no lap names this: `other`
    laps = clock.take()
    assert laps.wall_s == 8.5 and laps.seconds == {"sync": 3.0, "rollouts": 5.0}
    record = phase_record(laps)
    assert record["seconds"] == {"rollouts": 5.0, "sync": 3.0, OTHER: 0.5}
    assert record["wall_s"] == 8.5 and sum(record["share"].values()) == pytest.approx(1.0, abs=1e-12)
    ticks.t += 3.0
    clock.lap("checkpoint")  # after a take: the next line's
    assert clock.take().seconds == {"checkpoint": 3.0}


@pytest.mark.parametrize("seed", range(20))
def test_shares_sum_to_one_within_float_error(seed):
    rng = random.Random(seed)
    names = ["publish_sync", "rollouts", "learner", "bank_update", "evaluation", "checkpoint"]
    seconds = {n: rng.uniform(0, 10) ** 3 for n in rng.sample(names, rng.randint(1, len(names)))}
    wall = sum(seconds.values()) * rng.choice([1.0, 1.0 + 1e-15, 1.3, 1 - 1e-12])  # clock noise either way
    record = phase_record(Laps(wall, seconds), moves=[("learner", "publish_sync", rng.uniform(0, 20))])
    assert sum(record["share"].values()) == pytest.approx(1.0, rel=0, abs=1e-9)
    assert sum(record["seconds"].values()) == pytest.approx(record["wall_s"], rel=1e-12)
    assert min(record["seconds"].values()) >= 0.0 and list(record["seconds"])[-1] == OTHER


def test_a_learner_steps_publishing_and_measure_leave_its_lap_and_the_busy_view_has_every_part():
    laps = Laps(20.0, {"publish_sync": 1.0, "rollouts": 4.0, "learner": 12.0, "bank_update": 2.0})
    stats = CollectStats(generation_seconds=9.0, wall_seconds=15.0, env_ns=2_000_000_000)
    calls = {"segment": {"calls": 2, "prompts": 4, "completions": 8, "tokens_in": 900, "tokens_out": 120,
                         "seconds": 3.0},
             "contract": {"calls": 1, "prompts": 2, "completions": 4, "tokens_in": 700, "tokens_out": 400,
                          "seconds": 5.0}}
    bank = BankUpdate(seconds=10.0, calls=calls)
    train = TrainStep(1, seconds=11.0, measure_seconds=0.5,
                      timings={"batch_s": 0.2, "forward_s": 4.0, "backward_s": 5.0, "optimizer_s": 0.3,
                               "step_s": 9.5, "export_s": 0.4, "publish_s": 1.5, "measure_s": 0.5})
    record = iteration_phases(laps, stats, bank, train)
    assert record["seconds"]["learner"] == pytest.approx(10.0)  # 12 - publish 1.5 - measure 0.5
    assert record["seconds"]["publish_sync"] == pytest.approx(2.5)
    assert record["seconds"]["evaluation"] == pytest.approx(0.5)
    assert record["seconds"][OTHER] == pytest.approx(1.0) and record["wall_s"] == pytest.approx(20.0)
    busy = record["busy"]
    assert busy["rollouts"] == {"seconds": 15.0, "generation_s": 9.0, "env_s": 2.0}
    assert busy["bank_update"]["model_calls_s"] == 8.0 and busy["bank_update"]["calls"] == calls
    assert busy["learner"]["seconds"] == 11.0 and busy["learner"]["forward_s"] == 4.0
    assert set(busy["learner"]) >= {"batch_s", "forward_s", "backward_s", "optimizer_s", "export_s",
                                    "publish_s", "measure_s"}
    assert " time 20 s: learner 50%" in console_line(3, {"phases": record})


def test_the_last_iterations_two_learner_steps_both_leave_their_publishing_and_add_their_busy_seconds():
    """With staleness 1 the last iteration's learner segment holds step k-1 and its own step k."""
    laps = Laps(30.0, {"rollouts": 4.0, "learner": 24.0})
    steps = [TrainStep(j, seconds=10.0, measure_seconds=0.5,
                       timings={"forward_s": 4.0, "backward_s": 5.0, "publish_s": 1.0, "measure_s": 0.5})
             for j in (2, 3)]
    record = iteration_phases(laps, None, None, *steps)
    assert record["seconds"]["learner"] == pytest.approx(21.0)  # 24 - 2 x (publish 1 + measure 0.5)
    assert record["seconds"]["publish_sync"] == pytest.approx(2.0)
    assert record["seconds"]["evaluation"] == pytest.approx(1.0)
    assert record["busy"]["learner"] == {"seconds": 20.0, "forward_s": 8.0, "backward_s": 10.0,
                                         "publish_s": 2.0, "measure_s": 1.0}


def test_run_totals_sum_the_lines_and_say_when_none_has_phases():
    first = phase_record(Laps(10.0, {"startup_ray": 2.0, "cold_start_sft": 6.0}),
                         {"startup": {"engines_s": 30.0, "workers": 1}})
    second = iteration_phases(Laps(5.0, {"rollouts": 3.0, "learner": 2.0}),
                              bank=BankUpdate(seconds=1.0, calls={"segment": {"calls": 1, "tokens_out": 7}}))
    third = iteration_phases(Laps(5.0, {"rollouts": 4.0}),
                             bank=BankUpdate(seconds=2.0, calls={"segment": {"calls": 2, "tokens_out": 5}}))
    totals = run_totals([{"iteration": 0, "phases": first}, {"iteration": 1, "scores": {}},
                         {"iteration": 1, "phases": second}, {"iteration": 2, "phases": third}])
    assert totals["lines"] == 3 and totals["wall_s"] == pytest.approx(20.0)
    assert totals["seconds"]["rollouts"] == 7.0 and totals["seconds"][OTHER] == pytest.approx(3.0)
    assert list(totals["seconds"])[:2] == ["startup_ray", "cold_start_sft"]
    assert sum(totals["share"].values()) == pytest.approx(1.0)
    assert totals["busy"]["bank_update"]["calls"]["segment"] == {"calls": 3, "tokens_out": 12}
    assert totals["busy"]["startup"]["engines_s"] == 30.0
    assert run_totals([{"iteration": 1, "timings": {"iteration_s": 3.0}}]) is None
