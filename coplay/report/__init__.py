"""The HTML run report (`coplay report RUN_DIR` -> `report.html`): learning curves, reward parts, invalid
actions, learner figures, skill banks, evaluations and throughput, in one self-contained page.
Never imports ray or torch."""

from coplay.report.html import render_report, write_report

__all__ = ["render_report", "write_report"]
