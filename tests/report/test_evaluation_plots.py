"""grumem.report.evaluation_plots: the numbers each chart of a comparison draws, from the
golden compare.json of the three scripted policies (continue, end-at-1, follow-labels)."""

from __future__ import annotations

from grumem.records.compare import CompareResult
from grumem.report.evaluation_plots import PLOTS, charts, chunks_read, exit_timing, memory_by_t
from grumem.report.plots import render_svg
from support.checkout import FIXTURES_DIR

GOLDEN = CompareResult.decode((FIXTURES_DIR / "expected" / "compare.json").read_bytes())


def test_exit_timing_stacks_the_trajectories_by_exit() -> None:
    chart = exit_timing(GOLDEN)
    assert chart.categories == ("continue", "end-at-1", "follow-labels")
    assert {s.name: s.values for s in chart.series} == {
        "on time": (0.0, 1.0, 3.0),
        "early": (0.0, 2.0, 0.0),
        "late": (3.0, 0.0, 0.0),
        "no evidence": (3.0, 3.0, 3.0),
        "no decision": (0.0, 0.0, 0.0),
    }
    assert chart.totals() == (6.0, 6.0, 6.0)


def test_chunks_read_stand_under_the_chunks_left_unread() -> None:
    chart = chunks_read(GOLDEN)
    read, unread = chart.series
    assert read.values == (round(26 / 6, 6), 1.0, round(16 / 6, 6))
    assert chart.totals() == tuple(round(26 / 6, 6) for _ in range(3))
    assert "speed-up: continue 1.00x, end-at-1 4.33x, follow-labels 1.62x" in chart.subtitle


def test_memory_by_t_draws_a_line_per_policy() -> None:
    chart = memory_by_t(GOLDEN)
    assert [line.name for line in chart.lines] == ["continue", "end-at-1", "follow-labels"]
    continues, once, follow = chart.lines
    assert [x for x, _ in continues.points] == [1, 2, 3, 4, 5, 6, 7]
    assert once.points == ((1.0, 0.0),)
    expected = GOLDEN.policies["follow-labels"].memory_tokens_by_t
    assert follow.points == tuple((float(t), float(m.mean)) for t, m in expected.items())
    assert len({line.color for line in chart.lines}) == 3


def test_every_plot_is_named_as_its_file_and_renders() -> None:
    drawn = charts(GOLDEN)
    assert tuple(f"{c.name}.svg" for c in drawn) == PLOTS
    for chart in drawn:
        svg = render_svg(chart)
        assert svg.startswith("<?xml") and "<dc:date>" not in svg
