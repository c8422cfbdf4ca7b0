"""Stage `chunk`: `grumem chunk` over the sample transcripts: every chunk within the
budget, deterministic, its statistics on stderr (the job's log), and bad input a
one-line error naming file, line and field."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from grumem.cli import TRANSCRIPT_FORMATS
from grumem.core.chunk_text import render_records
from grumem.core.units import unit_name
from grumem.errors import RecordError
from grumem.io.chunk_files import expand_chunk_paths, read_chunk_file
from grumem.io.jsonl import validate
from grumem.io.tokenizer import cl100k_tokens
from support.transcripts import ALL, CLAUDE, OPENAI, RECORDS, SID, T, sessions_of

TOKENS = cl100k_tokens()

# ------------------------------------------------------------------ the CLI


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "grumem", "chunk", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_chunks_every_sample_within_budget_deterministically(tmp_path: Path) -> None:
    budget = 120
    a = run_cli("--budget", str(budget), "--out", str(tmp_path / "a"), *map(str, ALL))
    assert a.returncode == 0, a.stderr
    b = run_cli(
        "--format", "auto", "--budget", str(budget), "--out", str(tmp_path / "b"), *map(str, ALL)
    )
    assert b.returncode == 0, b.stderr
    assert a.stderr == b.stderr  # the statistics, in the job's log

    files = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert files == sorted(
        [
            f"{SID}.jsonl",
            f"{SID}-side-c0ffee01.jsonl",
            f"{SID}-side-d00dfeed.jsonl",
            "django__django-11099.jsonl",
            "astropy__astropy-7746.jsonl",
            "sympy__sympy-20590.jsonl",
            "marshmallow-code__marshmallow-1867.jsonl",
            "trajectory-only.jsonl",
            "export-job.jsonl",
            "staging-port.jsonl",
            "pairing-notes.jsonl",
        ]
    )
    for name in files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
        chunks = read_chunk_file(tmp_path / "a" / name)  # schema, session, indices 0..n-1
        assert chunks[0].session == name.removesuffix(".jsonl")
        assert all(TOKENS.count(render_records(c.records)) <= budget for c in chunks)

    # the main Claude session: 12 records, one split in two parts, put back together exactly
    main = read_chunk_file(tmp_path / "a" / f"{SID}.jsonl")
    recs = [r for c in main for r in c.records]
    parts = [r for r in recs if "part" in r]
    assert [p["part"] for p in parts] == [{"index": 0, "of": 2}, {"index": 1, "of": 2}]
    original = next(
        r for r in sessions_of(CLAUDE)[SID].records if r["source"] == parts[0]["source"]
    )
    assert parts[0]["text"] + parts[1]["text"] == original["text"]

    line = next(ln for ln in a.stderr.splitlines() if ln.strip().startswith(f"{SID}:"))
    assert "records 12," in line and "parts split 1 (into 2 parts)" in line
    assert "file-history-snapshot 2" in line and "summary 1" in line
    assert "skipped: demonstration 1" in a.stderr


def test_cli_drop_thinking(tmp_path: Path) -> None:
    r = run_cli("--drop-thinking", "--out", str(tmp_path), str(CLAUDE), str(OPENAI))
    assert r.returncode == 0, r.stderr
    text = (tmp_path / f"{SID}.jsonl").read_text() + (tmp_path / "export-job.jsonl").read_text()
    assert "Thinking: " not in text and "redacted thinking" not in text
    assert "thinking 1" in r.stderr


def test_cli_errors_name_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "text": "ok"}\n{"role": "user", "text": 5}\n')
    r = run_cli("--out", str(tmp_path / "out"), str(bad))
    assert r.returncode == 1
    assert f"{bad}:2: field 'text'" in r.stderr

    unknown = tmp_path / "notes.txt"
    unknown.write_text("hello\n")
    r = run_cli("--out", str(tmp_path / "out"), str(unknown))
    assert r.returncode == 1
    assert "tried, and why each refused:\n  claude-code: the first line is not JSON\n" in r.stderr

    r = run_cli("--out", str(tmp_path / "out"), str(RECORDS), str(RECORDS))
    assert r.returncode == 1 and "also comes from" in r.stderr

    r = run_cli("--budget", "10", "--out", str(tmp_path / "out"), str(RECORDS))
    assert r.returncode == 1 and "at least 50" in r.stderr


# ------------------------------------------------------------------ one job per shard
# --units-under gives each transcript its own directory, as the workflow


def test_units_layout_writes_the_same_files_one_directory_per_transcript(tmp_path: Path) -> None:
    flat = run_cli("--budget", "120", "--out", str(tmp_path / "flat"), *map(str, ALL))
    assert flat.returncode == 0, flat.stderr
    root = tmp_path / "chunks"
    stale = root / unit_name(CLAUDE) / "gone-session.jsonl"  # from an earlier transcript
    stale.parent.mkdir(parents=True)
    stale.write_text("{}\n")
    manifest = tmp_path / "chunked" / "s000.json"
    r = run_cli(
        "--budget", "120", "--units-under", str(root), "--manifest", str(manifest),
        *map(str, ALL),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stderr == flat.stderr  # the same statistics in the job's log
    document = json.loads(manifest.read_text())
    validate(document, "chunk-manifest")
    assert [t["transcript"] for t in document["transcripts"]] == list(map(str, ALL))
    assert not stale.exists()
    written = []
    for t in document["transcripts"]:
        assert t["directory"] == str(root / unit_name(t["transcript"]))
        assert sorted(t["chunks"]) == sorted(map(str, Path(t["directory"]).iterdir()))
        written += t["chunks"]
    # every chunk file of the flat run, byte for byte, each in its transcript's directory
    assert sorted(Path(c).name for c in written) == sorted(
        p.name for p in (tmp_path / "flat").iterdir()
    )
    for c in written:
        assert Path(c).read_bytes() == (tmp_path / "flat" / Path(c).name).read_bytes()


def test_a_manifest_stands_for_the_chunk_files_of_its_directories(tmp_path: Path) -> None:
    """The later stages take a shard's manifest, not its paths: it reads
    as the transcripts' directories would, in the manifest's order."""
    root, manifest = tmp_path / "chunks", tmp_path / "chunked" / "s000.json"
    args = ("--budget", "120", "--units-under", str(root), "--manifest", str(manifest))
    r = run_cli(*args, *map(str, ALL))
    assert r.returncode == 0, r.stderr
    dirs = [str(root / unit_name(f)) for f in ALL]
    assert expand_chunk_paths([manifest]) == expand_chunk_paths(dirs)
    assert len(expand_chunk_paths([manifest])) > len(ALL)  # a transcript with two sessions
    index = [tmp_path / "by-manifest.jsonl", tmp_path / "by-directory.jsonl"]
    for out, chunks in zip(index, ([str(manifest)], dirs), strict=True):
        done = subprocess.run(
            [sys.executable, "-m", "grumem", "sessions", "--out", str(out), *chunks],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
    assert index[0].read_bytes() == index[1].read_bytes()

    manifest.write_text(
        '{"transcripts": [{"transcript": "t", "directory": "d", "redacted": {}}],'
        ' "redaction": null}'
    )
    with pytest.raises(RecordError, match=r"json: field 'transcripts\.0\.chunks' 'chunks' is"):
        expand_chunk_paths([manifest])
    manifest.write_text("not json")
    with pytest.raises(RecordError, match=r"s000\.json: not JSON"):
        expand_chunk_paths([manifest])


def test_units_layout_errors_name_the_files_and_write_no_manifest(tmp_path: Path) -> None:
    copy = tmp_path / "other" / RECORDS.name
    copy.parent.mkdir()
    copy.write_bytes(RECORDS.read_bytes())
    manifest = tmp_path / "m.json"
    args = ("--units-under", str(tmp_path / "chunks"), "--manifest", str(manifest))
    err = one_line_error(run_cli(*args, str(RECORDS), str(copy)))
    assert f"{RECORDS} and {copy} both make the unit name 'pairing-notes.jsonl'" in err
    assert not (tmp_path / "chunks").exists()

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "text": "ok"}\n{"role": "user", "text": 5}\n')
    r = run_cli(*args, str(RECORDS), str(bad))  # the first file's statistics, then the error
    assert r.returncode == 1 and r.stderr.splitlines()[-1].endswith(
        f"{bad}:2: field 'text' expected str, found int"
    )
    assert not manifest.exists()

    r = run_cli("--out", str(tmp_path / "o"), "--units-under", str(tmp_path / "u"), str(RECORDS))
    assert r.returncode == 2 and "not allowed with argument" in r.stderr


# ------------------------------------------------------------------ bad input: one-line errors


def one_line_error(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    return r.stderr


def test_cli_lone_surrogate_in_a_jsonl_transcript(tmp_path: Path) -> None:
    # an emoji cut between its UTF-16 halves, as JavaScript's substring leaves it
    bad = tmp_path / "cut.jsonl"
    bad.write_text('{"role": "user", "text": "ok"}\n{"role": "user", "text": "bye \\ud83d"}\n')
    err = one_line_error(run_cli("--format", "records", "--out", str(tmp_path / "o"), str(bad)))
    assert f"{bad}:2: field 'text' lone surrogate \\ud83d" in err
    claude = tmp_path / "claude.jsonl"
    lines = CLAUDE.read_text(encoding="utf-8").splitlines(keepends=True)
    n = next(i for i, x in enumerate(lines) if '"type":"user"' in x and '"content":"' in x)
    lines[n] = lines[n].replace('"content":"', '"content":"\\udc00', 1)
    claude.write_text("".join(lines), encoding="utf-8")
    err = one_line_error(run_cli("--out", str(tmp_path / "o"), str(claude)))
    assert f"{claude}:{n + 1}: field 'message.content' lone surrogate \\udc00" in err
    assert not (tmp_path / "o").exists() or list((tmp_path / "o").iterdir()) == []


def test_cli_lone_surrogate_in_a_json_document(tmp_path: Path) -> None:
    doc = json.loads(OPENAI.read_text(encoding="utf-8"))
    bad = tmp_path / "openai.json"
    text = json.dumps(doc, indent=2).replace('"The nightly', '"\\ud83d The nightly', 1)
    bad.write_text(text, encoding="utf-8")
    line = text[: text.index("\\ud83d")].count("\n") + 1
    err = one_line_error(run_cli("--out", str(tmp_path / "o"), str(bad)))
    assert f"{bad}:{line}: field '1.content.0.text' lone surrogate \\ud83d" in err


def test_cli_directory_and_missing_file(tmp_path: Path) -> None:
    err = one_line_error(run_cli("--out", str(tmp_path / "o"), str(T / "records")))
    assert f"{T / 'records'}: is a directory" in err and "*.jsonl" in err
    missing = tmp_path / "missing.jsonl"
    err = one_line_error(run_cli("--out", str(tmp_path / "o"), str(missing)))
    assert f"{missing}: cannot read: No such file or directory" in err
    err = one_line_error(run_cli("--format", "records", "--out", str(tmp_path / "o"), str(missing)))
    assert f"{missing}: cannot read" in err


@pytest.mark.parametrize("fmt", TRANSCRIPT_FORMATS)
def test_cli_empty_transcript_is_an_error_naming_it(tmp_path: Path, fmt: str) -> None:
    """An empty file read as zero sessions exited 0 and wrote nothing: the session
    would vanish from the project without a word."""
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    err = one_line_error(run_cli("--format", fmt, "--out", str(tmp_path / "o"), str(empty)))
    assert f"{empty}: empty file: no transcript to chunk" in err


# ------------------------------------------------------------------ memory

MESSAGE_CHARS = 40_000_000
LONG_LINE_CHARS = 300_000  # one line longer than the section budget on its own
_WORDS = ("request", "handler", "timeout", "retry", "cache", "miss", "token", "shard", "queue")

# runs the command given after it and prints its peak RSS (a fresh process, so no other
# child of the test process counts) with its exit status and stderr
_PEAK_RSS = (
    "import json, resource, subprocess, sys\n"
    "r = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
    "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024\n"
    "print(json.dumps({'returncode': r.returncode, 'stderr': r.stderr, 'peak': peak}))\n"
)


def log_like_text(chars: int, long_line: int = 0, seed: int = 25) -> str:
    """Lines of logs, code and tracebacks, the same for a seed, about `chars` long; a
    line in ten holds non-ASCII text (so a Python str of two bytes a character), and
    the line in the middle is `long_line` characters of compact JSON, if not 0."""
    rng = random.Random(seed)
    lines: list[str] = []
    n = i = 0
    long_at = chars // 2 if long_line else chars * 2
    while n < chars:
        w = rng.choice(_WORDS)
        kind = rng.randrange(10)
        if n >= long_at:
            line = json.dumps({f"{w}{k}": k * 7919 % 1000 for k in range(long_line // 10)})
            line, long_at = line[:long_line], chars * 2
        elif kind < 4:
            line = (
                f"2025-03-{1 + i % 28:02d}T12:{i % 60:02d}:{i * 7 % 60:02d}.{i % 1000:03d}Z "
                f"{rng.choice(['INFO', 'WARN', 'ERROR'])} [{w}-{rng.randrange(64)}] "
                + " ".join(rng.choice(_WORDS) for _ in range(rng.randrange(3, 12)))
                + f" id={rng.getrandbits(64):016x} took={rng.random() * 100:.3f}ms"
            )
        elif kind < 8:
            line = "    " * rng.randrange(4) + rng.choice(
                [
                    f"def {w}_{i}(self, {rng.choice(_WORDS)}: int = {rng.randrange(100)}) -> None:",
                    f"if {w} is None and len(self.{rng.choice(_WORDS)}) > {rng.randrange(999)}:",
                    f"return {{'{w}': {rng.randrange(10**6)}, 'items': [1, 2, 3]}}",
                    f"# {' '.join(rng.choice(_WORDS) for _ in range(8))}",
                    "",
                ]
            )
        elif kind < 9:
            line = f'  File "/srv/app/{w}/{rng.choice(_WORDS)}.py", line {rng.randrange(2000)}'
        else:
            line = "résumé → ✓ " + "=" * rng.randrange(80) + " — done"
        lines.append(line)
        n += len(line) + 1
        i += 1
    return "\n".join(lines) + "\n"


def write_transcript(path: Path, fmt: str, message: str) -> None:
    """A question, the message (a tool's output), an answer."""
    if fmt == "records":
        rows = [
            {"role": "user", "text": "Why does the job time out?"},
            {"role": "tool_result", "text": message},
            {"role": "assistant", "text": "A retry storm."},
        ]
        with path.open("w", encoding="utf-8") as f:
            f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    else:  # openai: one JSON document, on one line as most writers leave it
        doc = [
            {"role": "user", "content": "Why does the job time out?"},
            {"role": "tool", "tool_call_id": "call_1", "content": message},
            {"role": "assistant", "content": "A retry storm."},
        ]
        path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")


def chunk_peak_rss(transcript: Path, out: Path) -> dict:
    """`grumem chunk` on one file, auto-detecting its format: exit status, stderr, peak RSS."""
    command = [sys.executable, "-m", "grumem", "chunk", "--out", str(out), str(transcript)]
    r = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS, *command], capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.slow
@pytest.mark.parametrize(("fmt", "suffix"), [("records", ".jsonl"), ("openai", ".json")])
def test_a_40_mb_message_is_chunked_in_four_times_the_file_and_split_losslessly(
    tmp_path: Path, fmt: str, suffix: str
) -> None:
    """Peak RSS of chunking one file is at most 4x the file plus what a tiny file takes
    (Python, the imports, tiktoken's encoder): no copy, token list or list of parts of
    the whole message is held beside it. And its parts put back are the message."""
    tiny = tmp_path / f"tiny{suffix}"
    write_transcript(tiny, fmt, log_like_text(2000))
    chunk_peak_rss(tiny, tmp_path / "warm-up")  # the start-up cache, as a job finds it
    constant = chunk_peak_rss(tiny, tmp_path / "tiny")["peak"]

    message = log_like_text(MESSAGE_CHARS, LONG_LINE_CHARS)
    big = tmp_path / f"big{suffix}"
    write_transcript(big, fmt, message)
    size = big.stat().st_size
    run = chunk_peak_rss(big, tmp_path / "big")
    assert run["returncode"] == 0, run["stderr"]
    mib = 1 << 20
    assert run["peak"] <= 4 * size + constant, (
        f"peak RSS {run['peak'] / mib:.0f} MiB for a {size / mib:.0f} MiB file: more than"
        f" 4x it plus {constant / mib:.0f} MiB (a tiny file's peak)"
    )

    stats = re.search(
        r"chunks (\d+), tokens \d+ \(max (\d+)\), parts split 1 \(into (\d+)", run["stderr"]
    )
    assert stats is not None, run["stderr"]
    assert int(stats[2]) <= 5000  # the default section budget
    chunks = read_chunk_file(tmp_path / "big" / "big.jsonl")
    assert len(chunks) == int(stats[1])
    records = [r for c in chunks for r in c.records]
    parts = [r for r in records if "part" in r]
    assert [p["part"] for p in parts] == [{"index": i, "of": len(parts)} for i in range(len(parts))]
    assert len(parts) == int(stats[3]) > 1000
    assert "".join(p["text"] for p in parts) == message
    assert [r["text"] for r in records if "part" not in r] == [
        "Why does the job time out?",
        "A retry storm.",
    ]
    # cut at line ends, inside a line only in the one line too long to fit alone
    long_start = message.index('{"')
    long_end = message.index("\n", long_start) + 1
    end = 0
    inside = 0
    for p in parts[:-1]:
        end += len(p["text"])
        if not p["text"].endswith("\n"):
            assert long_start < end < long_end
            inside += 1
    assert inside >= LONG_LINE_CHARS // (5000 * 4)


# the Python heap's peak (tracemalloc: the same figure run after run, unlike RSS, which
# keeps what the allocator does not return) of `grumem chunk` with the given arguments
_TRACED_PEAK = (
    "import sys, tracemalloc\n"
    "tracemalloc.start()\n"
    "from grumem.cli import main\n"
    "assert main(sys.argv[1:]) == 0\n"
    "print(tracemalloc.get_traced_memory()[1])\n"
)


@pytest.mark.slow
def test_a_shard_s_job_lets_go_of_a_transcript_before_it_reads_the_next(tmp_path: Path) -> None:
    """The workflow's chunk job reads a shard's transcripts one after the other: the
    heap's peak over two files is one file's, not one file's plus the text of the
    other (held by its sessions while the next was read). A tiny file first loads the
    encoder, which a job's first file is read without."""
    message = log_like_text(2_000_000)
    tiny, a, b = (tmp_path / f"{name}.jsonl" for name in ("tiny", "a", "b"))
    write_transcript(tiny, "records", "a line\n")
    for f in (a, b):
        write_transcript(f, "records", message)

    def peak(*transcripts: Path) -> int:
        out = tmp_path / f"out-{len(transcripts)}"
        args = ["chunk", "--out", str(out), *map(str, transcripts)]
        r = subprocess.run(
            [sys.executable, "-c", _TRACED_PEAK, *args], capture_output=True, text=True, timeout=300
        )
        assert r.returncode == 0, r.stderr
        return int(r.stdout)

    one, two = peak(tiny, a), peak(tiny, a, b)
    held = sys.getsizeof(message)
    assert two - one < held / 2, f"heap peak {one} bytes for one file, {two} for two ({held})"


# ------------------------------------------------------------------ secrets


def planted_transcript(path: Path) -> dict[str, str]:
    """A records transcript holding fake secrets of the labelled set; kind -> secret."""
    cases = [json.loads(line) for line in LABELLED_SECRETS.read_text().splitlines()]
    chosen = {}
    for case in cases:
        for s in case["secrets"]:
            if s["kind"] in ("openai-key", "aws-key", "private-key", "url-password"):
                chosen.setdefault(s["kind"], (case["text"], s["value"]))
    lines = [{"role": "user", "text": "Why does my deploy fail?"}]
    lines += [{"role": "tool_result", "text": text} for text, _ in chosen.values()]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return {kind: value for kind, (_, value) in chosen.items()}


LABELLED_SECRETS = Path(__file__).resolve().parents[2] / "fixtures" / "secrets" / "labelled.jsonl"


def test_secrets_are_redacted_before_chunking_and_counted(tmp_path: Path) -> None:
    from grumem.core.redact import PLACEHOLDER
    from grumem.transcripts.redact import detector_identity, detector_label

    transcript = tmp_path / "planted.jsonl"
    planted = planted_transcript(transcript)
    root, manifest = tmp_path / "chunks", tmp_path / "chunked" / "s000.json"
    args = ("--budget", "200", "--units-under", str(root), "--manifest", str(manifest))
    r = run_cli(*args, "--detector", detector_label(), str(transcript), str(RECORDS))
    assert r.returncode == 0, r.stderr
    counts = "aws-key 1, openai-key 1, private-key 1, url-password 1"
    assert f"redacted: {counts}" in r.stderr
    assert "redacted: none" in r.stderr  # the sample records hold none
    document = json.loads(manifest.read_text())
    validate(document, "chunk-manifest")
    assert document["redaction"] == detector_identity()
    assert [t["redacted"] for t in document["transcripts"]] == [
        {"aws-key": 1, "openai-key": 1, "private-key": 1, "url-password": 1},
        {},
    ]
    text = "".join(p.read_text() for p in root.rglob("*.jsonl") if p.is_file())
    for secret in planted.values():
        assert json.dumps(secret)[1:-1] not in text and secret not in text
    assert len(PLACEHOLDER.findall(text)) == 4

    # --no-redact keeps them, and says so in the manifest
    plain = tmp_path / "plain.json"
    args = ("--budget", "200", "--units-under", str(tmp_path / "p"), "--manifest", str(plain))
    r = run_cli(*args, "--no-redact", str(transcript))
    assert r.returncode == 0, r.stderr
    assert "redacted:" not in r.stderr
    document = json.loads(plain.read_text())
    assert document["redaction"] is None and document["transcripts"][0]["redacted"] == {}
    text = "".join(p.read_text() for p in (tmp_path / "p").rglob("*.jsonl") if p.is_file())
    assert planted["aws-key"] in text


def test_a_job_planned_with_another_detector_refuses_to_chunk(tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = run_cli(
        "--out", str(out), "--detector", "kingfisher-secret-scanner==0.1+patterns.1", str(RECORDS)
    )
    assert r.returncode == 1
    assert (
        "--detector kingfisher-secret-scanner==0.1+patterns.1: the installed secret detector"
        in r.stderr
    )
    assert not out.exists()
