"""JSON (and YAML) nested deeper than grumem.core.json_text.MAX_JSON_DEPTH: every reader refuses
it with one line naming the file, the line (or row) and the depth, before any parser
recurses that deep; at or below the limit every reader behaves as it does on any input.

The property test feeds nesting around the limit (limit - 1, limit, limit + 1, and
100,000 deep; arrays, objects and both; brackets, quotes and backslashes inside the
strings, which do not count) to each reader through its public entry."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from grumem.config.settings import (
    connection_from_json,
    load_queries,
    load_yaml,
    settings_from_args,
    settings_from_json,
)
from grumem.core.json_text import MAX_JSON_DEPTH, dumps, loads, sha256_text, text_depth, value_depth
from grumem.core.recording import chat_content
from grumem.corpus.kappa_gate import read_kappa
from grumem.corpus.log_reader import LogReader
from grumem.errors import GrumemError, NestingError
from grumem.io.chunk_files import manifest_chunks, read_chunk_file
from grumem.io.jsonl import read_jsonl
from grumem.io.labels import load_labels
from grumem.io.session_index import session_index
from grumem.llm.answers import SERVER_ERROR_CHARS, is_answer, response_model, server_error_text
from grumem.llm.cache import ResponseCache
from grumem.transcripts import FORMATS, read_transcript
from grumem.transcripts.base import tool_call_text_from_json
from support.checkout import FIXTURES_DIR
from support.script import ScriptError, load_script

LIMIT = MAX_JSON_DEPTH
T = FIXTURES_DIR / "transcripts"
PLACEHOLDER = '"@@NESTED@@"'

# ------------------------------------------------------------------ nested text


def nested_text(depth: int, kinds: str, decoy: str) -> str:
    """JSON nested `depth` deep: level i an array or an object as kinds[i % len] says
    ("a" or "o"), each holding a decoy string (brackets, quotes, backslashes) as an
    element or a key, the innermost value the decoy itself."""
    s = dumps(decoy)
    opens = []
    for i in range(depth):
        opens.append(f"[{s}," if kinds[i % len(kinds)] == "a" else f"{{{s}:")
    closes = ["]" if kinds[i % len(kinds)] == "a" else "}" for i in reversed(range(depth))]
    return "".join(opens) + s + "".join(closes)


def reference_depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(reference_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(reference_depth, value), default=0)
    return 0


KINDS = st.text(alphabet="ao", min_size=1, max_size=4)
DECOYS = st.text(alphabet='[]{}"\\ :,aé', max_size=6)
DEPTHS = st.one_of(
    st.integers(LIMIT - 2, LIMIT + 2), st.sampled_from([1, 1024, 1025, 3000, 100_000])
)


def the_depth_and_place_are_named(e: BaseException | str, depth: int, where: str | None) -> None:
    message = str(e)
    assert "\n" not in message, message
    assert f"nested {depth} deep" in message, message
    assert f"the limit is {LIMIT}" in message, message
    if where is not None:
        assert where in message, message


# ------------------------------------------------------------------ the scan


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab\n\u00e9'),
        lambda kids: (
            st.lists(kids, max_size=3) | st.dictionaries(st.text('[]{}"\\k'), kids, max_size=3)
        ),
        max_leaves=30,
    )
)
def test_the_scan_counts_brackets_outside_strings_as_a_parser_nests(value: Any) -> None:
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False, indent=1)):
        assert text_depth(text) == (reference_depth(value), None)
        assert text_depth(text.encode("utf-8")) == (reference_depth(value), None)
    assert value_depth(value) == reference_depth(value)


@given(depth=DEPTHS, kinds=KINDS, decoy=DECOYS)
@settings(max_examples=30, deadline=None)
def test_loads_refuses_past_the_limit_and_names_the_depth(
    depth: int, kinds: str, decoy: str
) -> None:
    text = nested_text(depth, kinds, decoy)
    assert text_depth(text)[0] == depth
    if depth <= LIMIT:
        assert value_depth(loads(text)) == depth
        return
    for data in (text, text.encode("utf-8")):
        with pytest.raises(NestingError) as e:
            loads(data, "doc.json", locate=True)
        assert e.value.depth == depth
        the_depth_and_place_are_named(e.value, depth, "doc.json:1:")
        assert isinstance(e.value, json.JSONDecodeError)  # as orjson's own refusal is


def test_a_document_names_the_line_where_it_passes_the_limit() -> None:
    # two levels of wrapper, the nesting from line 4
    text = '{\n "a": 1,\n "b": [\n' + nested_text(LIMIT + 5, "ao", "x") + "\n ]\n}\n"
    with pytest.raises(NestingError) as e:
        loads(text, "doc.json", locate=True)
    assert str(e.value).startswith(f"doc.json:4: JSON nested {LIMIT + 7} deep")
    assert (e.value.lineno, e.value.depth) == (4, LIMIT + 7)


# ------------------------------------------------------------------ every reader


@dataclass
class Case:
    """A reader fed `nested` where it reads JSON: `wrapper` levels are around it;
    `accepts` says what the reader does at or below the limit (else it refuses the
    input for a reason of its own); `where` is how its error names the place."""

    name: str
    wrapper: int
    build: Callable[[Path, str], tuple[Callable[[], Any], str | None]]
    accepts: bool = True


def _jsonl_with(tmp: Path, name: str, lines: list[str], k: int, nested: str) -> Path:
    """`lines` with the object on line k (from 1) given an extra key holding `nested`."""
    obj = json.loads(lines[k - 1])
    obj["extra_key"] = "@@NESTED@@"
    lines = list(lines)
    lines[k - 1] = dumps(obj).replace(PLACEHOLDER, nested)
    path = tmp / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _doc_with(tmp: Path, name: str, doc: Any, nested: str) -> tuple[Path, int]:
    """The document, pretty-printed, its first object (itself or its first element)
    given an extra key holding `nested`; and the line that key is on."""
    target = doc if isinstance(doc, dict) else doc[0]
    target["extra_key"] = "@@NESTED@@"
    text = json.dumps(doc, indent=1, ensure_ascii=False)
    line = text[: text.index(PLACEHOLDER)].count("\n") + 1
    path = tmp / name
    path.write_text(text.replace(PLACEHOLDER, nested), encoding="utf-8")
    return path, line


def _sessions(path: Path, fmt: str) -> Callable[[], Any]:
    return lambda: [s.records for s in read_transcript(path, fmt)[1]]


def _jsonl_transcript(fmt: str, fixture: Path) -> Case:
    def build(tmp: Path, nested: str) -> tuple[Callable[[], Any], str]:
        lines = fixture.read_text(encoding="utf-8").splitlines()
        path = _jsonl_with(tmp, fixture.name, lines, 2, nested)
        return _sessions(path, fmt), f"{path}:2:"

    return Case(f"{fmt} ({fixture.suffix})", 1, build)


def _doc_transcript(fmt: str, fixture: Path, detect: bool = False) -> Case:
    doc = json.loads(fixture.read_text(encoding="utf-8"))

    def build(tmp: Path, nested: str) -> tuple[Callable[[], Any], str]:
        path, line = _doc_with(tmp, fixture.name, json.loads(json.dumps(doc)), nested)
        return _sessions(path, "auto" if detect else fmt), f"{path}:{line}:"

    return Case(
        f"{fmt} ({fixture.suffix}{', auto' if detect else ''})", 1 + isinstance(doc, list), build
    )


def _plain_jsonl(tmp: Path, nested: str) -> tuple[Callable[[], Any], str]:
    path = _jsonl_with(tmp, "r.jsonl", ['{"a": 1}', '{"b": 2}', '{"c": 3}'], 2, nested)
    return lambda: list(read_jsonl(path)), f"{path}:2:"


def _chunks(tmp: Path, nested: str) -> tuple[Callable[[], Any], str]:
    # records may carry extra fields: the nesting sits in one (line > records > record)
    record = {"role": "user", "text": "hi", "extra_key": "@@NESTED@@"}
    first = dumps({"session": "s", "index": 0, "records": [{"role": "user", "text": "a"}]})
    second = dumps({"session": "s", "index": 1, "records": [record]})
    path = tmp / "s.jsonl"
    path.write_text(first + "\n" + second.replace(PLACEHOLDER, nested) + "\n", encoding="utf-8")
    return lambda: read_chunk_file(path), f"{path}:2:"


def _labels(tmp: Path, nested: str) -> tuple[Callable[[], Any], str]:
    line = dumps({"query_id": "q", "chunk_sha": "0" * 64, "evidence": True, "annotator": "a"})
    path = _jsonl_with(tmp, "labels.jsonl", [line, line.replace('"q"', '"q2"')], 2, nested)
    return lambda: load_labels(path), f"{path}:2:"


def _log(tmp: Path, nested: str) -> tuple[Callable[[], Any], str]:
    # the export's reader: its typed one-pass decoder refuses the line, the reference
    # path names it (no field of a log line holds a value of any shape: even a shallow
    # one is refused, by the schema)
    lines = (FIXTURES_DIR / "export" / "log.jsonl").read_text(encoding="utf-8").splitlines()
    obj = json.loads(lines[1])
    obj["parse_error"] = {"tag": "check", "extra_key": "@@NESTED@@"}
    lines[1] = dumps(obj).replace(PLACEHOLDER, nested)
    path = tmp / "log.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return lambda: list(LogReader(str(path))), f"{path}:2:"


def _dataset_cell(tmp: Path, nested: str) -> tuple[Callable[[], Any], str]:
    messages = dumps([{"role": "user", "content": "hi", "extra_key": "@@NESTED@@"}])
    cell = messages.replace(PLACEHOLDER, nested)
    path = tmp / "d.jsonl"
    path.write_text(dumps({"messages": cell}) + "\n", encoding="utf-8")
    return _sessions(path, "trajectory-dataset"), f"{path}:1: field 'messages'"


def _dataset_parquet_cell(tmp: Path, nested: str) -> tuple[Callable[[], Any], str]:
    messages = dumps([{"role": "user", "content": "hi", "extra_key": "@@NESTED@@"}])
    path = tmp / "d.parquet"
    pq.write_table(pa.table({"messages": [messages.replace(PLACEHOLDER, nested)]}), path)
    return _sessions(path, "trajectory-dataset"), f"{path}: field 'messages' (row 0)"


def _cache(tmp: Path, nested: str) -> tuple[Callable[[], Any], str]:
    body = '{"choices":[{"message":{"content":"x"}}]}'
    attempt = {
        "attempt": 1,
        "status": 200,
        "body": body,
        "sha256": sha256_text(body),
        "latency_s": 0.1,
        "error": None,
    }
    sha = "ab" * 32
    cache = ResponseCache(tmp / "cache")
    path = cache.put(sha, [attempt])
    entry = json.loads(path.read_text(encoding="utf-8"))
    entry["extra_key"] = "@@NESTED@@"
    path.write_text(dumps(entry).replace(PLACEHOLDER, nested) + "\n", encoding="utf-8")
    return lambda: cache.get(sha), str(path)


def _settings(tmp: Path, nested: str) -> tuple[Callable[[], Any], str]:
    text = dumps({"llm": {"extra_key": "@@NESTED@@"}}).replace(PLACEHOLDER, nested)
    return lambda: settings_from_json(text), "--settings: bad JSON:"


def _connection(tmp: Path, nested: str) -> tuple[Callable[[], Any], str]:
    text = dumps({"timeout": "@@NESTED@@"}).replace(PLACEHOLDER, nested)
    return lambda: connection_from_json(text), "--connection: bad JSON:"


def _kappa(tmp: Path, nested: str) -> tuple[Callable[[], Any], str]:
    path, line = _doc_with(tmp, "kappa.json", {"kappa": 0.9, "n": 10}, nested)
    return lambda: read_kappa(path), f"{path}:{line}:"


def _manifest(tmp: Path, nested: str) -> tuple[Callable[[], Any], str]:
    path, line = _doc_with(tmp, "shard.json", {"transcripts": []}, nested)
    return lambda: manifest_chunks(path), f"{path}:{line}:"


def _chat_content(tmp: Path, nested: str) -> tuple[Callable[[], Any], None]:
    body = dumps({"choices": [{"message": {"content": "x"}}], "zz": "@@NESTED@@"})
    return lambda: chat_content(body.replace(PLACEHOLDER, nested)), None


def _is_answer(tmp: Path, nested: str) -> tuple[Callable[[], Any], None]:
    # a server's answer: too deep is a failed attempt with its reason, not a crash
    body = dumps({"choices": [{"message": {"content": "x"}}], "zz": "@@NESTED@@"})
    ok, why = is_answer(200, body.replace(PLACEHOLDER, nested).encode("utf-8"))

    def outcome() -> Any:
        if not ok:
            raise GrumemError(why)
        return ok

    return outcome, "HTTP 200 but the body is not JSON:"


def _transcript_cases() -> list[Case]:
    cases = []
    for fmt in FORMATS:
        if fmt == "aider":
            continue  # Markdown: no JSON to nest
        # JSON files only: not a parquet or a SQLite store (their JSON sits in columns),
        # not a folder's SOURCES.md or a store's subfolders
        fixtures = sorted(
            p
            for p in (T / fmt).iterdir()
            if p.is_file()
            and p.suffix not in (".parquet", ".md")
            and p.read_bytes()[:16] != b"SQLite format 3\x00"
        )
        for fixture in {p.suffix: p for p in fixtures}.values():
            if fixture.suffix == ".jsonl":
                cases.append(_jsonl_transcript(fmt, fixture))
            else:
                cases.append(_doc_transcript(fmt, fixture))
    cases.append(_doc_transcript("openai", T / "openai" / "staging-port.json", detect=True))
    cases.append(
        _jsonl_transcript(
            "auto", T / "claude-code" / next(p.name for p in (T / "claude-code").iterdir())
        )
    )
    return cases


CASES = [
    Case("read_jsonl", 1, _plain_jsonl),
    Case("chunk file", 3, _chunks),
    Case("labels", 1, _labels, accepts=False),
    Case("log (export)", 2, _log, accepts=False),
    Case("trajectory-dataset JSON cell", 2, _dataset_cell),
    Case("trajectory-dataset Parquet cell", 2, _dataset_parquet_cell),
    Case("cache entry", 1, _cache),
    Case("--settings", 2, _settings, accepts=False),
    Case("--connection", 1, _connection, accepts=False),
    Case("kappa.json", 1, _kappa, accepts=False),
    Case("chunk manifest", 1, _manifest, accepts=False),
    Case("response body (chat_content)", 1, _chat_content),
    Case("response body (is_answer)", 1, _is_answer),
    *_transcript_cases(),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@given(depth=DEPTHS, kinds=KINDS, decoy=DECOYS)
@example(depth=LIMIT - 1, kinds="a", decoy="[[")
@example(depth=LIMIT, kinds="ao", decoy='"{')
@example(depth=LIMIT + 1, kinds="o", decoy="]\\")
@example(depth=100_000, kinds="aoo", decoy='\\"[')
@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_every_reader_refuses_nesting_past_the_limit(
    case: Case, tmp_path_factory: pytest.TempPathFactory, depth: int, kinds: str, decoy: str
) -> None:
    if depth <= case.wrapper:
        return
    tmp = tmp_path_factory.mktemp("nested")
    run, where = case.build(tmp, nested_text(depth - case.wrapper, kinds, decoy))
    try:
        run()
    except (GrumemError, ValueError, ScriptError) as e:
        if depth <= LIMIT:
            assert not case.accepts, f"{case.name} refused what it reads: {e}"
            assert "the limit is" not in str(e), str(e)
        else:
            the_depth_and_place_are_named(e, depth, where)
    else:
        assert depth <= LIMIT, f"{case.name} read JSON nested {depth} deep"
        assert case.accepts, f"{case.name} accepted what it refuses"


# ------------------------------------------------------------------ YAML


def yaml_nested(depth: int, kinds: str, block: bool) -> str:
    """YAML nested `depth` deep, in flow style (`[`, `{k: `) or block style (indented)."""
    if not block:
        opens = ["[" if kinds[i % len(kinds)] == "a" else "{'[k': " for i in range(depth)]
        closes = ["]" if kinds[i % len(kinds)] == "a" else "}" for i in reversed(range(depth))]
        return "".join(opens) + "'{x'" + "".join(closes) + "\n"
    lines = [" " * i + ("- " if kinds[i % len(kinds)] == "a" else "k:") for i in range(depth)]
    return "\n".join(lines) + "\n" + " " * depth + "'{x'\n"


def _yaml_readers(path: Path) -> list[tuple[Callable[[], Any], bool]]:
    """(reader, whether its error is one line): the fake server's scripts (tests/support)
    use grumem's loader, their error shows PyYAML's own, several lines long."""
    return [
        (lambda: load_yaml(path), True),
        (lambda: load_queries(path), True),
        (lambda: load_script(path), False),
    ]


@given(
    depth=st.one_of(st.integers(LIMIT - 2, LIMIT + 2), st.sampled_from([1000, 100_000])),
    kinds=KINDS,
    block=st.booleans(),
)
@example(depth=100_000, kinds="a", block=False)
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_yaml_readers_refuse_nesting_past_the_limit(
    tmp_path: Path, depth: int, kinds: str, block: bool
) -> None:
    # block style takes depth**2 / 2 bytes of indentation: around the limit only
    assume(not block or depth <= LIMIT + 2)
    path = tmp_path / "deep.yaml"
    path.write_text(yaml_nested(depth, kinds, block), encoding="utf-8")
    if depth <= LIMIT:
        assert load_yaml(path) is not None
        return
    for read, one_line in _yaml_readers(path):
        with pytest.raises((GrumemError, ScriptError)) as e:
            read()
        message = str(e.value)
        assert "\n" not in message or not one_line, message
        assert f"YAML nested more than {LIMIT} deep" in message, message
        assert str(path) in message, message


def test_yaml_aliases_count_as_deep_as_their_anchors(tmp_path: Path) -> None:
    # each line nests one level more through an alias: deep values in a short file
    chain = ["l0: &l0 [x]", *(f"l{i}: &l{i} [*l{i - 1}]" for i in range(1, LIMIT + 5))]
    path = tmp_path / "chain.yaml"
    path.write_text("\n".join(chain) + "\n", encoding="utf-8")
    with pytest.raises(GrumemError) as e:
        load_yaml(path)
    # line 256 (l255) holds a value 256 deep, one level more inside the top mapping
    assert str(e.value).startswith(f"{path}:{LIMIT}: bad YAML: YAML nested more than {LIMIT}")
    path.write_text("\n".join(chain[: LIMIT - 1]) + "\n", encoding="utf-8")
    assert len(load_yaml(path)) == LIMIT - 1


def test_a_yaml_alias_inside_its_own_anchor_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cycle.yaml"
    path.write_text("projects:\n  demo: &a\n    chunks: [*a]\n", encoding="utf-8")
    with pytest.raises(GrumemError) as e:
        load_yaml(path)
    assert str(e.value).startswith(f"{path}:3: bad YAML: the alias *a is inside its own anchor")


# ------------------------------------------------------------------ end to end


def test_grumem_chunk_on_a_transcript_nested_100000_deep(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"messages": ' + "[" * 100_000 + "]" * 100_000 + "}\n", encoding="utf-8")
    for fmt in ("auto", "openai"):
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "grumem",
                "chunk",
                "--format",
                fmt,
                "--out",
                str(tmp_path / "o"),
                str(deep),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 1, r.stdout + r.stderr
        assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
        assert f"{deep}:1: JSON nested 100001 deep" in r.stderr, r.stderr
        assert f"the limit is {LIMIT}" in r.stderr, r.stderr
        assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


# ------------------------------------------------------------------ readers that skip bad JSON


@pytest.mark.parametrize("depth", [LIMIT - 1, LIMIT, LIMIT + 1, 100_000])
def test_readers_that_pass_over_bad_json_pass_over_deep_json(tmp_path: Path, depth: int) -> None:
    nested = "[" * depth + "]" * depth
    # a tool call's arguments that do not parse are shown as the model wrote them
    shown = tool_call_text_from_json("f", nested)
    assert shown == f"Tool call f: {nested if depth > LIMIT else dumps(json.loads(nested))}"
    # a server's error body, and the model an answer names
    error = f"HTTP 500: {nested[: SERVER_ERROR_CHARS - 1]}…"
    assert server_error_text(500, nested.encode()) == error
    # (one level more inside an object)
    assert response_model(f'{{"model": "m", "x": {nested}}}') == (None if depth >= LIMIT else "m")
    # the session index leaves a line it cannot read to the prompts job, which names it
    chunks = tmp_path / "c.jsonl"
    good = dumps({"session": "s1", "index": 0, "records": []})
    chunks.write_text(f'{good}\n{{"session": "s2", "x": {nested}}}\n', encoding="utf-8")
    sessions = [r.session for r in session_index([chunks])]
    assert sessions == (["s1"] if depth >= LIMIT else ["s1", "s2"])


def test_the_judge_settings_name_the_flag(tmp_path: Path) -> None:
    settings = '{"labels": {"path": "x"}, "llm": {"x": ' + "[" * 100_000 + "]" * 100_000 + "}}"
    args = argparse.Namespace(settings=settings, connection=None, config=None, project="p")
    with pytest.raises(GrumemError) as e:
        settings_from_args(args, labels_of=args.project)
    assert str(e.value).startswith("--settings: bad JSON: JSON nested 100002 deep")


def test_a_parquet_schema_nested_past_pyarrows_limit_names_the_file(tmp_path: Path) -> None:
    # pyarrow refuses a schema deeper than 100 nodes itself; the reader says so in one line
    value: Any = "x"
    for _ in range(60):
        value = [value]
    path = tmp_path / "deep.parquet"
    pq.write_table(pa.table({"messages": [[{"role": "user", "content": "hi", "x": value}]]}), path)
    for fmt in ("auto", "trajectory-dataset"):
        with pytest.raises(GrumemError) as e:
            _sessions(path, fmt)()
        assert str(e.value).startswith(f"{path}: cannot be read as Parquet: ")
        assert "too deeply nested" in str(e.value) and "\n" not in str(e.value)
