"""Charts for the run report: matplotlib figures rendered to inline SVG markup (no CDN, no JavaScript).

Each function returns the `<svg>` element as a string. Figures are made with `matplotlib.figure.Figure`
directly (no pyplot, no global state), text stays text (`svg.fonttype: none`), ids are salted per chart so
several SVGs can share one page, and no date is written, so the same data gives the same bytes.
matplotlib is imported inside the functions. Never imports ray, torch or the engines.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")
_SVG_START = re.compile(r"<svg\b")


@dataclass
class Series:
    """One line: y over x, with an optional confidence band [low, high] drawn as a shaded area.
    `None` in y (or in a band bound) leaves a gap."""

    label: str
    x: list[float]
    y: list[float | None]
    low: list[float | None] | None = None
    high: list[float | None] | None = None
    style: dict[str, Any] = field(default_factory=dict)


@dataclass
class Level:
    """A horizontal reference (a baseline evaluated once): value with an optional band."""

    label: str
    value: float
    low: float | None = None
    high: float | None = None


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=72)


def _to_svg(fig: Any, salt: str) -> str:
    import matplotlib

    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight")
    text = buf.getvalue()
    match = _SVG_START.search(text)
    if match is None:
        raise RuntimeError(f"chart {salt}: matplotlib wrote no <svg> element")
    return text[match.start():].strip()


def _finite(v: float | None) -> float:
    return float("nan") if v is None or not math.isfinite(float(v)) else float(v)


def _style_axes(ax: Any, title: str, xlabel: str, ylabel: str, integer_x: bool = True) -> None:
    from matplotlib.ticker import MaxNLocator

    if integer_x:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(title, fontsize=11)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)


def _integer_axes(ax: Any, series: Sequence[Series], integer_y: bool = False) -> None:
    """Whole-number ticks (iterations, versions, counts); one x value gets a single tick with room either side
    instead of an autoscaled fractional axis."""

    xs = sorted({float(x) for s in series for x in s.x})
    if len(xs) == 1:
        ax.set_xticks(xs, [f"{xs[0]:g}"])
        ax.set_xlim(xs[0] - 1, xs[0] + 1)
    if integer_y:
        _count_axis(ax)


def _count_axis(ax: Any) -> None:
    """A y axis of counts: from zero, with whole-number ticks. (Matplotlib's integer locator falls back to
    fractional ticks when the view holds fewer than two integers, e.g. a bank that stays at 6 skills.)"""
    from matplotlib.ticker import MaxNLocator

    low, high = ax.get_ylim()
    ax.set_ylim(min(0.0, low), max(high, 1.0))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def _draw_series(ax: Any, series: Sequence[Series], levels: Sequence[Level]) -> None:
    for i, s in enumerate(series):
        color = s.style.get("color", PALETTE[i % len(PALETTE)])
        y = [_finite(v) for v in s.y]
        alone = len(s.x) == 1  # one point: a marker, not an invisible line
        ax.plot(s.x, y, marker=s.style.get("marker", "o"), markersize=7 if alone else 3, linewidth=1.5,
                color=color, linestyle="none" if alone else s.style.get("linestyle", "-"), label=s.label)
        if s.low is not None and s.high is not None:
            ax.fill_between(s.x, [_finite(v) for v in s.low], [_finite(v) for v in s.high], color=color,
                            alpha=0.18, linewidth=0)
    for j, level in enumerate(levels):
        color = PALETTE[(len(series) + j) % len(PALETTE)]
        ax.axhline(level.value, color=color, linestyle="--", linewidth=1.2, label=level.label)
        if level.low is not None and level.high is not None:
            ax.axhspan(level.low, level.high, color=color, alpha=0.10, linewidth=0)


def draw_lines(ax: Any, title: str, xlabel: str, ylabel: str, series: Sequence[Series],
               levels: Sequence[Level] = (), ylim: tuple[float, float] | None = None,
               xlim: tuple[float, float] | None = None, integer_y: bool = False) -> None:
    """Lines (with CI bands where given) and horizontal reference levels on the matplotlib axes `ax`; x is
    an integer axis (iterations, versions), and so is y with `integer_y` (counts). The report's charts and
    the demo's `score.png` draw through it, so both show the same marks."""
    _draw_series(ax, series, levels)
    _style_axes(ax, title, xlabel, ylabel)
    _integer_axes(ax, series, integer_y)
    if ylim is not None:
        ax.set_ylim(*ylim)
    if xlim is not None and len({x for s in series for x in s.x}) > 1:
        ax.set_xlim(*xlim)
    if series or levels:
        ax.legend(fontsize=8, loc="best")


def line_chart(chart_id: str, title: str, xlabel: str, ylabel: str, series: Sequence[Series],
               levels: Sequence[Level] = (), ylim: tuple[float, float] | None = None,
               xlim: tuple[float, float] | None = None, integer_y: bool = False) -> str:
    """`draw_lines` on one axes, as inline SVG."""
    fig = _figure(7.5, 3.4)
    draw_lines(fig.add_subplot(1, 1, 1), title, xlabel, ylabel, series, levels, ylim, xlim, integer_y)
    return _to_svg(fig, chart_id)


def small_multiples(chart_id: str, title: str, xlabel: str, panels: dict[str, Sequence[Series]],
                    columns: int = 3) -> str:
    """One small axes per panel name (e.g. per adapter), each with its own y scale."""
    names = list(panels)
    cols = max(1, min(columns, len(names)))
    rows = max(1, math.ceil(len(names) / cols))
    fig = _figure(3.2 * cols, 2.5 * rows + 0.4)
    for k, name in enumerate(names):
        ax = fig.add_subplot(rows, cols, k + 1)
        _draw_series(ax, panels[name], ())
        _style_axes(ax, name, xlabel, "")
        _integer_axes(ax, panels[name])
        if len(panels[name]) > 1:
            ax.legend(fontsize=7, loc="best")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return _to_svg(fig, chart_id)


def stacked_bars(chart_id: str, title: str, xlabel: str, ylabel: str, x: Sequence[float | str],
                 parts: dict[str, Sequence[float]], integer_y: bool = False,
                 colors: dict[str, str] | None = None, legend_outside: bool = False) -> str:
    """Bars stacked from the parts in the given order (e.g. the time split of each iteration); a y axis of
    whole numbers with `integer_y` (counts). `colors`: a colour per part name (the same phase keeps its
    colour from run to run; the palette otherwise); `legend_outside`: the legend right of the axes, for
    many parts."""
    fig = _figure(9.0 if legend_outside else 7.5, 3.4)
    ax = fig.add_subplot(1, 1, 1)
    positions = list(range(len(x)))
    bottom = [0.0] * len(x)
    for i, (name, values) in enumerate(parts.items()):
        heights = [v if math.isfinite(v) and v > 0 else 0.0 for v in map(_finite, values)]
        color = (colors or {}).get(name, PALETTE[i % len(PALETTE)])
        ax.bar(positions, heights, bottom=bottom, color=color, label=name, width=0.7)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    step = max(1, math.ceil(len(positions) / 20))  # at most ~20 tick labels
    ax.set_xticks(positions[::step], [str(v) for v in list(x)[::step]])
    _style_axes(ax, title, xlabel, ylabel, integer_x=False)
    if integer_y:
        _count_axis(ax)
    if parts and legend_outside:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), reverse=True)
    elif parts:
        ax.legend(fontsize=8, loc="best")
    return _to_svg(fig, chart_id)
