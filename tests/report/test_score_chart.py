"""The demo's `score.png` and the report's score chart say what they plot: whole-number iteration ticks, the
bots beside the run, a title naming the training rollouts, and a caption that matches the marks drawn."""

from __future__ import annotations

import shutil

from coplay.driver.demo import score_figure, score_plot


def test_score_png_has_whole_iteration_ticks_the_bots_and_a_title(synthetic_run, tmp_path):
    root = shutil.copytree(synthetic_run.root, tmp_path / "run")
    fig = score_figure(root)
    assert [a.get_title() for a in fig.axes] == ["2048: score per iteration", "avalon: score per iteration"]
    ax = fig.axes[0]
    ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    assert ticks and all(float(t).is_integer() for t in ticks)
    labels = ax.get_legend_handles_labels()[1]
    assert "training rollouts (mean, 95% CI)" in labels
    assert "random (eval)" in labels  # the bot evaluated once, a dashed line
    assert any(label.endswith("(eval on seeds.eval)") for label in labels)  # evaluations at an iteration
    assert "training rollouts" in fig._suptitle.get_text()
    assert score_plot(root).stat().st_size > 0


def test_report_caption_describes_the_marks_it_draws(synthetic_report):
    text = synthetic_report.read_text()
    assert "dotted: evaluations" not in text
    assert "squares (joined by a dotted line when there are several): evaluations on seeds.eval" in text
