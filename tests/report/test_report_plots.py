"""grumem.report.plots: the numbers handed to matplotlib, and SVG bytes that do not change
from one run or process to the next."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from matplotlib.container import BarContainer

from grumem.report.plots import (
    MAX_LABELLED_BARS,
    BarChart,
    Line,
    LineChart,
    Series,
    figure,
    line_figure,
    render_svg,
)

CHART = BarChart(
    name="c",
    title="r_update per trajectory position",
    subtitle="7 turns",
    x_label="t",
    y_label="turns",
    categories=("1", "2", "3"),
    series=(Series("+1", "#2e7d32", (2.0, 0.0, 1.0)), Series("-1", "#c62828", (1.0, 3.0, 0.0))),
)

# the chart above, rendered by a process of its own
RENDER = (
    "import sys; from test_report_plots import CHART, render_svg; print(render_svg(CHART), end='')"
)


def bars(chart: BarChart) -> list[tuple[str, list[tuple[float, float]]]]:
    """Per series drawn: (label, [(bottom, height) of each bar])."""
    ax = figure(chart).axes[0]
    return [
        (c.get_label(), [(p.get_y(), p.get_height()) for p in c.patches])
        for c in ax.containers
        if isinstance(c, BarContainer)
    ]


def test_series_stack_bottom_first() -> None:
    assert bars(CHART) == [
        ("+1", [(0.0, 2.0), (0.0, 0.0), (0.0, 1.0)]),
        ("-1", [(2.0, 1.0), (0.0, 3.0), (1.0, 0.0)]),
    ]
    assert CHART.totals() == (3.0, 3.0, 1.0)


def test_axes_and_labels_are_drawn() -> None:
    fig = figure(CHART)
    ax = fig.axes[0]
    assert fig.get_suptitle() == "r_update per trajectory position"
    assert ax.get_title(loc="left") == "7 turns"
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("t", "turns")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "3"]
    labels = [t.get_text() for t in ax.texts]  # the stack totals above the bars
    assert labels == ["3", "3", "1"]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["+1", "-1"]


def test_a_fixed_top_and_many_bars() -> None:
    n = MAX_LABELLED_BARS + 60
    rates = BarChart(
        "r", "rate", "", "t", "rate", tuple(str(t) for t in range(1, n + 1)),
        (Series("rate", "#1565c0", tuple(0.5 for _ in range(n))),), y_max=1.0,
    )  # fmt: skip
    ax = figure(rates).axes[0]
    assert ax.get_ylim() == (0.0, 1.0)
    assert len(ax.texts) == 0  # no value labels where they cannot fit
    shown = [t.get_text() for t in ax.get_xticklabels()]
    assert shown[0] == "1" and shown[-1] == str(n) and len(shown) < n


def test_svg_bytes_are_the_same_in_every_process() -> None:
    outs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(Path(__file__).parent)}
        proc = subprocess.run(
            [sys.executable, "-c", RENDER], capture_output=True, env=env, check=True, timeout=120
        )
        outs.append(proc.stdout)
    assert outs[0] == outs[1] == render_svg(CHART).encode()
    assert render_svg(CHART) == render_svg(CHART)


def test_svg_has_no_date_and_draws_glyphs_as_paths() -> None:
    svg = render_svg(CHART)
    assert svg.startswith("<?xml") and "<svg" in svg
    assert "<dc:date>" not in svg  # the metadata Date would be the time of writing
    assert "<text" not in svg  # glyphs are paths: the same picture on any machine


@pytest.mark.parametrize("chart", [BarChart("e", "t", "s", "x", "y", (), ())])
def test_no_categories_says_no_data(chart: BarChart) -> None:
    fig = figure(chart)
    assert bars(chart) == []
    assert [t.get_text() for t in fig.axes[0].texts] == ["no data"]


LINES = LineChart(
    name="m",
    title="Memory tokens by t",
    subtitle="mean",
    x_label="t",
    y_label="tokens",
    lines=(
        Line("a", "#1565c0", ((1.0, 0.0), (2.0, 12.5), (3.0, 20.0))),
        Line("b", "#c62828", ((1.0, 3.0), (2.0, 3.0))),
    ),
)
RENDER_LINES = (
    "import sys; from test_report_plots import LINES, render_svg; print(render_svg(LINES), end='')"
)


def test_a_line_per_series_with_its_points() -> None:
    fig = line_figure(LINES)
    ax = fig.axes[0]
    drawn = [(line.get_label(), list(line.get_xydata().tolist())) for line in ax.get_lines()]
    assert drawn == [
        ("a", [[1.0, 0.0], [2.0, 12.5], [3.0, 20.0]]),
        ("b", [[1.0, 3.0], [2.0, 3.0]]),
    ]
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_ylim()[0]) == ("t", "tokens", 0.0)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["a", "b"]
    empty = LineChart("e", "t", "s", "x", "y", (Line("a", "#000000", ()),))
    assert [t.get_text() for t in line_figure(empty).axes[0].texts] == ["no data"]


def test_line_svg_bytes_are_the_same_in_every_process() -> None:
    outs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(Path(__file__).parent)}
        proc = subprocess.run(
            [sys.executable, "-c", RENDER_LINES],
            capture_output=True,
            env=env,
            check=True,
            timeout=120,
        )
        outs.append(proc.stdout)
    assert outs[0] == outs[1] == render_svg(LINES).encode()
    assert "<dc:date>" not in outs[0].decode() and "<text" not in outs[0].decode()
