"""grumem.report.corpus_charts: the latency bins, and a chart with no data."""

from __future__ import annotations

from grumem.report.corpus_charts import (
    LATENCY_EDGES,
    LogTally,
    latency_bin,
    latency_bin_label,
    latency_chart,
)
from grumem.report.plots import figure, render_svg


def test_latency_bins_are_half_open() -> None:
    assert latency_bin(0.0) == 0
    assert latency_bin(0.000999) == 0
    assert latency_bin(0.001) == 1  # [1ms, 2ms)
    assert latency_bin(0.0019999) == 1
    assert latency_bin(0.002) == 2
    assert latency_bin(999.9) == len(LATENCY_EDGES) - 1
    assert latency_bin(1000.0) == len(LATENCY_EDGES)
    assert latency_bin_label(1) == ("1ms", "[1ms, 2ms)")
    assert latency_bin_label(LATENCY_EDGES.index(1.0) + 1) == ("1s", "[1s, 2s)")


def test_an_empty_log_plots_no_bars() -> None:
    chart = latency_chart(LogTally())
    assert chart.categories == () and all(s.values == () for s in chart.series)
    ax = figure(chart).axes[0]
    assert [p for c in ax.containers for p in c.patches] == []
    assert "no data" in render_svg(chart)
