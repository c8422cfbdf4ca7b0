"""compare.md: the side-by-side tables a person pastes into a paper or a pull request,
rendered from compare.json's record alone (a pure function: the same record, the same
bytes).

Three tables: the figures (policies as columns, figures as rows, each rate with its
95% interval and the counts it is the ratio of), the memory's tokens by t, and each
pair's comparison (the two values on the keys both ran, the difference with its
paired interval, the wins per key and the verdict)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from grumem.records.compare import CompareResult, Estimate, Pair, PairFigure, PolicyFigures

__all__ = ["render_markdown"]

# rows of the figures table: (label, the estimate of a policy; None: not recorded)
ROWS: tuple[tuple[str, Callable[[PolicyFigures], Estimate | None]], ...] = (
    ("parse rate (turns)", lambda p: p.parse_rate),
    ("parse rate (asks)", lambda p: p.asks_parse_rate),
    ("update agreement (all turns)", lambda p: p.update_agreement),
    ("update agreement (parsed turns)", lambda p: p.update_agreement_parsed),
    ("update precision (yes)", lambda p: p.update_precision),
    ("update recall (yes)", lambda p: p.update_recall),
    ("exit on time", lambda p: p.exit.on_time),
    ("exit early", lambda p: p.exit.early),
    ("exit late", lambda p: p.exit.late),
    ("exit: no evidence", lambda p: p.exit.no_evidence),
    ("exit: no decision", lambda p: p.exit.no_decision),
    ("t_exit − t_last_evidence (mean)", lambda p: p.exit_offset.mean),
    ("chunks read / trajectory", lambda p: p.chunks_read_mean),
    ("session chunks / trajectory", lambda p: p.chunks_total_mean),
    ("speed-up (chunks / chunks read)", lambda p: p.speedup),
    ("latency / trajectory (s)", lambda p: p.latency_s_per_trajectory),
    ("latency / turn (s)", lambda p: p.latency_s_per_turn),
    ("completion tokens / trajectory", lambda p: p.completion_tokens_per_trajectory),
    ("prompt tokens / trajectory", lambda p: p.prompt_tokens_per_trajectory),
)
PAIR_ROWS: tuple[tuple[str, Callable[[Pair], PairFigure]], ...] = (
    ("parse rate (turns)", lambda p: p.figures.parse_rate),
    ("update agreement (all turns)", lambda p: p.figures.update_agreement),
    ("update precision (yes)", lambda p: p.figures.update_precision),
    ("update recall (yes)", lambda p: p.figures.update_recall),
    ("exit on time", lambda p: p.figures.exit_on_time),
    ("chunks read / trajectory", lambda p: p.figures.chunks_read_mean),
    ("speed-up (chunks / chunks read)", lambda p: p.figures.speedup),
    ("latency / trajectory (s)", lambda p: p.figures.latency_s_per_trajectory),
)
# memory rows: every t when there are few, else t = 1, 2, 5, 10, 20, 50, ... and the last
ALL_MEMORY_ROWS = 12


def _number(x: float | None) -> str:
    if x is None:
        return "–"
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    # three decimals (one from 100 on), trailing zeros dropped: 0.958, 5.5, 2263.2
    return (f"{x:.1f}" if abs(x) >= 100 else f"{x:.3f}").rstrip("0").rstrip(".")


def _interval(ci: Sequence[float] | None) -> str:
    return "" if ci is None else f" [{_number(ci[0])}, {_number(ci[1])}]"


def _estimate(e: Estimate | None) -> str:
    if e is None:
        return "not recorded"
    if e.value is None:
        return f"– ({_number(e.numerator)}/{_number(e.denominator)})"
    counts = f" ({_number(e.numerator)}/{_number(e.denominator)})" if e.method == "wilson" else ""
    return f"{_number(e.value)}{_interval(e.ci)}{counts}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return [line(header), "|" + "---|" * len(header), *(line(r) for r in rows)]


def _memory_ts(ts: Sequence[int]) -> list[int]:
    if len(ts) <= ALL_MEMORY_ROWS:
        return list(ts)
    marks = {m * 10**e for e in range(10) for m in (1, 2, 5)}
    return [t for t in ts if t in marks or t == ts[-1]]


def _policy_lines(result: CompareResult) -> list[str]:
    names = list(result.policies)
    out = ["## Figures", ""]
    counts = [
        ("trajectories", lambda p: str(p.trajectories)),
        ("trajectories cut short (aborted)", lambda p: str(p.aborted)),
        ("turns answered", lambda p: str(p.turns)),
        ("levels", lambda p: ", ".join(f"{n} {lv}" for lv, n in p.levels.to_dict().items() if n)),
        ("models", lambda p: ", ".join(p.models)),
    ]
    rows = [[label, *(get(result.policies[n]) for n in names)] for label, get in counts]
    rows += [[label, *(_estimate(get(result.policies[n])) for n in names)] for label, get in ROWS]
    out += _table(["figure", *(f"`{n}`" for n in names)], rows)
    out += [
        "",
        "Rates of turns, asks and trajectories: value [95% Wilson interval] (numerator/"
        "denominator); means: value [95% bootstrap interval over sessions]. Update"
        " agreement over all turns counts an unparsed turn as a disagreement. Exits follow"
        " the corpus's r_exit rules from the recorded exit gates; chunks read, speed-up,"
        " latency and tokens per trajectory leave out the trajectories cut short.",
    ]
    return out


def _memory_lines(result: CompareResult) -> list[str]:
    names = list(result.policies)
    ts = sorted({int(t) for p in result.policies.values() for t in p.memory_tokens_by_t})
    if not ts:
        return []
    rows = []
    for t in _memory_ts(ts):
        cells = [str(t)]
        for n in names:
            m = result.policies[n].memory_tokens_by_t.get(str(t))
            cells.append(
                "–" if m is None else f"{_number(m.mean)} / {_number(m.median)} ({m.turns})"
            )
        rows.append(cells)
    return [
        "",
        "## Memory tokens by t",
        "",
        *_table(["t", *(f"`{n}`" for n in names)], rows),
        "",
        "Tokens (cl100k) of the memory after the turn at t: mean / median (turns answered"
        " at t)." + ("" if len(rows) == len(ts) else " A selection of t is shown."),
    ]


def _verdict(f: PairFigure) -> str:
    if f.difference is None:
        return "undefined"
    if f.ci is None:
        return "too few groups to tell"
    verdict = f"`{f.winner}` better" if f.winner is not None else "no clear difference"
    if f.p_value is not None:
        verdict += f" (McNemar p = {_number(f.p_value)})"
    return verdict


def _pair_lines(pair: Pair) -> list[str]:
    a, b = f"`{pair.a}`", f"`{pair.b}`"
    rows = []
    for label, get in PAIR_ROWS:
        f = get(pair)
        rows.append(
            [
                f"{label} ({f.better} is better)",
                _number(f.value_a),
                _number(f.value_b),
                f"{_number(f.difference)}{_interval(f.ci)}",
                f"{f.wins_a} / {f.wins_b} / {f.ties}",
                _verdict(f),
            ]
        )
    return [
        "",
        f"### {a} vs {b}",
        "",
        f"On the {pair.keys} (query, session, sample) keys both ran, in {pair.groups}"
        f" (query, session) groups (only {a}: {pair.only_a}, only {b}: {pair.only_b}).",
        "",
        *_table(
            ["figure", a, b, f"{a} − {b} [95% CI]", f"keys won {a} / {b} / tied", "verdict"],
            rows,
        ),
    ]


def render_markdown(result: CompareResult) -> str:
    """compare.md's text."""
    s = result.settings
    lines = [
        "# Policy comparison",
        "",
        f"Labels `{s.labels}` (sha256 {s.labels_sha256[:12]}…), {s.sessions} sessions in the"
        f" chunk files; intervals at {round(s.confidence * 100)}%, bootstrap with"
        f" {s.resamples} resamples (seed {s.seed}).",
        "",
        *(f"- `{n}`: `{p.log}`" for n, p in result.policies.items()),
        "",
        *_policy_lines(result),
        *_memory_lines(result),
    ]
    if result.pairs:
        lines += [
            "",
            "## Paired comparisons",
            "",
            "Each figure over the keys both policies ran; the difference's interval is a"
            " paired bootstrap over (query, session) groups, and a difference is beyond"
            " noise when it excludes 0.",
        ]
        for pair in result.pairs:
            lines += _pair_lines(pair)
    return "\n".join(lines) + "\n"
