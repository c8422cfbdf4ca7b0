"""scripts/write_sqlite_transcript_fixtures.py rebuilds the committed SQLite-store
fixtures: every database's schema and rows (a zstd body compared decompressed, so a
newer zstd's bytes do not matter) and every JSON file equal the committed ones, and
it writes no file that is not committed."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import zstandard

from support.checkout import FIXTURES_DIR, REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "write_sqlite_transcript_fixtures.py"
T = FIXTURES_DIR / "transcripts"
FORMATS = ("cursor", "opencode", "kilo", "goose", "zed")
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def content(path: Path) -> object:
    """A database as its schema and its rows, table by table; any other file as bytes."""
    if path.read_bytes()[:16] != b"SQLite format 3\x00":
        return path.read_bytes()
    conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        schema = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
        tables = [n for t, n, _ in schema if t == "table" and not n.startswith("sqlite_")]
        rows = {
            t: sorted(
                tuple(
                    zstandard.ZstdDecompressor().decompressobj().decompress(v)
                    if isinstance(v, bytes) and v.startswith(ZSTD_MAGIC)
                    else v
                    for v in row
                )
                for row in conn.execute(f'SELECT * FROM "{t}"')
            )
            for t in tables
        }
    finally:
        conn.close()
    return schema, rows


def fixture_files(root: Path) -> dict[str, Path]:
    return {
        str(p.relative_to(root)): p
        for fmt in FORMATS
        for p in sorted((root / fmt).rglob("*"))
        if p.is_file() and p.name != "SOURCES.md"
    }


def test_the_script_rebuilds_the_committed_fixtures(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], check=True)
    built, committed = fixture_files(tmp_path), fixture_files(T)
    assert sorted(built) == sorted(committed)
    for name, path in committed.items():
        assert content(built[name]) == content(path), name
    assert all((T / fmt / "SOURCES.md").is_file() for fmt in FORMATS)
