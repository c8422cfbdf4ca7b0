"""Charts of the corpus, drawn by matplotlib as standalone SVG with deterministic bytes.

A chart is data (`BarChart`: categories and stacked series; `LineChart`: lines
over a numeric axis) handed to matplotlib by `figure` or `line_figure`;
`render_svg` saves that figure. The same chart gives
the same bytes in every process of one matplotlib version: the SVG's element
ids are hashed from `svg.hashsalt` (else from random uuids), the `Date`
metadata is left out (else the time of writing), and glyphs are paths
(`svg.fonttype: path`, matplotlib's bundled DejaVu Sans), so the picture does
not depend on the fonts of the machine that shows it.

matplotlib rather than Altair + vl-convert-python: both give stable bytes,
matplotlib drew the four plots sooner in a fresh process (no JavaScript engine
to start) with half the memory (the measurement is in the commit that chose it).
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import matplotlib
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.container import BarContainer
    from matplotlib.typing import RcKeyType

# the figure in inches; matplotlib's SVG counts 72 points to the inch
WIDTH_IN, HEIGHT_IN = 7.6, 4.0
# value labels above the bars only where they fit
MAX_LABELLED_BARS = 40

SVG_RC: dict[RcKeyType, Any] = {
    "svg.hashsalt": "grumem",
    "svg.fonttype": "path",
    "font.family": "DejaVu Sans",
    "font.size": 9.0,
}
SVG_METADATA = {"Date": None}


@dataclass(frozen=True)
class Series:
    name: str
    color: str
    values: tuple[float, ...]  # one per category


@dataclass(frozen=True)
class BarChart:
    """Bars per category; several series stack in order, bottom first."""

    name: str  # the file stem
    title: str
    subtitle: str
    x_label: str
    y_label: str
    categories: tuple[str, ...]
    series: tuple[Series, ...]
    y_max: float | None = None  # a fixed axis top (rates: 1); else from the data
    value_format: str = "{:g}"

    def totals(self) -> tuple[float, ...]:
        """The height of each category's stack."""
        return tuple(sum(s.values[i] for s in self.series) for i in range(len(self.categories)))


def _frame(chart: BarChart | LineChart) -> tuple[Figure, Axes]:
    """A figure with the chart's titles and axis labels (call inside SVG_RC)."""
    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), layout="constrained")
    ax = fig.add_subplot()
    fig.suptitle(chart.title, fontweight="bold", x=0.01, ha="left")
    ax.set_title(chart.subtitle, fontsize=8, color="#424242", loc="left")
    ax.set_xlabel(chart.x_label)
    ax.set_ylabel(chart.y_label)
    ax.set_axisbelow(True)
    return fig, ax


def figure(chart: BarChart) -> Figure:
    """The chart as a matplotlib figure (no pyplot: no global state, no GUI backend)."""
    with matplotlib.rc_context(SVG_RC):
        fig, ax = _frame(chart)
        ax.grid(axis="y", color="#e0e0e0")
        n = len(chart.categories)
        if n == 0:
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", color="#757575")
            ax.set_xticks([])
            return fig
        positions = range(n)
        bottom = [0.0] * n
        bars: list[BarContainer] = []
        for s in chart.series:
            bars.append(
                ax.bar(positions, s.values, bottom=bottom, color=s.color, label=s.name, width=0.8)
            )
            bottom = [b + v for b, v in zip(bottom, s.values, strict=True)]
        if n <= MAX_LABELLED_BARS:
            ax.bar_label(
                bars[-1],
                labels=[chart.value_format.format(v) for v in chart.totals()],
                fontsize=7,
                padding=2,
            )
        every = _label_every(chart.categories)
        shown = [i for i in positions if i % every == 0 or i == n - 1]
        ax.set_xticks(shown, [chart.categories[i] for i in shown])
        ax.set_xlim(-0.6, n - 0.4)
        top = chart.y_max if chart.y_max is not None else max(max(chart.totals()), 1.0) * 1.12
        ax.set_ylim(0, top)
        fig.legend(loc="outside upper right", ncols=len(chart.series), fontsize=8, frameon=False)
    return fig


def _label_every(categories: tuple[str, ...]) -> int:
    """Label every k-th category so that the labels do not overlap (~6 pt a character)."""
    width_pt = WIDTH_IN * 72 * 0.85
    longest = max(len(c) for c in categories)
    return max(1, math.ceil(len(categories) * (longest * 6 + 8) / width_pt))


@dataclass(frozen=True)
class Line:
    name: str
    color: str
    points: tuple[tuple[float, float], ...]  # (x, y), x ascending


@dataclass(frozen=True)
class LineChart:
    """A line per series over a numeric x axis (a policy's memory by t)."""

    name: str  # the file stem
    title: str
    subtitle: str
    x_label: str
    y_label: str
    lines: tuple[Line, ...]


def line_figure(chart: LineChart) -> Figure:
    """The line chart as a matplotlib figure, styled as `figure` styles bars."""
    with matplotlib.rc_context(SVG_RC):
        fig, ax = _frame(chart)
        ax.grid(color="#e0e0e0")
        if not any(line.points for line in chart.lines):
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", color="#757575")
            ax.set_xticks([])
            return fig
        for line in chart.lines:
            xs = [x for x, _ in line.points]
            ys = [y for _, y in line.points]
            ax.plot(xs, ys, color=line.color, label=line.name, marker="o", markersize=3)
        ax.set_ylim(bottom=0)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # t is a turn number
        fig.legend(loc="outside upper right", ncols=len(chart.lines), fontsize=8, frameon=False)
    return fig


def render_svg(chart: BarChart | LineChart) -> str:
    """The chart as a standalone SVG document (deterministic bytes)."""
    fig = figure(chart) if isinstance(chart, BarChart) else line_figure(chart)
    buf = io.BytesIO()
    with matplotlib.rc_context(SVG_RC):
        fig.savefig(buf, format="svg", metadata=SVG_METADATA)
    return buf.getvalue().decode("utf-8")
