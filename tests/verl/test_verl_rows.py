"""grumem.verl without verl: the sessions row read back as its record
(grumem.verl.rollout), the GRU-Mem turn order run over it as the agent loop runs it
(grumem.core.turn_loop over grumem.core.rollout_row.row_turns) and the group step
(grumem.verl.group_step). What verl does with them is tests/verl/test_verl_online.py's."""

from __future__ import annotations

import math
from collections import Counter

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grumem.config.settings import load_queries
from grumem.core.json_text import sha256_text
from grumem.core.loop import user_message
from grumem.core.rollout_row import rollout_row, row_turns
from grumem.core.template import Budget
from grumem.core.turn_loop import Abort, Ask, TurnLoop, check_turn_budget
from grumem.errors import BudgetError, GrumemError, RolloutRowError
from grumem.io.chunk_files import iter_sessions
from grumem.io.jsonl import validate
from grumem.io.labels import load_labels
from grumem.io.template_files import GRU_MEM_TEMPLATE, load_prompt_builder
from grumem.io.tokenizer import cl100k_tokens
from grumem.records.prompt import PromptRecord
from grumem.records.rollout_row import RolloutRow
from grumem.stages.prompts import plan
from grumem.verl.group_step import group_step, step_metrics, turn_fields
from grumem.verl.rollout import RolloutTurn, read_rollout_row, rollout_builder, rollout_rules
from support.rollout_rows import DEMO, demo_rollout_rows

TOKENS = cl100k_tokens()

EPS = 1e-6


def gate(check: bool, memory: str = "m", end: bool = False) -> str:
    return (
        f"<think>t</think>\n<check>{'yes' if check else 'no'}</check>\n<update>{memory}</update>\n"
        f"<next>{'end' if end else 'continue'}</next>"
    )


def row_of(session: str, query_id: str = "errors-and-fixes", **kwargs) -> dict:
    (row,) = [
        r
        for r in demo_rollout_rows(**kwargs)
        if (r["extra_info"]["query_id"], r["extra_info"]["session"]) == (query_id, session)
    ]
    return row


def turn_loop(row: RolloutRow) -> TurnLoop:
    """The loop over `row`, as the agent loop makes it."""
    builder = rollout_builder(row, GRU_MEM_TEMPLATE, TOKENS)
    return TurnLoop(row_turns(row, builder), rollout_rules(row, TOKENS))


def rollout(row: RolloutRow, texts: list[str]) -> list[RolloutTurn]:
    """A rollout of `row` answered from `texts`, as the agent loop answers the loop: it
    ends where the loop does, or where the texts do."""
    loop, turns = turn_loop(row), []
    for text in texts:
        step = next(loop, None)
        if step is None:
            break
        assert isinstance(step, Ask), step
        turns.append(RolloutTurn.of(loop.answer(text), TOKENS))
    return turns


# ------------------------------------------------------------------ the row


def test_demo_rows_carry_the_chunks_as_the_prompts_stage_renders_them() -> None:
    rows = demo_rollout_rows()
    assert len(rows) == 10  # 2 queries x 5 sessions
    labels = load_labels(DEMO / "labels.jsonl")
    sessions = dict(iter_sessions([DEMO / "chunks"]))
    for i, row in enumerate(rows):
        validate(row, "rollout-row")
        info = row["extra_info"]
        assert info["index"] == i and row["agent_name"] == "grumem"
        chunks = sessions[info["session"]]
        assert [c["text"] for c in info["chunks"]] == [c.text for c in chunks]
        assert [c["chunk_sha"] for c in info["chunks"]] == [c.sha for c in chunks]
        want = [labels.get(info["query_id"], c.sha) for c in chunks]
        assert row["reward_model"]["ground_truth"] == ["yes" if v else "no" for v in want]
        evidence = [t for t, v in enumerate(want, start=1) if v]
        assert info["t_last_evidence"] == (max(evidence) if evidence else None)
        assert row["prompt"] == [{"role": "user", "content": info["question"]}]


def test_a_chunk_without_a_label_is_refused_naming_it() -> None:
    (query,) = [q for q in load_queries(DEMO / "queries.yaml") if q["id"] == "environment"]
    chunks = [(text, sha256_text(text)) for text in ("some text", "more")]
    first = chunks[0][1]
    with pytest.raises(RolloutRowError, match=rf"chunk t=2 \({chunks[1][1][:12]}…\) has no label"):
        rollout_row(
            0,
            "p",
            query,
            "s",
            chunks,
            lambda q, sha: True if sha == first else None,
            level="L1",
            budget=Budget(),
            template_sha256="0" * 64,
            split="train",
        )


def test_a_row_as_verl_hands_it_over_reads_back() -> None:
    row = row_of("demo-02-slugify-unicode")
    got = read_rollout_row(row)
    info = got.extra_info
    assert (info.session, info.level, len(got.chunks), info.t_last_evidence) == (
        "demo-02-slugify-unicode",
        "L1",
        5,
        row["extra_info"]["t_last_evidence"],
    )
    # verl's batches hold numpy arrays and scalars; its loop call drops agent_name
    info = dict(row["extra_info"])
    info["chunks"] = np.array(info["chunks"], dtype=object)
    info["index"] = np.int64(info["index"])
    columns = {k: v for k, v in row.items() if k != "agent_name"}
    columns["extra_info"] = info
    columns["reward_model"] = {
        "style": "rule",
        "ground_truth": np.array(row["reward_model"]["ground_truth"], dtype=object),
    }
    assert read_rollout_row(columns) == got


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r["extra_info"]["chunks"][1].update(text="edited"), "chunks.1.chunk_sha is not"),
        (lambda r: r["extra_info"].update(t_last_evidence=1), "t_last_evidence is 1, the labels"),
        (lambda r: r["reward_model"]["ground_truth"].pop(), "has 4 labels for 5 chunks"),
        (lambda r: r["extra_info"].update(index=2.0), "index"),
        (lambda r: r["extra_info"].update(level="L3"), "level"),
        (lambda r: r["extra_info"].pop("budget"), "budget"),
    ],
)
def test_a_row_that_is_not_an_exported_row_is_refused_naming_the_field(change, message) -> None:
    row = row_of("demo-02-slugify-unicode")
    change(row)
    with pytest.raises(RolloutRowError, match=message):
        read_rollout_row(row)


# ----------------------------------------------------------------- one turn


def test_every_turn_prompt_is_the_responses_stage_user_message() -> None:
    """Each turn of a row is the prompts stage's record of it (the same split around
    the memory slot, the same counts), and the loop over a row asks the user message
    the responses stage sends, for the first memory and a written one."""
    queries = load_queries(DEMO / "queries.yaml")
    builder = load_prompt_builder()
    records = [
        PromptRecord.convert(r) for r in plan("demo", [DEMO / "chunks"], queries, builder, 1)
    ]
    assert len(records) == 72
    memory = "the agent fixed it with `--legacy-peer-deps` {chunk} é"
    for row in map(read_rollout_row, demo_rollout_rows()):
        info = row.extra_info
        mine = [r for r in records if (r.query_id, r.session) == (info.query_id, info.session)]
        turns = list(row_turns(row, rollout_builder(row, GRU_MEM_TEMPLATE, TOKENS)))
        assert [(t.chunk_sha, t.prefix, t.suffix, t.tokens) for t in turns] == [
            (r.chunk_sha, r.prefix, r.suffix, r.tokens) for r in mine
        ]
        loop = turn_loop(row)
        for record, step in zip(mine, loop, strict=True):
            assert isinstance(step, Ask)
            want = user_message(record, None if record.t == 1 else memory)
            assert step.messages == [{"role": "user", "content": want}]
            loop.answer(gate(True, memory))


def test_a_turn_over_budget_is_an_abort_naming_the_component() -> None:
    """The agent loop raises it as a TurnBudgetError naming the row and the turn."""
    row = read_rollout_row(row_of("demo-05-ci-postgres", budget=Budget(section=40)))
    step = next(turn_loop(row))
    assert isinstance(step, Abort) and (step.prompt.t, step.reason) == (1, "budget")
    assert step.component == "section"
    assert step.detail.startswith("over budget: section is ")
    assert step.detail.endswith(" tokens, limit 40")
    row = read_rollout_row(row_of("demo-05-ci-postgres"))
    turn = next(row_turns(row, rollout_builder(row, GRU_MEM_TEMPLATE, TOKENS)))
    memory = "word " * 1100
    with pytest.raises(BudgetError) as e:
        check_turn_budget(rollout_rules(row, TOKENS), turn, user_message(turn, memory), memory)
    assert e.value.component == "memory"


def test_a_template_other_than_the_rows_is_refused(tmp_path) -> None:
    row = read_rollout_row(row_of("demo-05-ci-postgres"))
    other = tmp_path / "t.txt"
    other.write_text("<problem> {prompt} </problem> {memory} {chunk}", encoding="utf-8")
    with pytest.raises(GrumemError, match="exported with template sha256"):
        rollout_builder(row, other, TOKENS)


def test_an_answer_moves_the_memory_by_the_loop_rules() -> None:
    row = read_rollout_row(row_of("demo-02-slugify-unicode", level="L2"))  # 5 chunks
    loop = turn_loop(row)
    assert isinstance(next(loop), Ask)
    kept = loop.answer(gate(True, "  verbatim  text  "))
    assert kept.memory_after == "verbatim  text"  # trimmed, else kept
    step = next(loop)
    assert isinstance(step, Ask) and step.memory_before == "verbatim  text"
    assert loop.answer(gate(False, "other")).memory_after == "verbatim  text"
    next(loop)
    unparsed = loop.answer("<check>yes</check> no think block")
    assert (unparsed.memory_after, unparsed.gate.parsed) == ("verbatim  text", False)
    assert RolloutTurn.of(unparsed, TOKENS).parse_error == "think"
    # L2 obeys a parsed end; L1 records it and reads on
    assert len(rollout(row, [gate(False, end=True)] * 5)) == 1
    l1 = read_rollout_row(row_of("demo-02-slugify-unicode", level="L1"))
    turns = rollout(l1, [gate(False, end=True)] * 5)
    assert len(turns) == 5 and all(t.exit_gate for t in turns)


def test_an_over_long_candidate_is_its_turns_format_failure() -> None:
    row = read_rollout_row(row_of("demo-03-npm-peer-deps", budget=Budget(memory=8)))
    long = "one two three four five six seven eight nine"
    first, second = rollout(row, [gate(True, "M"), gate(True, long)])
    assert (second.parsed, second.parse_error, second.memory_tokens) == (False, "update", 1)
    assert first.memory_tokens == 1  # "M": the memory stays M_(t-1)


# ------------------------------------------------------------ the group step


def paper_advantages(
    rollouts: list[list[dict]], labels: list[bool], alpha: float
) -> list[list[float]]:
    """Eq. 12-13 written out here: R_i = mean r_update + r_exit (when a value) + r_format,
    normalised by the group's population std + ε; r_update by the turns at the same t;
    a term without variance is 0."""

    def norm(values: list[float]) -> list[float]:
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
        if len(values) < 2 or min(values) == max(values):
            return [0.0] * len(values)
        return [(v - mean) / (std + EPS) for v in values]

    last = max((t for t, v in enumerate(labels, start=1) if v), default=None)
    returns, updates = [], []
    for turns in rollouts:
        r_update = [
            1 if t["update_gate"] is not None and t["update_gate"] == labels[t["t"] - 1] else -1
            for t in turns
        ]
        updates.append(r_update)
        exits = [t["t"] for t in turns if t["exit_gate"] is True]
        if any(t["parsed"] for t in turns) or exits:
            t_exit = exits[0] if exits else turns[-1]["t"]
            r_exit = (
                None
                if last is None
                else (0.0 if t_exit == last else -0.75 if t_exit < last else -0.5)
            )
        else:
            r_exit = None
        r_format = 1 if all(t["parsed"] for t in turns) else 0
        returns.append(sum(r_update) / len(r_update) + (r_exit or 0.0) + r_format)
    traj = norm(returns)
    at_t: dict[int, list[int]] = {}
    for i, turns in enumerate(rollouts):
        for j, t in enumerate(turns):
            at_t.setdefault(t["t"], []).append((i, j))
    turn_adv: dict[tuple[int, int], float] = {}
    for members in at_t.values():
        for (i, j), v in zip(members, norm([updates[i][j] for i, j in members]), strict=True):
            turn_adv[i, j] = v
    return [
        [alpha * traj[i] + (1 - alpha) * turn_adv[i, j] for j in range(len(ts))]
        for i, ts in enumerate(rollouts)
    ]


TURN = st.tuples(st.sampled_from([None, True, False]), st.booleans())  # (update gate, end)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(TURN, min_size=3, max_size=3), min_size=2, max_size=4),
    st.sampled_from(["L1", "L2"]),
    st.sampled_from([0.0, 0.5, 0.9, 1.0]),
)
def test_the_group_step_is_the_papers_advantage_with_no_variance_as_zero(
    answers, level, alpha
) -> None:
    row = read_rollout_row(row_of("demo-03-npm-peer-deps", "environment", level=level))
    info = msgspec.structs.replace(row.extra_info, alpha=alpha)
    row = msgspec.structs.replace(row, extra_info=info)
    rollouts = [
        rollout(row, ["garbled" if u is None else gate(u, "m", end) for u, end in script])
        for script in answers
    ]
    values = group_step(row, rollouts)
    labels = [c.evidence for c in row.chunks]
    want = paper_advantages([[t.fields() for t in r] for r in rollouts], labels, alpha)
    got = [[t.advantage for t in r.turns] for r in values.rollouts]
    assert got == [[pytest.approx(v, abs=1e-9) for v in w] for w in want]
    returns = [r.ret for r in values.rollouts]
    assert values.zero_variance == (min(returns) == max(returns))


def test_step_metrics_count_turns_rollouts_and_zero_variance_groups() -> None:
    row = read_rollout_row(row_of("demo-03-npm-peer-deps"))  # every chunk is evidence
    keys, fields = [], []
    for uid, scripts in (
        (
            "a",
            [
                [gate(True), "garbled", gate(True, end=True)],
                [gate(False), gate(False), gate(False)],
            ],
        ),
        ("b", [[gate(True)] * 3, [gate(True)] * 3]),
    ):
        rollouts, turns = [rollout(row, script) for script in scripts], []
        values = group_step(row, rollouts)
        for s, (turns_of, rv) in enumerate(zip(rollouts, values.rollouts, strict=True)):
            for i, (f, tv) in enumerate(zip(turns_of, rv.turns, strict=True)):
                keys.append(f"{uid}_{s}_{i}")
                turns.append(turn_fields(f, rv, tv, values))
        fields += turns
    m = step_metrics(zip(keys, fields, strict=True), "training")
    assert m["training/grumem/turns/total"] == 12
    assert m["training/grumem/parse_rate/mean"] == pytest.approx(11 / 12)
    assert m["training/grumem/update_agreement/mean"] == pytest.approx(8 / 12)
    assert (m["training/grumem/groups/total"], m["training/grumem/groups/zero_variance_total"]) == (
        2,
        1,
    )
    # exits: a/0 ends at t=3 on time; a/1 and b's run out at t=3 = the last evidence
    assert m["training/grumem/exit/on_time_rate"] == 1.0
    assert Counter(f["exit"] for f in fields if f["last"]) == Counter({"on_time": 4})
    assert all(f["advantage"] == 0.0 for f in fields[6:])
