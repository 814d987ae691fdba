"""The report's phase timeline: drawn from a run whose metrics lines carry `phases` (the synthetic run, built
with the loop's own record functions), and a plain 'not recorded' from a run from before the timeline."""

from __future__ import annotations

from html import escape

import pytest
from synthetic_run import ITERATIONS

from coplay.config import CoplayConfig
from coplay.driver.metrics import iteration_record
from coplay.driver.phases import run_totals
from coplay.driver.records import CollectStats, IterationData
from coplay.report import write_report
from coplay.report.data import load_run
from coplay.report.timeline import NOT_RECORDED, line_label, section
from coplay.runs import RunDir
from coplay.types import BankUpdate


def test_the_section_draws_every_line_and_tabulates_the_run(synthetic_run, synthetic_report):
    data = load_run(synthetic_run.root)
    assert [line_label(r) for r in data.timeline] == ["start", *map(str, range(1, ITERATIONS + 1))]
    totals = run_totals(data.timeline)
    assert sum(totals["share"].values()) == pytest.approx(1.0)
    assert totals["seconds"]["cold_start_sft"] == 61.0 and totals["seconds"]["cold_start_teacher"] == 34.0
    # each learner step's publishing (0.3 s) left the learner's lap for publish_sync
    steps = ITERATIONS - 1
    assert totals["seconds"]["learner"] == pytest.approx(3.0 * ITERATIONS - (0.3 + 0.4) * steps)
    page = synthetic_report.read_text()
    assert "<section id='phases'><h2>Phase timeline</h2><figure class='chart' id='chart-phases'>" in page
    assert escape(NOT_RECORDED) not in page
    html = section(data)
    for part in ("<td>cold_start_sft</td><td>61.0</td>", "<td>startup_engines</td>", "<td>other</td>",
                 "<td>run</td>", "Busy seconds of the components (they overlap)", "<th>forward</th>",
                 "<td>segment</td><td>6</td><td>12</td><td>24</td>", "tokens out / s",
                 "must not be added together"):
        assert part in html, part


def test_a_run_from_before_the_timeline_says_it_was_not_recorded(tmp_path):
    run = RunDir.create(tmp_path, "old", CoplayConfig().to_yaml())
    run.append_metrics({"iteration": 0, "cold_start": {"sft": {}}, "versions": {"act": 0},
                        "bank_versions": {}})
    for k in (1, 2):
        run.append_metrics(iteration_record(k, IterationData(k, [], [], {}), CollectStats(wall_seconds=3.0),
                                            BankUpdate(), None, {"act": 0}, 3.5, {}))
    data = load_run(run.root)
    assert data.timeline == [] and len(data.iterations) == 2
    page = write_report(run.root).read_text()
    assert "<section id='phases'><h2>Phase timeline</h2>" in page and escape(NOT_RECORDED) in page
    assert "id='chart-phases'" not in page and "<section id='throughput'>" in page
