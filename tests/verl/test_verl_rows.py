"""grumem.verl without verl: the sessions row (schema session-row), one turn's rules
(grumem.verl.rollout) and the group step (grumem.verl.group_step). What verl does
with them is tests/test_verl_online.py's."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grumem.config.settings import load_queries
from grumem.core.json_text import sha256_text
from grumem.core.loop import user_message
from grumem.core.rollout_row import rollout_row
from grumem.core.template import Budget
from grumem.errors import GrumemError, RolloutRowError
from grumem.io.chunk_files import iter_sessions
from grumem.io.jsonl import validate
from grumem.io.labels import load_labels
from grumem.io.template_files import load_prompt_builder
from grumem.io.tokenizer import cl100k_tokens
from grumem.stages.prompts import plan
from grumem.verl.group_step import group_step, step_metrics, turn_fields
from grumem.verl.rollout import (
    TurnBudgetError,
    answer_turn,
    prompt_builder,
    turn_prompt,
)
from grumem.verl.session_row import read_session_row
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
        )


def test_a_row_as_verl_hands_it_over_reads_back() -> None:
    row = row_of("demo-02-slugify-unicode")
    got = read_session_row(row)
    assert (got.session, got.level, len(got.chunks), got.t_last_evidence) == (
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
    assert read_session_row(columns) == got


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
        read_session_row(row)


# ----------------------------------------------------------------- one turn


def test_every_turn_prompt_is_the_responses_stage_user_message() -> None:
    """The prompts stage's records filled by the responses stage's user_message, for
    the first memory and a written one, against the agent loop's."""
    queries = load_queries(DEMO / "queries.yaml")
    builder = load_prompt_builder()
    records = list(plan("demo", [DEMO / "chunks"], queries, builder, 1))
    rows = {
        (r["extra_info"]["query_id"], r["extra_info"]["session"]): read_session_row(r)
        for r in demo_rollout_rows()
    }
    assert len(records) == 72
    for record in records:
        row = rows[record.query_id, record.session]
        chunk = row.chunks[record.t - 1]
        assert chunk.chunk_sha == record.chunk_sha
        for memory in (None, "the agent fixed it with `--legacy-peer-deps` {chunk} é"):
            got = turn_prompt(prompt_builder(row), row, chunk, memory).messages
            assert got == [{"role": "user", "content": user_message(record, memory)}]


def test_a_turn_over_budget_is_an_error_naming_the_component() -> None:
    row = read_session_row(row_of("demo-05-ci-postgres", budget=Budget(section=40)))
    with pytest.raises(
        TurnBudgetError, match=r"turn t=1: over budget: section is \d+ tokens, limit 40"
    ):
        turn_prompt(prompt_builder(row), row, row.chunks[0], None)
    row = read_session_row(row_of("demo-05-ci-postgres"))
    memory = "word " * 1100
    with pytest.raises(TurnBudgetError) as e:
        turn_prompt(prompt_builder(row), row, row.chunks[0], memory)
    assert e.value.component == "memory"


def test_a_template_other_than_the_rows_is_refused(tmp_path) -> None:
    row = read_session_row(row_of("demo-05-ci-postgres"))
    other = tmp_path / "t.txt"
    other.write_text("<problem> {prompt} </problem> {memory} {chunk}", encoding="utf-8")
    with pytest.raises(GrumemError, match="exported with template sha256"):
        prompt_builder(row, other)


def test_an_answer_moves_the_memory_by_the_loop_rules() -> None:
    row = read_session_row(row_of("demo-03-npm-peer-deps", level="L2"))
    c1, c2, c3 = row.chunks
    kept = answer_turn(row, c1, None, gate(True, "  verbatim  text  "), TOKENS)
    assert (kept.memory_after, kept.stops) == ("verbatim  text", False)  # trimmed, else kept
    assert answer_turn(row, c2, "M", gate(False, "other"), TOKENS).memory_after == "M"
    unparsed = answer_turn(row, c2, "M", "<check>yes</check> no think block", TOKENS)
    assert (unparsed.memory_after, unparsed.gate["parsed"]) == ("M", False)
    assert unparsed.fields()["parse_error"] == "think"
    assert answer_turn(row, c3, "M", gate(False, end=True), TOKENS).stops  # L2 obeys a parsed end
    l1 = read_session_row(row_of("demo-03-npm-peer-deps", level="L1"))
    assert not answer_turn(l1, c3, "M", gate(False, end=True), TOKENS).stops  # L1 records it


def test_an_over_long_candidate_is_its_turns_format_failure() -> None:
    row = read_session_row(row_of("demo-03-npm-peer-deps", budget=Budget(memory=8)))
    turn = answer_turn(
        row, row.chunks[0], "M", gate(True, "one two three four five six seven eight nine"), TOKENS
    )
    assert (turn.gate["parsed"], turn.memory_after) == (False, "M")
    assert turn.fields()["parse_error"] == "update"


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
    row = read_session_row(row_of("demo-03-npm-peer-deps", "environment", level=level))
    row = dataclasses.replace(row, alpha=alpha)
    rollouts = []
    for script in answers:
        turns, memory = [], None
        for chunk, (update, end) in zip(row.chunks, script, strict=True):
            text = "garbled" if update is None else gate(update, "m", end)
            turn = answer_turn(row, chunk, memory, text, TOKENS)
            turns.append(turn.fields())
            memory = turn.memory_after
            if turn.stops:
                break
        rollouts.append(turns)
    values = group_step(row, rollouts)
    labels = [c.evidence for c in row.chunks]
    want = paper_advantages(rollouts, labels, alpha)
    got = [[t.advantage for t in r.turns] for r in values.rollouts]
    assert got == [[pytest.approx(v, abs=1e-9) for v in w] for w in want]
    returns = [r.ret for r in values.rollouts]
    assert values.zero_variance == (min(returns) == max(returns))


def test_step_metrics_count_turns_rollouts_and_zero_variance_groups() -> None:
    row = read_session_row(row_of("demo-03-npm-peer-deps"))  # every chunk is evidence
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
        rollouts, turns = [], []
        for script in scripts:
            rollout, memory = [], None
            for chunk, text in zip(row.chunks, script, strict=True):
                turn = answer_turn(row, chunk, memory, text, TOKENS)
                rollout.append(turn.fields())
                memory = turn.memory_after
            rollouts.append(rollout)
        values = group_step(row, rollouts)
        for s, (rollout, rv) in enumerate(zip(rollouts, values.rollouts, strict=True)):
            for i, (f, tv) in enumerate(zip(rollout, rv.turns, strict=True)):
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
