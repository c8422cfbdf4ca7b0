"""The corpus plots computed: what is counted from the log and the trajectories, and the
bar charts of those counts (grumem.report.plots draws them).

Four plots per project, each a file named in PLOTS:

- r_update per trajectory position t (corpus trajectories: +1 and -1 stacked),
- t_last_evidence histogram (corpus trajectories; "none" = no evidence),
- parse rate per turn index t (log: answered turns whose last ask parsed),
- latency distribution (log: the recorded latency of each answered turn's
  last HTTP attempt, in 1-2-5 bins from 1 ms to 1000 s).

A tally takes one line at a time: what it keeps grows with the longest
trajectory, never with the corpus.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from grumem.report.plots import BarChart, Series

PLOTS = ("r_update_by_t.svg", "t_last_evidence.svg", "parse_rate_by_t.svg", "latency.svg")

# latency bin edges in seconds: 1, 2, 5 per decade from 1 ms to 1000 s
LATENCY_EDGES = tuple(m * 10.0**e for e in range(-3, 3) for m in (1, 2, 5)) + (1000.0,)

GREEN, RED, BLUE, GREY = "#2e7d32", "#c62828", "#1565c0", "#616161"


@dataclass
class LogTally:
    """What the log-based plots need: per t, and the latency histogram."""

    answered: Counter[int] = field(default_factory=Counter)  # t -> turns with a response
    parsed: Counter[int] = field(default_factory=Counter)  # t -> of those, parsed
    aborted: int = 0
    latency_bins: Counter[int] = field(default_factory=Counter)  # bin index -> turns
    latency_n: int = 0
    latency_sum: float = 0.0
    latency_max: float = 0.0

    def add(self, line: Mapping[str, Any]) -> None:
        if line["status"] == "aborted":
            self.aborted += 1
            return
        t = line["t"]
        self.answered[t] += 1
        self.parsed[t] += bool(line["parsed"])
        latency = line["response"]["latency_s"]
        self.latency_bins[latency_bin(latency)] += 1
        self.latency_n += 1
        self.latency_sum += latency
        self.latency_max = max(self.latency_max, latency)


@dataclass
class CorpusTally:
    """What the corpus plots need: r_update per t and t_last_evidence per trajectory."""

    positive: Counter[int] = field(default_factory=Counter)  # t -> turns with r_update +1
    negative: Counter[int] = field(default_factory=Counter)  # t -> turns with r_update -1
    last_evidence: Counter[int | None] = field(default_factory=Counter)
    trajectories: int = 0

    def add(self, traj: Mapping[str, Any]) -> None:
        self.trajectories += 1
        self.last_evidence[traj["t_last_evidence"]] += 1
        for turn in traj["turns"]:
            (self.positive if turn["r_update"] == 1 else self.negative)[turn["t"]] += 1


def latency_bin(seconds: float) -> int:
    """Index of the bin holding `seconds`: 0 is below 1 ms, len(LATENCY_EDGES) from 1000 s."""
    i = 0
    while i < len(LATENCY_EDGES) and seconds >= LATENCY_EDGES[i]:
        i += 1
    return i


def latency_bin_label(i: int) -> tuple[str, str]:
    """(axis label, full range) of a latency bin."""
    if i == 0:
        return f"<{seconds_label(LATENCY_EDGES[0])}", f"below {seconds_label(LATENCY_EDGES[0])}"
    if i == len(LATENCY_EDGES):
        last = seconds_label(LATENCY_EDGES[-1])
        return f"≥{last}", f"{last} or more"
    low, high = seconds_label(LATENCY_EDGES[i - 1]), seconds_label(LATENCY_EDGES[i])
    return low, f"[{low}, {high})"


def seconds_label(s: float) -> str:
    return f"{round(s * 1000)}ms" if s < 1 else f"{round(s)}s"


def r_update_chart(c: CorpusTally) -> BarChart:
    ts = _span(set(c.positive) | set(c.negative), start=1)
    pos = tuple(float(c.positive[t]) for t in ts)
    neg = tuple(float(c.negative[t]) for t in ts)
    total_pos, total_neg = sum(c.positive.values()), sum(c.negative.values())
    n = total_pos + total_neg
    return BarChart(
        name="r_update_by_t",
        title="r_update per trajectory position",
        subtitle=(
            f"{n} turns in {c.trajectories} trajectories: +1 {total_pos} ({_pct(total_pos, n)}), "
            f"-1 {total_neg} ({_pct(total_neg, n)})"
        ),
        x_label="t (turn of the trajectory)",
        y_label="turns",
        categories=tuple(str(t) for t in ts),
        series=(Series("r_update +1", GREEN, pos), Series("r_update -1", RED, neg)),
    )


def t_last_evidence_chart(c: CorpusTally) -> BarChart:
    ts = _span({t for t in c.last_evidence if t is not None}, start=1)
    none = c.last_evidence[None]
    cats = tuple(str(t) for t in ts) + ("none",)
    values = tuple(float(c.last_evidence[t]) for t in ts) + (float(none),)
    return BarChart(
        name="t_last_evidence",
        title="t_last_evidence: the last turn holding evidence",
        subtitle=(
            f"{c.trajectories} trajectories; {none} with no evidence "
            "(none: r_exit is null for them)"
        ),
        x_label="t_last_evidence",
        y_label="trajectories",
        categories=cats,
        series=(Series("trajectories", BLUE, values),),
    )


def parse_rate_chart(g: LogTally) -> BarChart:
    ts = _span(set(g.answered), start=1)
    rates = tuple(g.parsed[t] / g.answered[t] if g.answered[t] else 0.0 for t in ts)
    answered, parsed = sum(g.answered.values()), sum(g.parsed.values())
    return BarChart(
        name="parse_rate_by_t",
        title="Parse rate per turn index",
        subtitle=(
            f"{parsed} of {answered} answered turns parsed ({_pct(parsed, answered)}); "
            f"{g.aborted} aborted turns not counted"
        ),
        x_label="t (turn of the trajectory)",
        y_label="parsed / answered",
        categories=tuple(str(t) for t in ts),
        series=(Series("parse rate", BLUE, rates),),
        y_max=1.0,
        value_format="{:.2f}",
    )


def latency_chart(g: LogTally) -> BarChart:
    bins = _span(set(g.latency_bins))
    labels = [latency_bin_label(i) for i in bins]
    mean = g.latency_sum / g.latency_n if g.latency_n else 0.0
    return BarChart(
        name="latency",
        title="Latency of the answered turns",
        subtitle=(
            f"{g.latency_n} turns, mean {mean:.3f} s, max {g.latency_max:.3f} s "
            "(the last HTTP attempt of each turn, as recorded)"
        ),
        x_label="latency (bins from their lower edge, 1-2-5 per decade)",
        y_label="turns",
        categories=tuple(axis for axis, _ in labels),
        series=(Series("turns", GREY, tuple(float(g.latency_bins[i]) for i in bins)),),
    )


def _span(keys: set[int], start: int | None = None) -> list[int]:
    """From `start` (else the smallest key) to the largest key, gaps included: an
    empty t is a zero bar, not a missing one."""
    if not keys:
        return []
    return list(range(min(keys) if start is None else start, max(keys) + 1))


def _pct(k: int, n: int) -> str:
    return f"{100 * k / n:.1f}%" if n else "-"


def corpus_charts(corpus: CorpusTally, turns: LogTally) -> list[BarChart]:
    """The four charts, in PLOTS order."""
    return [
        r_update_chart(corpus),
        t_last_evidence_chart(corpus),
        parse_rate_chart(turns),
        latency_chart(turns),
    ]
