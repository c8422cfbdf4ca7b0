"""grumem.transcripts.formats.opencode: OpenCode's opencode.db (1.2 and later) and the
JSON tree before it.

The fixtures under fixtures/transcripts/opencode/ are built by
scripts/write_sqlite_transcript_fixtures.py from the schema SOURCES.md names."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from grumem.errors import RecordError
from grumem.transcripts import detect_format, read_transcript
from grumem.transcripts.base import Head
from grumem.transcripts.formats import opencode
from support.checkout import FIXTURES_DIR
from support.transcripts import chunk_cli, other_samples

OC = FIXTURES_DIR / "transcripts" / "opencode"
DB = OC / "opencode.db"
TREE = next((OC / "storage" / "session").glob("*/*.json"))
MAIN = "ses_4d585107dffeO9bO3HvMdvLYyC"
CHILD = "ses_4d5851a2c1ffK2mN8pQ4rS6tUv"


def sessions(path: Path, fmt: str = "auto", drop_thinking: bool = False) -> dict:
    found, read = read_transcript(path, fmt, drop_thinking)
    assert found == "opencode"
    return {s.id: s for s in read}


def roles(session) -> list[str]:
    return [r["role"] for r in session.records]


@pytest.mark.parametrize("path", [DB, TREE], ids=["db", "tree"])
def test_auto_and_by_name(path: Path) -> None:
    assert detect_format(path) == "opencode"
    assert sessions(path, "opencode").keys() == sessions(path).keys()


@pytest.mark.parametrize("path", other_samples("opencode"), ids=lambda p: p.name)
def test_refuses_other_formats_samples(path: Path) -> None:
    assert not opencode.detect(path, Head(path))


def test_db_sessions_parts_tools_and_a_subagent() -> None:
    s = sessions(DB)
    assert list(s) == [MAIN, CHILD]
    main = s[MAIN]
    assert roles(main) == [
        "user",
        "assistant",  # reasoning, text, grep call
        "tool_result",
        "assistant",  # read call
        "tool_result",  # its error
        "assistant",  # task call
        "tool_result",
        "assistant",  # text + the edit call still running
    ]
    user = main.records[0]
    # the typed prompt, the synthetic text OpenCode sent for the attached file, the image
    assert user["text"].startswith("The tile cache grows without bound in production.")
    assert 'Called the Read tool with {"filePath":"cache/evict.go"}' in user["text"]
    assert user["text"].endswith("[file: image/png, 132 bytes base64]")
    assert user["source"]["part_ids"] == ["prt_01JH0001a", "prt_01JH0001c", "prt_01JH0001d"]
    assert main.records[1]["text"] == (
        "Thinking: The condition compares bytes to limit; if limit is read before config load"
        " it is 0 and eviction is skipped.\n\nI'll check where `limit` is set.\n\n"
        'Tool call grep: {"pattern":"limit\\\\s*=","path":"cache"}'
    )
    assert main.records[1]["source"]["call_ids"] == ["toolu_01Grep"]
    assert main.records[1]["source"]["model"] == "anthropic/claude-sonnet-4-5"
    failed = main.records[4]
    assert failed["text"] == "File not found: cache/config.go"
    assert failed["source"]["is_error"] is True
    assert failed["source"]["tool"] == "read" and failed["source"]["call_id"] == "toolu_02Read"
    assert main.records[-1]["text"].endswith('Tool call edit: {"filePath":"cmd/server/main.go"}')
    assert dict(main.skipped) == {
        "session_message:compaction": 1,
        "file (sent as text)": 1,
        "step-start": 1,
        "step-finish": 1,
        "tool call running": 1,
        "patch": 1,
        "part:hologram": 1,
    }
    first = main.records[0]["source"]
    assert first["title"] == "Tile cache never evicts" and first["created"] == 1768990000000
    child = s[CHILD]
    assert child.records[0]["source"]["parent"] == MAIN
    assert roles(child) == ["user", "assistant", "tool_result", "assistant"]
    assert child.records[1]["source"]["model"] == "anthropic/claude-haiku-4-5"


def test_thinking_dropped_and_counted() -> None:
    main = sessions(DB, drop_thinking=True)[MAIN]
    assert main.records[1]["text"].startswith("I'll check where `limit` is set.")
    assert main.skipped["thinking"] == 1


def test_json_tree_of_before_1_2() -> None:
    (s,) = sessions(TREE).values()
    assert s.id == "ses_3e1f0a9b8fffAbCdEfGh012345"
    assert roles(s) == ["user", "assistant", "tool_result", "assistant"]
    assert s.records[2]["text"].startswith("1 failed, 99 passed")
    assert s.records[2]["source"]["tool"] == "bash"
    assert s.records[0]["source"]["title"] == "Flaky test in ledger rounding"
    assert dict(s.skipped) == {"step-start": 1, "step-finish": 1}


def test_tree_session_outside_storage_is_refused(tmp_path: Path) -> None:
    alone = tmp_path / TREE.name
    shutil.copyfile(TREE, alone)
    verdict = opencode.detect(alone, Head(alone))
    assert not verdict and "outside storage/session" in verdict.reason


def test_kilo_store_is_not_opencode_s() -> None:
    kilo = FIXTURES_DIR / "transcripts" / "kilo" / "kilo.db"
    verdict = opencode.detect(kilo, Head(kilo))
    assert not verdict and "the kilo format" in verdict.reason


def test_a_part_that_is_not_json_names_its_row(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    shutil.copyfile(DB, db)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE part SET data = '{\"type\": ' WHERE id = 'prt_01JH0002c'")
    conn.commit()
    conn.close()
    with pytest.raises(RecordError) as e:
        read_transcript(db, "opencode")
    assert (e.value.path, e.value.field) == (str(db), "part[prt_01JH0002c].data")


def test_chunk_cli_auto(tmp_path: Path) -> None:
    err = chunk_cli(tmp_path / "out", [DB, TREE])
    assert f"{DB}: opencode, 2 session(s)" in err and f"{TREE}: opencode, 1 session(s)" in err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        f"{sid}.jsonl" for sid in (MAIN, CHILD, "ses_3e1f0a9b8fffAbCdEfGh012345")
    )
