"""Stage `prompts`: every (trajectory, t) of a shard planned before any LLM call: the
fixed parts of each request, token counts, and the shard checked against the
project's session index."""

from __future__ import annotations

from grumem.config.settings import load_queries
from grumem.core.template import memory_text
from grumem.io.chunk_files import iter_sessions
from grumem.io.template_files import load_prompt_builder
from grumem.records.prompt import PromptRecord
from grumem.stages.prompts import plan, trajectory_id
from support.checkout import FIXTURES_DIR
from support.workflow import write_queries, write_session

DEMO = FIXTURES_DIR / "demo"


def test_every_trajectory_and_turn_of_the_demo_is_planned_in_order() -> None:
    queries = load_queries(DEMO / "queries.yaml")
    sessions = dict(iter_sessions([DEMO / "chunks"]))
    builder = load_prompt_builder()
    records = list(plan("demo", [str(DEMO / "chunks")], queries, builder, 2))
    turns = sum(len(chunks) for chunks in sessions.values())
    assert len(records) == turns * len(queries) * 2
    by_traj: dict[str, list[PromptRecord]] = {}
    for r in records:
        by_traj.setdefault(r.trajectory_id, []).append(r)
    assert len(by_traj) == len(sessions) * len(queries) * 2
    q = queries[0]
    session, chunks = next(iter(sessions.items()))
    traj = by_traj[trajectory_id("demo", q["id"], session, 1)]
    assert [r.t for r in traj] == list(range(1, len(chunks) + 1))
    assert [r.chunk_sha for r in traj] == [c.sha for c in chunks]
    # prefix + M_{t-1} + suffix is the prompt the builder renders (card 003)
    first = traj[0]
    user = builder.build(q["question"], chunks[0].text, None).user
    assert first.prefix + memory_text(None) + first.suffix == user


def test_prompts_checks_its_shard_against_the_session_index(tmp_path) -> None:
    from grumem.cli import main

    chunks = tmp_path / "chunks"
    chunks.mkdir()
    write_session(chunks / "a.jsonl", "shared", ["an error"])
    write_session(chunks / "c.jsonl", "shared", ["an error"])
    write_queries(tmp_path / "q.yaml")
    index = tmp_path / "sessions.jsonl"
    assert main(["sessions", "--out", str(index), str(chunks / "a.jsonl")]) == 0
    out = tmp_path / "prompts.jsonl"
    argv = ["prompts", "--settings", "{}", "--project", "p", "--queries", str(tmp_path / "q.yaml")]
    argv += ["--sessions", str(index), "--out", str(out)]
    assert main([*argv, str(chunks / "a.jsonl")]) == 0
    assert main([*argv, str(chunks / "c.jsonl")]) == 1
    assert main(["sessions", "--out", str(tmp_path / "x.jsonl"), str(chunks)]) == 1
    assert not (tmp_path / "x.jsonl").exists()
