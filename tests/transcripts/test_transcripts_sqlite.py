"""grumem.transcripts.sqlite: a tool's database read without a lock or a change, and
never half read (its write-ahead log replayed in a private copy, a write under way
refused, a change during the read read again)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from grumem.errors import RecordError, UnknownFormatError
from grumem.transcripts import FORMATS, detect_format, read_transcript
from grumem.transcripts import sqlite as store
from grumem.transcripts.base import Head


def rows(conn: sqlite3.Connection) -> list[tuple]:
    return conn.execute("SELECT n, word FROM t ORDER BY n").fetchall()


def make_db(path: Path, wal: bool = False) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    if wal:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("CREATE TABLE t (n INTEGER PRIMARY KEY, word TEXT)")
    conn.execute("INSERT INTO t VALUES (1, 'one')")
    return conn


def files_of(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_a_database_is_read_without_a_lock_or_a_change(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    make_db(db).close()
    before = files_of(tmp_path), os.stat(db).st_mtime_ns
    # a writer holding an exclusive lock does not block the immutable read
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")
    assert store.read_snapshot(db, rows) == [(1, "one")]
    writer.execute("ROLLBACK")
    writer.close()
    assert (files_of(tmp_path), os.stat(db).st_mtime_ns) == before  # no -shm, no journal


def test_a_database_being_written_is_read_with_its_log(tmp_path: Path) -> None:
    """In WAL mode the newest rows sit in the -wal file until a checkpoint: the
    immutable main file alone misses them; the snapshot replays the log in a copy."""
    db = tmp_path / "w.db"
    writer = make_db(db, wal=True)
    writer.execute("INSERT INTO t VALUES (2, 'two')")
    assert Path(f"{db}-wal").stat().st_size > 0
    immutable = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    stale = immutable.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    immutable.close()
    assert stale == 0  # the table itself is still only in the log
    before = files_of(tmp_path)
    assert store.read_snapshot(db, rows) == [(1, "one"), (2, "two")]
    assert files_of(tmp_path) == before  # the log was replayed in the copy, not here
    writer.close()


def test_a_write_under_way_is_refused_naming_the_file(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    make_db(db).close()
    Path(f"{db}-journal").write_bytes(b"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7" + b"\0" * 504)
    with pytest.raises(RecordError) as e:
        store.read_snapshot(db, rows)
    assert e.value.path == str(db)
    assert "write under way" in e.value.why and "retry when the tool is idle" in e.value.why


def test_a_change_during_the_read_is_read_again(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    make_db(db).close()
    seen: list[list[tuple]] = []

    def reader(conn: sqlite3.Connection) -> list[tuple]:
        result = rows(conn)
        if not seen:  # the tool writes while the first read is under way
            other = sqlite3.connect(db)
            other.execute("INSERT INTO t VALUES (2, 'two')")
            other.commit()
            other.close()
        seen.append(result)
        return result

    assert store.read_snapshot(db, reader) == [(1, "one"), (2, "two")]
    assert seen[0] == [(1, "one")]  # the first, torn read was thrown away


def test_a_database_that_never_stops_changing_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "busy.db"
    make_db(db).close()
    n = iter(range(10, 100))

    def reader(conn: sqlite3.Connection) -> list[tuple]:
        other = sqlite3.connect(db)
        other.execute("INSERT INTO t VALUES (?, 'more')", (next(n),))
        other.commit()
        other.close()
        return rows(conn)

    with pytest.raises(RecordError) as e:
        store.read_snapshot(db, reader)
    assert "changed while being read" in e.value.why and str(db) in str(e.value)


def test_a_file_with_the_header_but_no_database_is_an_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(store.HEADER + b"\xff" * 200)
    with pytest.raises(RecordError) as e:
        store.read_snapshot(bad, rows)
    assert "not a readable SQLite database" in e.value.why
    for name in ("cursor", "opencode", "kilo", "goose", "zed"):
        assert not FORMATS[name].detect(bad, Head(bad))


def test_an_unknown_sqlite_database_is_refused_with_every_format_s_reason(tmp_path: Path) -> None:
    db = tmp_path / "other.db"
    make_db(db).close()
    with pytest.raises(UnknownFormatError) as e:
        read_transcript(db)
    message = str(e.value)
    for name in FORMATS:
        assert f"  {name}: " in message
    assert "opencode: a SQLite database without OpenCode's table 'session'" in message
    assert "zed: a SQLite database without Zed's table 'threads'" in message
    with pytest.raises(UnknownFormatError):
        detect_format(db)


def test_a_path_with_uri_characters_is_opened(tmp_path: Path) -> None:
    odd = tmp_path / "a dir?#%" / "x.db"
    odd.parent.mkdir()
    make_db(odd).close()
    assert store.read_snapshot(odd, rows) == [(1, "one")]


def test_a_store_in_a_project_chunks_every_session_then_prompts(
    tmp_path: Path, fake_server
) -> None:
    """The workflow's chunk rule on SQLite stores: each database is one unit whose
    sessions all become chunk files, and their text reaches the prompts."""
    from support.checkout import FIXTURES_DIR
    from support.workflow import REPO, demo_project, files_under, snakemake, write_config

    server = fake_server(REPO / "fixtures" / "fake" / "demo.yaml")
    zed = FIXTURES_DIR / "transcripts" / "zed"
    project = demo_project(transcripts={"glob": str(zed / "*" / "threads.db")})
    del project["chunks"]
    write_config(tmp_path, server.base_url, projects={"z": project}, shard_rule="sorted")
    snakemake(tmp_path, "results/z/prompts/s000.jsonl")
    chunk_files = [
        p.name for p in files_under(tmp_path / "results/z/chunks") if p.suffix == ".jsonl"
    ]
    assert sorted(chunk_files) == sorted(
        f"{t}.jsonl"
        for t in (
            "c9e3a5b7-2d4f-4b8c-a0e1-3c4d5e6f7a81",
            "d0f4b6c8-3e5a-4c9d-b1f2-4d5e6f7a8b92",
        )
    )
    prompts = (tmp_path / "results/z/prompts/s000.jsonl").read_text(encoding="utf-8")
    assert "Add GET /healthz returning 200" in prompts


PLACEHOLDERS = ("~/", "{XDG_DATA_HOME}/", "{XDG_CONFIG_HOME}/", "{APP_SUPPORT}/", "${")


@pytest.mark.parametrize("name", ["cursor", "opencode", "kilo", "goose", "zed"])
def test_locations_use_the_discovery_placeholders(name: str) -> None:
    locations = FORMATS[name].LOCATIONS
    assert locations and all(isinstance(g, str) for g in locations)
    assert all(g.startswith(PLACEHOLDERS) for g in locations), locations
