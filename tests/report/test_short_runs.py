"""Plots of short runs (issue 20, item 7): one iteration is a marker on a whole-number axis, counts have
whole-number ticks, the cold start's SFT losses are shown, and `bank show` names its two pass figures."""

from __future__ import annotations

from coplay.report.charts import Series, _draw_series, _figure, _integer_axes
from coplay.report.data import load_run
from coplay.report.sections import cold_start


def _axes(series, integer_y=False):
    ax = _figure(4, 3).add_subplot(1, 1, 1)
    _draw_series(ax, series, ())
    _integer_axes(ax, series, integer_y)
    ax.figure.canvas.draw()
    return ax


def test_one_point_is_a_marker_on_a_single_whole_number_tick():
    ax = _axes([Series("score", [1], [3.5])])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1"]
    line = ax.get_lines()[0]
    assert line.get_linestyle() == "None" and line.get_marker() == "o"


def test_counts_get_whole_number_ticks():
    ax = _axes([Series("skills", [0, 1, 2], [1.0, 2.0, 2.0])], integer_y=True)
    assert all(float(t).is_integer() for t in ax.get_yticks())


def test_a_count_that_never_changes_still_gets_whole_number_ticks_from_zero():
    """A bank that keeps its 6 skills: matplotlib's view would be 5.7-6.3 with fractional ticks."""
    ax = _axes([Series("skills", [2, 3], [6.0, 6.0])], integer_y=True)
    ticks = [t for t in ax.get_yticks() if ax.get_ylim()[0] <= t <= ax.get_ylim()[1]]
    assert ax.get_ylim()[0] == 0 and 6 in ticks and all(float(t).is_integer() for t in ticks)


def test_stacked_count_bars_get_whole_number_ticks(monkeypatch):
    from coplay.report import charts

    drawn = []
    monkeypatch.setattr(charts, "_to_svg", lambda fig, chart_id: drawn.append(fig.axes[0]) or "")
    charts.stacked_bars("ops", "bank operations per version", "bank version", "operations", ["2", "3"],
                        {"materialize": [2.0, 0.0]}, integer_y=True)
    ax = drawn[0]
    ax.figure.canvas.draw()
    low, high = ax.get_ylim()
    ticks = [t for t in ax.get_yticks() if low <= t <= high]
    assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks), ticks


def test_the_cold_start_sft_losses_are_shown(synthetic_run):
    section = cold_start(load_run(synthetic_run.root))
    assert "first_loss" in section and "9.500" in section and "SFT took 61 s" in section


def test_bank_show_names_its_two_pass_figures_and_explains_the_columns(synthetic_run):
    from coplay.report.bank import show_bank

    text = show_bank(synthetic_run.root, "2048")
    assert "contracts on held-out segments" in text and "use pass" in text
    assert "held-out pass" not in text and "Columns:" in text
