"""The co-evolution benchmark's table without training (benchmarks/coevolution.py `table`, `summary_lines`,
`markdown`, `plot` on hand-made runs): the bots are rows of the table and levels of the plot, each variant is
compared with its own cold start and with the bots seed by seed, and a game whose protocol check failed is
summarised as not a result instead of as a difference."""

from __future__ import annotations

import pytest

from benchmarks.coevolution import markdown, plot, summary_lines, table
from coplay.eval.ruler import FAILED_LABEL, protocol_check
from coplay.eval.stats import summarize

SEEDS = [str(1000000 + i) for i in range(4)]


def _point(iteration: int, scores: list[float]) -> dict:
    per_seed = dict(zip(SEEDS, scores, strict=True))
    return {"iteration": iteration, **summarize(scores).as_dict(), "per_seed": per_seed}


def _bots(random: list[float], expert: list[float]) -> dict:
    return {bot: {**summarize(v).as_dict(), "per_seed": dict(zip(SEEDS, v, strict=True))}
            for bot, v in (("random", random), ("expert", expert))}


def _runs(random: list[float], expert: list[float]) -> list[dict]:
    bots = _bots(random, expert)
    check = protocol_check({b: {"2048": {"score": s}} for b, s in bots.items()})["2048"]
    runs = []
    for variant, start, final in (("full", [10, 20, 30, 40], [15, 26, 33, 47]),
                                  ("grpo_no_bank", [10, 20, 30, 40], [11, 21, 31, 41])):
        curve = [_point(0, start), _point(3, final)]
        runs.append({"variant": variant, "game": "2048", "seconds": 10.0, "curve": curve, "final": curve[-1],
                     "bots": bots, "protocol_check": check})
    return runs


def test_a_failed_protocol_is_summarised_as_not_a_result(tmp_path):
    runs = _runs(random=[20, 30, 40, 50], expert=[21, 29, 41, 52])  # the bots do not separate
    rows = table(runs)
    lines = summary_lines(rows)
    assert lines == [f"2048: {FAILED_LABEL} ({runs[0]['protocol_check']['reason']})"]
    text = markdown(rows, "python -m benchmarks.coevolution")
    assert f"- 2048: {FAILED_LABEL}" in text and "minus full" in text  # the table still shows the figures
    assert all(FAILED_LABEL in line for line in text.splitlines() if line.startswith("| 2048 |"))
    plot(tmp_path / "p.png", runs, ["2048"])
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"


def test_a_passing_protocol_states_the_differences_paired_by_seed(tmp_path):
    runs = _runs(random=[5, 6, 7, 8], expert=[100, 110, 120, 130])
    plot(tmp_path / "p.png", runs, ["2048"])
    rows = {r["variant"]: r for r in table(runs)}
    assert {"random bot", "expert bot"} <= set(rows) and rows["expert bot"]["bot"]
    full = rows["full"]
    assert full["paired_minus_cold_start"]["difference"] == pytest.approx(5.25)  # 5, 6, 3, 7
    assert full["paired_minus_cold_start"]["n"] == 4
    assert full["paired_minus_bots"]["expert"]["difference"] == pytest.approx(30.25 - 115.0)
    assert rows["sft_first_bank"]["paired_minus_cold_start"] is None  # it is the cold start
    # every variant plays the same evaluation seeds: its difference to full is paired by seed
    assert rows["grpo_no_bank"]["paired_minus_full"]["difference"] == pytest.approx(26.0 - 30.25)
    assert rows["sft_first_bank"]["paired_minus_full"]["difference"] == pytest.approx(25.0 - 30.25)
    assert rows["full"]["paired_minus_full"] is None
    lines = summary_lines(list(rows.values()))
    assert lines[0].startswith("2048: protocol check passed")
    assert any(line.strip().startswith("grpo_no_bank: minus full -4.2 [") and "(paired)" in line.split(";")[0]
               for line in lines)
    assert not any(FAILED_LABEL in line for line in lines)


def test_results_from_before_the_ruler_are_not_summarised_as_a_result():
    runs = _runs(random=[5, 6, 7, 8], expert=[100, 110, 120, 130])
    for run in runs:  # as read from a results file written before the ruler
        del run["bots"], run["protocol_check"]
        for point in run["curve"]:
            del point["per_seed"]
    rows = table(runs)
    assert not any(r["bot"] for r in rows) and rows[0]["paired_minus_cold_start"] is None
    assert summary_lines(rows) == ["2048: protocol not checked (runs from before the ruler): no difference "
                                   "below is reported as a result"]


def test_the_bots_keep_their_order_after_a_round_trip_through_the_results_json():
    import json

    runs = _runs(random=[5, 6, 7, 8], expert=[100, 110, 120, 130])
    reread = json.loads(json.dumps(runs, sort_keys=True))  # as write_results stores them
    assert [r["variant"] for r in table(reread)] == [r["variant"] for r in table(runs)]
    assert [r["variant"] for r in table(runs) if r["bot"]] == ["random bot", "expert bot"]


def test_a_run_without_sft_calls_its_iteration_zero_the_base_model_not_sft_only():
    every = _runs(random=[5, 6, 7, 8], expert=[100, 110, 120, 130])
    runs = [r for r in every if r["variant"] == "grpo_no_bank"]
    runs[0]["sizes"] = {"sft": False}
    rows = {r["variant"]: r for r in table(runs)}
    assert "sft_only" not in rows
    assert rows["base"]["from"] == "grpo_no_bank at iteration 0" and rows["base"]["mean"] == 25.0
    runs[0]["sizes"] = {"sft": True}
    assert "sft_only" in {r["variant"] for r in table(runs)}
    full = [r for r in every if r["variant"] == "full"]
    full[0]["sizes"] = {"sft": False}  # base model plus the seed bank: no row of its own
    assert {r["variant"] for r in table(full)} == {"full", "random bot", "expert bot"}
