"""scripts/bench.py (`make bench`): the benches' last lines read, the perf line written.

The benchmarks themselves are scripts, not tests; this checks only the
aggregator's parsing and the machine-readable line's format."""

from __future__ import annotations

import math

from support.scripts import load_script

PERF = [
    "perf",
    "client_ms_per_turn",
    "efficiency",
    "prompts_ms",
    "responses_ms",
    "gates_ms",
    "log_ms",
    "replay_ms_per_turn",
    "export_turns_per_s",
    "export_rss_ratio",
]


bench = load_script("bench")


def _perf(line: str) -> list[tuple[str, float]]:
    words = line.split()
    assert words[0] == "perf"
    return [(k, float(v)) for k, _, v in (w.partition("=") for w in words[1:])]


def test_the_perf_line_has_all_nine_keys_in_order_as_floats() -> None:
    rollout = (
        "rollout client_ms_per_turn=6.01 efficiency=0.99 prompts_ms=2.14 responses_ms=4.22"
        " gates_ms=2.9 log_ms=2.27 replay_ms_per_turn=18.13"
    )
    export = "export turns_per_s=51234.5 rss_ratio=1.04"
    figures = {}
    for part, line in zip(
        bench.PARTS, [rollout, export, "  1000 transcripts: 86 jobs"], strict=True
    ):
        got = bench.part_figures(part, line)
        assert got is not None
        figures.update(got)
    pairs = _perf(bench.perf_line(figures))
    assert ["perf"] + [k for k, _ in pairs] == PERF
    assert [v for _, v in pairs] == [6.01, 0.99, 2.14, 4.22, 2.9, 2.27, 18.13, 51234.5, 1.04]


def test_a_part_without_its_line_gives_nan_for_its_keys_only() -> None:
    rollout, export, _ = bench.PARTS
    assert bench.part_figures(export, "peak RSS ratio (N vs N/10): 1.02") is None
    assert bench.part_figures(export, None) is None
    assert bench.part_figures(rollout, "rollout efficiency=0.9") is None  # keys missing
    assert bench.parse_line("export turns_per_s=fast", "export") is None
    pairs = dict(_perf(bench.perf_line({"efficiency": 0.5})))
    assert pairs["efficiency"] == 0.5
    assert all(math.isnan(v) for k, v in pairs.items() if k != "efficiency")
    assert "nan" in bench.perf_line({})


def test_bench_rollout_s_last_line_is_what_the_aggregator_reads() -> None:
    rollout = load_script("bench_rollout")
    line = rollout.summary_line({"client_ms_per_turn": 0.8, "efficiency": 0.981})
    got = bench.part_figures(bench.PARTS[0], line)
    assert got is not None and got["client_ms_per_turn"] == 0.8 and got["efficiency"] == 0.981
    assert math.isnan(got["replay_ms_per_turn"])  # --no-workflow: not measured
