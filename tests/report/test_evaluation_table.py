"""grumem.report.evaluation_table: compare.md rendered from compare.json's record, held
to the golden file the three scripted policies make (tests/stages); how a figure
nothing defines, a usage not recorded and a long memory table are shown."""

from __future__ import annotations

import msgspec

from grumem.records.compare import CompareResult, MemoryAtT
from grumem.report.evaluation_table import render_markdown
from support.checkout import FIXTURES_DIR

EXPECTED = FIXTURES_DIR / "expected"
GOLDEN = CompareResult.decode((EXPECTED / "compare.json").read_bytes())


def test_the_golden_record_renders_the_golden_table() -> None:
    assert render_markdown(GOLDEN).encode() == (EXPECTED / "compare.md").read_bytes()
    assert render_markdown(GOLDEN) == render_markdown(GOLDEN)


def rows(text: str, first_cell: str) -> list[list[str]]:
    return [
        [c.strip() for c in line.strip("|").split(" | ")]
        for line in text.splitlines()
        if line.startswith(f"| {first_cell}")
    ]


def test_rates_show_their_interval_and_counts_means_their_interval() -> None:
    text = render_markdown(GOLDEN)
    (agreement,) = rows(text, "update agreement (all turns) |")
    # continue, end-at-1, follow-labels: 22 of 26, 5 of 6, 16 of 16
    assert agreement[1:] == [
        "0.846 [0.665, 0.939] (22/26)",
        "0.833 [0.436, 0.97] (5/6)",
        "1 [0.806, 1] (16/16)",
    ]
    (speedup,) = rows(text, "speed-up (chunks / chunks read) |")
    assert speedup[1:] == ["1 [1, 1]", "4.333 [2, 7]", "1.625 [1, 2.333]"]
    (precision,) = rows(text, "update precision (yes) |")
    assert precision[1:3] == ["– (0/0)", "– (0/0)"]  # no `yes` said: nothing to be precise on
    (tokens,) = rows(text, "completion tokens")
    assert tokens[1] == "not recorded"  # `continue`'s bodies hold no usage


def test_a_pair_says_which_is_better_only_beyond_noise() -> None:
    text = render_markdown(GOLDEN)
    chunks = rows(text, "chunks read / trajectory (lower is better)")
    assert [r[-1] for r in chunks] == [
        "`end-at-1` better",
        "no clear difference",
        "`end-at-1` better",
    ]
    on_time = rows(text, "exit on time (higher is better)")
    assert on_time[1][-1] == "no clear difference (McNemar p = 0.25)"


def test_a_long_memory_table_shows_a_selection_of_t() -> None:
    policy = next(iter(GOLDEN.policies.values()))
    memory = {str(t): MemoryAtT(turns=1, mean=t, median=t, max=t) for t in range(1, 31)}
    long = msgspec.structs.replace(
        GOLDEN,
        policies={"only": msgspec.structs.replace(policy, memory_tokens_by_t=memory)},
        pairs=[],
    )
    text = render_markdown(long)
    table = text.split("## Memory tokens by t")[1].split("\n\n")[1]
    shown = [line.split(" | ")[0].strip("| ") for line in table.splitlines()[2:]]
    assert shown == ["1", "2", "5", "10", "20", "30"]  # 1-2-5 and the last
    assert "| 20 | 20 / 20 (1) |" in table
    assert "A selection of t is shown." in text
    assert "## Paired comparisons" not in text
