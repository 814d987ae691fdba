"""The run report without a browser: what it reads from a run folder, that it is self-contained, that a run
that stopped early or holds a bad file still gets a report, and the `coplay report` verb."""

from __future__ import annotations

import json
import re

import pytest
from synthetic_run import ITERATIONS

from coplay.cli import main
from coplay.config import CoplayConfig
from coplay.report import render_report, write_report
from coplay.report.data import eval_overlays, load_run, score_series, throughput_rows
from coplay.runs import RunDir


@pytest.fixture
def run(synthetic_run) -> RunDir:
    return synthetic_run


def test_reads_every_part_of_the_run(run):
    data = load_run(run.root)
    assert [r["iteration"] for r in data.iterations] == list(range(1, ITERATIONS + 1))
    assert data.cold_start is not None and data.cold_start["iteration"] == 0
    assert sorted(e.name for e in data.evals) == ["model-it2", "model-it4", "random"]
    assert list(data.banks) == ["2048"] and [b.version for b in data.banks["2048"]] == [1, 2, 3, 4]
    assert data.problems == []


def test_learning_curve_carries_the_ci_band_of_each_iteration(run):
    data = load_run(run.root)
    series = score_series(data.iterations, "2048")
    record = data.iterations[2]["scores"]["2048"]
    assert series.x == [1, 2, 3, 4]
    assert (series.y[2], series.low[2], series.high[2]) == (record["mean"], record["ci_low"],
                                                            record["ci_high"])


def test_evaluations_split_into_iteration_points_and_baselines(run):
    data = load_run(run.root)
    points, levels = eval_overlays(data.evals, "2048")
    assert [(s.label, s.x) for s in points] == [("model (eval on seeds.eval)", [2, 4])]
    assert [level.label for level in levels] == ["random (eval)"]
    random_score = next(e for e in data.evals if e.name == "random").results["2048"]["score"]
    assert (levels[0].value, levels[0].low, levels[0].high) == (
        random_score["mean"], random_score["ci_low"], random_score["ci_high"])


def test_trained_tokens_per_second_is_over_the_iteration_wall_time(run):
    rows = throughput_rows(load_run(run.root).iterations)
    first, second = rows[0], rows[1]
    assert first["trained_tokens_per_s"] is None  # no learner step in iteration 1 (staleness 1)
    assert second["trained_tokens_per_s"] == pytest.approx(second["trained_tokens"] / second["iteration_s"])


def test_report_is_self_contained_and_holds_every_section(synthetic_report):
    page = synthetic_report.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page), \
        "the page references a remote resource"
    assert not re.search(r"url\(\s*['\"]?https?:", page)
    for section in ("learning", "rewards", "invalid", "learner", "banks", "skills", "league", "eval",
                    "throughput", "phases", "config"):
        assert f"<section id='{section}'>" in page
    assert page.count("<figure class='chart'") == 13
    assert page.count("id='chart-skills-2048-") == 3  # skills per version, tags per version, the policy's use
    assert page.count("Skill analysis</h2>") == 1  # the embedded bank report does not repeat it
    assert "<h3>avalon after iteration" in page and "<td>act@v0</td>" in page and "<td>expert</td>" in page
    assert "avalon: the learner per role, all iterations" in page and "win rate [95% Wilson]" in page
    assert "avalon win rates" in page and "<td>side:good</td>" in page
    assert "<h3>Operations per version</h3>" in page and "<b>s1</b>" in page  # the bank report is embedded
    table = page.split("<table class='skill-use'>")[1].split("</table>")[0]  # skill use per iteration
    assert table.count("<tr>") == 1 + 4 and "<th>curator agrees with the measure</th>" in table


def test_same_run_gives_the_same_charts(run, synthetic_report):
    first = synthetic_report.read_text()
    second = render_report(load_run(run.root))
    strip = re.compile(r"Written [^<]* by")
    assert strip.sub("", first) == strip.sub("", second)


def test_a_run_that_stopped_after_cold_start_still_gets_a_report(tmp_path):
    run = RunDir.create(tmp_path, "early", CoplayConfig().to_yaml())
    run.append_metrics({"iteration": 0, "cold_start": {"sft": {"loss": 2.0}}, "versions": {"act": 0},
                        "bank_versions": {}})
    page = write_report(run.root).read_text()
    assert "No scores yet" in page and "No skill banks" in page and "No evaluations" in page
    assert "<figure class='chart'" not in page


def test_a_bad_eval_file_is_named_in_the_report(tmp_path):
    run = RunDir.create(tmp_path, "bad", CoplayConfig().to_yaml())
    (run.eval / "broken.json").write_text("{not json")
    (run.eval / "other.json").write_text(json.dumps({"rows": []}))
    page = write_report(run.root).read_text()
    assert "broken.json: not JSON" in page
    assert "other.json: expected an object with &#x27;meta&#x27; and &#x27;results&#x27;" in page


def test_cli_report_writes_the_page(tmp_path, capsys):
    run = RunDir.create(tmp_path, "cli", CoplayConfig().to_yaml())
    assert main(["report", str(run.root)]) == 0
    assert capsys.readouterr().out.strip() == str(run.report)
    assert run.report.read_text().startswith("<!doctype html>")


def test_cli_report_names_a_folder_that_is_not_a_run(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "not a coplay run folder" in capsys.readouterr().err


def test_the_probe_files_are_a_section_of_their_own_not_evaluations(tmp_path):
    import json
    import shutil

    from synthetic_run import build_run

    from coplay.report.data import load_run
    from coplay.report.sections import probes

    run = build_run(tmp_path / "runs")
    score = {"n": 4, "mean_regret": 3.25, "regret": {"ci_low": 1.0, "ci_high": 5.5}, "best_share": 0.5,
             "invalid_share": 0.25}
    body = {"meta": {"iteration": 2}, "results": {"2048": {"model": score, "random": score, "expert": score,
                                                           "bots_separate": False}}}
    (run.eval / "probe-it00002.json").write_text(json.dumps(body))
    data = load_run(run.root)
    assert [p.iteration for p in data.probes] == [2]
    assert all(not e.name.startswith("probe-") for e in data.evals)
    html = probes(data)
    assert "3.25 [1.00, 5.50]" in html and "not a result" in html
    shutil.rmtree(run.root)
