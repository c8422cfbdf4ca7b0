"""grumem.transcripts.formats.trajectory_dataset: Parquet / JSON Lines datasets in.

fixtures/transcripts/trajectory-dataset/ holds swe-agent-trajectories.parquet
(the columns of nebius/SWE-agent-trajectories: `trajectory` of {role, text},
roles system/user/ai; written by scripts/write_trajectory_dataset_fixtures.py)
and openhands-sft.jsonl (the `messages` of SWE-Gym/OpenHands-SFT-Trajectories);
both invented for these tests.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grumem.errors import RecordError, UnknownFormatError
from grumem.io.chunk_files import read_chunk_file
from grumem.transcripts import SessionStream, detect_format, read_transcript
from grumem.transcripts.base import Head, tool_call_text
from grumem.transcripts.formats import trajectory_dataset
from support.checkout import FIXTURES_DIR
from support.transcripts import other_samples
from support.workflow import REPO, demo_project, files_under, snakemake, write_config

T = FIXTURES_DIR / "transcripts"
D = T / "trajectory-dataset"
PARQUET = D / "swe-agent-trajectories.parquet"
JSONL = D / "openhands-sft.jsonl"
OTHERS = other_samples(D.name)


def sessions_of(path: Path, **options):
    fmt, sessions = read_transcript(path, "auto", False, options)
    assert fmt == "trajectory-dataset"
    return list(sessions)


def write_parquet(path: Path, rows: list[dict]) -> Path:
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# ------------------------------------------------------------------ detection


@pytest.mark.parametrize("path", [PARQUET, JSONL], ids=lambda p: p.name)
def test_auto_detects_parquet_and_json_lines_datasets(path: Path) -> None:
    assert detect_format(path) == "trajectory-dataset"


@pytest.mark.parametrize("path", OTHERS, ids=lambda p: p.name)
def test_does_not_claim_other_formats_samples(path: Path) -> None:
    assert not trajectory_dataset.detect(path, Head(path))


def test_a_parquet_file_without_messages_says_so(tmp_path: Path) -> None:
    f = write_parquet(tmp_path / "t.parquet", [{"a": 1}])
    verdict = trajectory_dataset.detect(f, Head(f))
    assert not verdict and "Parquet file without a messages or trajectory column" in verdict.reason


# ------------------------------------------------------------------ mapping


def test_parquet_swe_agent_rows_roles_and_text_field() -> None:
    long, short = sessions_of(PARQUET)
    assert (long.id, short.id) == ("swe-agent-trajectories-0", "swe-agent-trajectories-1")
    table = pq.read_table(PARQUET).to_pylist()
    for s, row in zip((long, short), table, strict=True):
        role = {"system": "system", "user": "user", "ai": "assistant"}
        assert [(r["role"], r["text"]) for r in s.records] == [
            (role[m["role"]], m["text"]) for m in row["trajectory"]
        ]
    assert long.records[3]["source"] == {"file": str(PARQUET), "row": 0, "index": 3}
    # the dataset's bookkeeping (system_prompt on every step, mask) is never text
    assert sum(r["text"].count("SETTING: You are") for r in long.records) == 1


def test_json_lines_openai_messages_with_tool_calls() -> None:
    first, second = sessions_of(JSONL, id_field="instance_id")
    assert (first.id, second.id) == ("tomlkit__tomlkit-402", "tomlkit__tomlkit-377")
    assert [r["role"] for r in first.records] == [
        "system",
        "user",
        "assistant",
        "tool_result",
        "assistant",
        "tool_result",
        "assistant",
    ]
    call = tool_call_text("execute_bash", {"command": "cd /workspace/tomlkit && python repro.py"})
    assert first.records[2]["text"] == f"Reproduce it first.\n\n{call}"
    assert first.records[3]["source"]["tool"] == "execute_bash"
    assert first.records[3]["source"]["line"] == 1
    assert second.records[1]["text"].startswith("Tool call execute_bash:")  # content null


def test_options_pick_the_columns(tmp_path: Path) -> None:
    rows = [
        {"run": "r1", "conv": [{"role": "human", "text": "hi", "content": "not this"}]},
        {"run": "r2", "conv": [{"role": "ai", "text": "hello"}]},
    ]
    for f in (write_parquet(tmp_path / "c.parquet", rows), write_jsonl(tmp_path / "c.jsonl", rows)):
        _, sessions = read_transcript(
            f,
            "trajectory-dataset",
            options={"messages_field": "conv", "id_field": "run", "text_field": "text"},
        )
        got = [(s.id, [(r["role"], r["text"]) for r in s.records]) for s in sessions]
        assert got == [("r1", [("user", "hi")]), ("r2", [("assistant", "hello")])]


def test_sessions_stream_one_row_at_a_time(tmp_path: Path) -> None:
    """More rows than a batch, the last one bad: the count is known first, and the
    rows before the bad one are read before the error (nothing waits for the whole file)."""
    n = trajectory_dataset.BATCH_ROWS * 3
    rows = [{"messages": [{"role": "user", "content": f"row {i}"}]} for i in range(n)]
    rows.append({"messages": [{"role": "robot", "content": "x"}]})
    for f in (write_parquet(tmp_path / "m.parquet", rows), write_jsonl(tmp_path / "m.jsonl", rows)):
        _, sessions = read_transcript(f, "trajectory-dataset")
        assert isinstance(sessions, SessionStream) and len(sessions) == n + 1
        it = iter(sessions)
        seen = [next(it).records[0]["text"] for _ in range(n)]
        assert seen == [f"row {i}" for i in range(n)]
        with pytest.raises(RecordError, match="unknown role 'robot'"):
            next(it)


# ------------------------------------------------------------------ losslessness

_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="§"), max_size=30
)


@st.composite
def datasets(draw):
    """(rows, expected sessions as lists of (role, text), text key) for a random dataset."""
    counter = iter(range(10**6))
    key = draw(st.sampled_from(["content", "text"]))
    roles = {"system": "system", "user": "user", "assistant": "assistant", "ai": "assistant"}
    rows, expected = [], []
    for _ in range(draw(st.integers(1, 5))):
        messages, want = [], []
        for role in draw(st.lists(st.sampled_from(sorted(roles)), min_size=1, max_size=8)):
            t = f"§{next(counter)}§{draw(_TEXT)}"
            messages.append({"role": role, key: t})
            want.append((roles[role], t))
        rows.append({"messages": messages})
        expected.append(want)
    return rows, expected, key


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(d=datasets(), parquet=st.booleans())
def test_every_text_appears_once_in_order(tmp_path_factory, d, parquet) -> None:
    rows, expected, key = d
    tmp = tmp_path_factory.mktemp("td")
    f = write_parquet(tmp / "d.parquet", rows) if parquet else write_jsonl(tmp / "d.jsonl", rows)
    _, sessions = read_transcript(f, "trajectory-dataset", options={"text_field": key})
    got = [[(r["role"], r["text"]) for r in s.records] for s in sessions]
    assert got == expected
    joined = "\n".join(t for s in got for _, t in s)
    for want in expected:
        for _, t in want:
            assert joined.count(t[: t.index("§", 1) + 1]) == 1


# ------------------------------------------------------------------ bad input


def test_bad_json_lines_name_file_line_and_field(tmp_path: Path) -> None:
    f = write_jsonl(
        tmp_path / "bad.jsonl",
        [
            {"messages": [{"role": "user", "content": "ok"}]},
            {"messages": [{"role": "user", "content": "ok"}, {"role": "user", "content": 7}]},
        ],
    )
    with pytest.raises(RecordError) as e:
        list(read_transcript(f, "trajectory-dataset")[1])
    assert (e.value.path, e.value.line, e.value.field) == (str(f), 2, "messages[1].content")
    assert f"{f}:2: field 'messages[1].content'" in str(e.value)


def test_bad_parquet_rows_name_file_row_and_field(tmp_path: Path) -> None:
    rows = [{"messages": [{"role": "user"}]}, {"messages": [{"role": None}]}]
    f = write_parquet(tmp_path / "bad.parquet", rows)
    with pytest.raises(RecordError) as e:
        list(read_transcript(f, "trajectory-dataset")[1])
    assert e.value.field == "messages[0].role" and "(row 1) missing" in str(e.value)


def test_option_errors(tmp_path: Path) -> None:
    rows = [
        {"id": "a", "messages": [{"role": "user", "content": "x"}]},
        {"id": "a", "messages": [{"role": "user", "content": "y"}]},
    ]
    f = write_jsonl(tmp_path / "dup.jsonl", rows)
    with pytest.raises(
        RecordError, match=r"dup\.jsonl:2: field 'id' 'a' again \(first at line 1\)"
    ):
        list(read_transcript(f, "trajectory-dataset", options={"id_field": "id"})[1])
    p = write_parquet(tmp_path / "dup.parquet", rows)
    with pytest.raises(RecordError, match=r"field 'conv' no such column \(columns: id, messages\)"):
        read_transcript(p, "trajectory-dataset", options={"messages_field": "conv"})
    with pytest.raises(RecordError, match="text_field 'body'"):
        read_transcript(p, "trajectory-dataset", options={"text_field": "body"})
    with pytest.raises(UnknownFormatError, match="format openai takes no option id_field"):
        read_transcript(JSONL, "openai", options={"id_field": "id"})


# ------------------------------------------------------------------ chunking and the workflow


def test_cli_options_and_a_long_row_needing_several_chunks(tmp_path: Path) -> None:
    out = tmp_path / "chunks"
    proc = subprocess.run(
        [sys.executable, "-m", "grumem", "chunk", "--id-field", "instance_id", "--out", str(out)]
        + [str(PARQUET), str(JSONL)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert f"{PARQUET}: trajectory-dataset, 2 session(s)" in proc.stdout + proc.stderr
    assert len(read_chunk_file(out / "pyclamp__pyclamp-118.jsonl")) >= 3
    assert len(read_chunk_file(out / "tomlkit__tomlkit-402.jsonl")) == 1


def test_dataset_project_chunks_then_prompts_with_config_options(
    tmp_path: Path, fake_server
) -> None:
    server = fake_server(REPO / "fixtures" / "fake" / "demo.yaml")
    transcripts = {
        "glob": str(D / "*"),
        "format": "trajectory-dataset",
        "id_field": "instance_id",
        "messages_field": None,
    }
    project = demo_project(transcripts=transcripts)
    del project["chunks"]
    # shards named by position (s000, s001, ...): the test reads them by name
    write_config(tmp_path, server.base_url, projects={"td": project}, shard_rule="sorted")
    snakemake(tmp_path, "results/td/prompts/s000.jsonl")
    chunk_files = [
        p.name for p in files_under(tmp_path / "results/td/chunks") if p.suffix == ".jsonl"
    ]
    assert sorted(chunk_files) == [
        "pyclamp__pyclamp-118.jsonl",
        "pyclamp__pyclamp-131.jsonl",
        "tomlkit__tomlkit-377.jsonl",
        "tomlkit__tomlkit-402.jsonl",
    ]
    prompts = (tmp_path / "results/td/prompts/s000.jsonl").read_text(encoding="utf-8")
    assert "clamp() returns the limit" in prompts and "IndexError" in prompts
