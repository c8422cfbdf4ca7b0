"""Self-contained SVG bar charts, written by hand with fixed formatting, so the same
chart always gives the same bytes. Every bar is a `<rect class="bar">` carrying
`data-series`, `data-category` and `data-value`, so a test (or a person) can
read the numbers back."""

from __future__ import annotations

import math
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr


@dataclass(frozen=True)
class Series:
    name: str
    color: str
    values: tuple[float, ...]


@dataclass(frozen=True)
class BarChart:
    """Bars per category; several series stack in order, bottom first."""

    name: str  # the file stem; also prefixes element ids
    title: str
    subtitle: str
    x_label: str
    y_label: str
    categories: tuple[str, ...]
    series: tuple[Series, ...]
    tooltips: tuple[tuple[str, ...], ...]  # per series, per category
    y_max: float | None = None  # a fixed axis top (rates: 1); else from the data
    value_format: str = "{:g}"


WIDTH, HEIGHT = 760, 400
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 90, 70


def render_svg(chart: BarChart) -> str:
    """The chart as a standalone SVG document (deterministic bytes)."""
    n = len(chart.categories)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    totals = [sum(s.values[i] for s in chart.series) for i in range(n)]
    counts = chart.y_max is None
    top = chart.y_max if not counts else max(max(totals, default=0.0), 1.0)
    ticks = _ticks(top, whole=counts)
    top = ticks[-1]
    slot = plot_w / n if n else plot_w
    bar_w = min(max(1.0, slot * 0.8), 60.0)
    base = TOP + plot_h

    def y(v: float) -> float:
        return base - (v / top) * plot_h if top else base

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="DejaVu Sans, Arial, sans-serif" '
        f'font-size="12" role="img" aria-labelledby="{chart.name}-title">',
        f'<title id="{chart.name}-title">{escape(chart.title)}</title>',
        f"<desc>{escape(chart.subtitle)}</desc>",
        f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
        f'<text class="title" x="{LEFT}" y="24" font-size="16" font-weight="bold">'
        f"{escape(chart.title)}</text>",
        f'<text class="subtitle" x="{LEFT}" y="44" fill="#424242">{escape(chart.subtitle)}</text>',
        '<g class="y-axis">',
    ]
    for v in ticks:
        out.append(
            f'<line x1="{LEFT}" y1="{_f(y(v))}" x2="{WIDTH - RIGHT}" y2="{_f(y(v))}" '
            f'stroke="#e0e0e0"/>'
        )
        out.append(
            f'<text x="{LEFT - 6}" y="{_f(y(v) + 4)}" text-anchor="end">{_tick(v, top)}</text>'
        )
    out.append(
        f'<text class="axis-label" transform="translate(16 {_f(TOP + plot_h / 2)}) rotate(-90)" '
        f'text-anchor="middle">{escape(chart.y_label)}</text>'
    )
    out.append("</g>")
    out.append('<g class="bars">')
    if n == 0:
        out.append(
            f'<text class="empty" x="{_f(LEFT + plot_w / 2)}" y="{_f(TOP + plot_h / 2)}" '
            f'text-anchor="middle" fill="#757575">no data</text>'
        )
    for i, cat in enumerate(chart.categories):
        x = LEFT + i * slot + (slot - bar_w) / 2
        stacked = 0.0
        for s, tips in zip(chart.series, chart.tooltips, strict=True):
            v = s.values[i]
            y0, y1 = y(stacked), y(stacked + v)
            stacked += v
            out.append(
                f'<rect class="bar" data-series={quoteattr(s.name)} '
                f"data-category={quoteattr(cat)} "
                f'data-value="{chart.value_format.format(v)}" x="{_f(x)}" y="{_f(y1)}" '
                f'width="{_f(bar_w)}" height="{_f(y0 - y1)}" fill="{s.color}">'
                f"<title>{escape(tips[i])}</title></rect>"
            )
        if n <= 40 and slot >= 14:  # value labels only where they fit
            out.append(
                f'<text class="value" x="{_f(x + bar_w / 2)}" y="{_f(y(stacked) - 4)}" '
                f'text-anchor="middle" font-size="10">'
                f"{chart.value_format.format(stacked)}</text>"
            )
    out.append("</g>")
    out.append('<g class="x-axis">')
    out.append(f'<line x1="{LEFT}" y1="{base}" x2="{WIDTH - RIGHT}" y2="{base}" stroke="#212121"/>')
    longest = max((len(c) for c in chart.categories), default=1)
    every = max(1, math.ceil((longest * 7 + 6) / slot)) if n else 1
    for i, cat in enumerate(chart.categories):
        if i % every and i != n - 1:
            continue
        cx = LEFT + i * slot + slot / 2
        out.append(f'<text x="{_f(cx)}" y="{base + 16}" text-anchor="middle">{escape(cat)}</text>')
    out.append(
        f'<text class="axis-label" x="{_f(LEFT + plot_w / 2)}" y="{HEIGHT - 30}" '
        f'text-anchor="middle">{escape(chart.x_label)}</text>'
    )
    out.append("</g>")
    out.append('<g class="legend">')
    lx = LEFT
    for s in chart.series:
        out.append(f'<rect x="{lx}" y="54" width="10" height="10" fill="{s.color}"/>')
        out.append(f'<text x="{lx + 14}" y="63">{escape(s.name)}</text>')
        lx += 24 + 7 * len(s.name)
    out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _f(v: float) -> str:
    """Coordinates with two decimals, trailing zeros dropped: stable text."""
    s = f"{v:.2f}".rstrip("0").rstrip(".")
    return "0" if s == "-0" else s


def _ticks(top: float, whole: bool) -> list[float]:
    """0 and up to 5 round steps (1, 2, 5 x 10^k) covering `top`; whole steps for counts."""
    raw = top / 5
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    if whole:
        step = max(step, 1.0)
    count = math.ceil(top / step - 1e-9)
    return [round(k * step, 10) for k in range(count + 1)]


def _tick(v: float, top: float) -> str:
    return f"{v:g}" if top >= 5 or v == int(v) else f"{v:.2f}".rstrip("0")
