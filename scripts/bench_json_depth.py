"""What the JSON nesting check (grumem.core.json_text.MAX_JSON_DEPTH) costs the readers' hot paths.

    .venv/bin/python scripts/bench_json_depth.py

A value orjson parsed is walked level by level for its depth (grumem.core.json_text.value_depth);
the text is scanned (text_depth) only on the error path. Prints, per realistic input,
the time to parse (orjson.loads), to walk, the reader's whole call (json_line, or
loads for a document), and the walk as a share of the parse; then the typed log-line
decoder (msgspec, scalars only) and the error path on a 100,000-deep line.
"""

from __future__ import annotations

import json
import time
import timeit
from pathlib import Path

import orjson

from grumem.core.json_text import dumps, json_line, loads, text_depth, value_depth
from grumem.corpus.log_line import decode_line
from grumem.errors import NestingError

ROOT = Path(__file__).resolve().parents[1]
SOURCE = (ROOT / "src" / "grumem" / "jsonl.py").read_text(encoding="utf-8")


def per_call_us(f, number: int) -> float:
    # CPU time, not wall time: the figures hold on a machine shared with other jobs
    return min(timeit.repeat(f, number=number, repeat=7, timer=time.process_time)) / number * 1e6


def inputs() -> dict[str, bytes]:
    log = (ROOT / "fixtures" / "export" / "log.jsonl").read_bytes().splitlines()[0]
    line = json.loads(log)
    # a turn over a code-heavy chunk: ~20 KB of source in the prompt, code in the answer
    request = json.loads(line["request"]["body"])
    request["messages"][-1]["content"] += SOURCE[:20_000]
    line["request"]["body"] = dumps(request)
    line["content"] = line["think"] = SOURCE[20_000:23_000]
    code_log = dumps(line).encode()
    # a chunk of 200 short records, each with its source pointer
    records = [
        {"role": "user", "text": f"line {i}: ls -la", "source": {"file": "t.jsonl", "line": i}}
        for i in range(200)
    ]
    chunk = dumps({"session": "s", "index": 0, "records": records}).encode()
    # a whole-document transcript: OpenHands events, ~10 MB
    events = json.loads((ROOT / "fixtures/transcripts/openhands/sales-plot.json").read_bytes())
    doc = dumps(events * max(1, 10_000_000 // len(dumps(events)))).encode()
    return {
        "log line (fixture)": log,
        "log line, code-heavy chunk": code_log,
        "chunk line, 200 records": chunk,
        "transcript document": doc,
    }


def main() -> None:
    print(
        f"{'input':28} {'bytes':>10} {'parse µs':>10} {'walk µs':>9} {'reader µs':>10} walk/parse"
    )
    for name, data in inputs().items():
        n = 3 if len(data) > 1_000_000 else 2000
        value = orjson.loads(data)
        parse = per_call_us(lambda d=data: orjson.loads(d), n)
        walk = per_call_us(lambda v=value: value_depth(v), n)
        if name.startswith("transcript"):
            reader = per_call_us(lambda d=data: loads(d, "t.json", locate=True), n)
        else:
            reader = per_call_us(lambda d=data: json_line("f.jsonl", 1, d), n)
        share = walk / parse
        print(
            f"{name:28} {len(data):>10} {parse:>10.1f} {walk:>9.1f} {reader:>10.1f} {share:>9.0%}"
        )
    code_log = inputs()["log line, code-heavy chunk"]
    assert decode_line(code_log) is not None
    decode = per_call_us(lambda: decode_line(code_log), 2000)
    print(f"decode_line (msgspec, typed), code-heavy log line: {decode:.1f} µs")
    deep = b"[" * 100_000 + b"]" * 100_000
    assert text_depth(deep)[0] == 100_000

    def refuse() -> None:
        try:
            json_line("f.jsonl", 1, deep)
        except NestingError:
            return
        raise AssertionError("not refused")

    print(f"error path, a line 100,000 deep: {per_call_us(refuse, 5) / 1000:.1f} ms")


if __name__ == "__main__":
    main()
