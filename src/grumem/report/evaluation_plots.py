"""The comparison's plots, from compare.json's record alone, drawn by grumem.report.plots:

- exit_timing.svg: each policy's trajectories by exit (on time, early, late, no
  evidence, no decision), stacked;
- chunks_read.svg: each policy's chunks read per trajectory, stacked under the
  chunks it left unread (the session's chunks on top), its speed-up in the subtitle;
- memory_tokens_by_t.svg: the memory's mean tokens by t, a line per policy.
"""

from __future__ import annotations

from grumem.records.compare import CompareResult
from grumem.report.plots import BarChart, Line, LineChart, Series

__all__ = ["PLOTS", "charts"]

PLOTS = ("exit_timing.svg", "chunks_read.svg", "memory_tokens_by_t.svg")

GREEN, ORANGE, RED, GREY, LIGHT, BLUE = (
    "#2e7d32",
    "#ef6c00",
    "#c62828",
    "#616161",
    "#bdbdbd",
    "#1565c0",
)
# a policy's line colour, by its place among the sorted names
PALETTE = ("#1565c0", "#c62828", "#2e7d32", "#6a1b9a", "#ef6c00", "#00838f", "#5d4037")


def _value(x: float | None) -> float:
    return 0.0 if x is None else float(x)


def exit_timing(result: CompareResult) -> BarChart:
    names = tuple(result.policies)
    exits = [result.policies[n].exit for n in names]
    kinds = (
        ("on time", GREEN, "on_time"),
        ("early", ORANGE, "early"),
        ("late", RED, "late"),
        ("no evidence", GREY, "no_evidence"),
        ("no decision", LIGHT, "no_decision"),
    )
    return BarChart(
        name="exit_timing",
        title="Exit timing",
        subtitle="trajectories by t_exit against t_last_evidence (the r_exit rules)",
        x_label="policy",
        y_label="trajectories",
        categories=names,
        series=tuple(
            Series(label, color, tuple(_value(getattr(e, field).numerator) for e in exits))
            for label, color, field in kinds
        ),
    )


def chunks_read(result: CompareResult) -> BarChart:
    names = tuple(result.policies)
    read = tuple(_value(result.policies[n].chunks_read_mean.value) for n in names)
    total = tuple(_value(result.policies[n].chunks_total_mean.value) for n in names)
    speedups = ", ".join(f"{n} {_value(result.policies[n].speedup.value):.2f}x" for n in names)
    return BarChart(
        name="chunks_read",
        title="Chunks read per trajectory",
        subtitle=f"of the session's chunks (trajectories not cut short); speed-up: {speedups}",
        x_label="policy",
        y_label="chunks per trajectory",
        categories=names,
        series=(
            Series("read", BLUE, read),
            Series("not read", LIGHT, tuple(t - r for t, r in zip(total, read, strict=True))),
        ),
        value_format="{:.2f}",
    )


def memory_by_t(result: CompareResult) -> LineChart:
    return LineChart(
        name="memory_tokens_by_t",
        title="Memory tokens by t",
        subtitle="mean tokens (cl100k) of the memory after the turn at t",
        x_label="t",
        y_label="tokens",
        lines=tuple(
            Line(
                name,
                PALETTE[i % len(PALETTE)],
                tuple(
                    (float(t), float(m.mean))
                    for t, m in sorted(p.memory_tokens_by_t.items(), key=lambda kv: int(kv[0]))
                ),
            )
            for i, (name, p) in enumerate(result.policies.items())
        ),
    )


def charts(result: CompareResult) -> tuple[BarChart | LineChart, ...]:
    """The charts of PLOTS, in order (each named as its file's stem)."""
    return exit_timing(result), chunks_read(result), memory_by_t(result)
