"""What the record classes cost: msgspec Structs against frozen dataclasses (not a test).

    .venv/bin/python scripts/bench_records.py [--lines 5000]

Writes the export bench's log lines (scripts/bench_export.py's generator, in a
temporary directory) and times, per line (CPU time, best of 5):

- decode and check into grumem.records.log.LogLine (a frozen msgspec Struct);
- decode and check into the same shape as frozen, slotted dataclasses (msgspec
  decodes those too: the same C parser, another container);
- orjson and the compiled schema (fastjsonschema), the reference path, to dicts;
- encode a LogLine (msgspec), the dataclass (msgspec), and the dict as
  grumem.io.jsonl.dumps_bytes writes it (orjson);
- read an attribute ~45 times a line, as the export does.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
import types
import typing
from pathlib import Path
from typing import Any

import msgspec
import msgspec.inspect as mi
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_export import generate  # noqa: E402

from grumem.io.jsonl import dumps_bytes, fast_validator  # noqa: E402
from grumem.records.base import Record  # noqa: E402
from grumem.records.log import LogLine  # noqa: E402


def as_dataclass(cls: type[Record], made: dict[type, type]) -> type:
    """The Struct's shape as a frozen, slotted dataclass, field for field."""
    if cls in made:
        return made[cls]
    hints = typing.get_type_hints(cls, include_extras=True)

    def convert(hint: Any) -> Any:
        if isinstance(hint, type) and issubclass(hint, Record):
            return as_dataclass(hint, made)
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin in (typing.Union, types.UnionType):
            return typing.Union[tuple(convert(a) for a in args)]  # noqa: UP007
        if origin is list:
            return list[convert(args[0])]  # type: ignore[misc]
        if origin is typing.Annotated:
            return typing.Annotated[(convert(args[0]), *hint.__metadata__)]
        return hint

    fields: list[Any] = []
    for f in mi.type_info(cls).fields:
        if f.required:
            fields.append((f.name, convert(hints[f.name])))
        else:
            # an optional field of a record defaults to ABSENT (msgspec's UNSET)
            default = msgspec.UNSET if f.default is msgspec.NODEFAULT else f.default
            fields.append((f.name, convert(hints[f.name]), dataclasses.field(default=default)))
    made[cls] = dataclasses.make_dataclass(
        cls.__name__, fields, frozen=True, slots=True, kw_only=True
    )
    return made[cls]


def per_line(f: Any, items: list[Any]) -> float:
    best = float("inf")
    for _ in range(5):
        t0 = time.process_time()
        for x in items:
            f(x)
        best = min(best, time.process_time() - t0)
    return best / len(items) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=5000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="grumem-bench-") as tmp:
        generate(Path(tmp), args.lines)
        lines = Path(tmp, "log.jsonl").read_bytes().splitlines()
    as_struct = msgspec.json.Decoder(LogLine).decode
    data_cls = as_dataclass(LogLine, {})
    as_data = msgspec.json.Decoder(data_cls).decode
    check = fast_validator("log")
    structs = [as_struct(x) for x in lines]
    datas = [as_data(x) for x in lines]
    dicts = [orjson.loads(x) for x in lines]
    assert [msgspec.json.encode(s) for s in structs] == [msgspec.json.encode(d) for d in datas]
    names = [n for n in LogLine.__struct_fields__ if n != "response_model"] * 2

    def reads(r: Any) -> None:
        for n in names:
            getattr(r, n)

    rows = [
        ("decode+check: msgspec Struct (LogLine)", per_line(as_struct, lines)),
        ("decode+check: msgspec into frozen dataclasses", per_line(as_data, lines)),
        (
            "decode+check: orjson + fastjsonschema (dicts)",
            per_line(lambda x: check(orjson.loads(x)), lines),
        ),
        ("encode: Struct, msgspec", per_line(msgspec.json.encode, structs)),
        ("encode: Struct, LogLine.encode (float check)", per_line(lambda s: s.encode(), structs)),
        ("encode: dataclass, msgspec", per_line(msgspec.json.encode, datas)),
        ("encode: dict, orjson (dumps_bytes)", per_line(dumps_bytes, dicts)),
        (f"read {len(names)} fields: Struct", per_line(reads, structs)),
        (f"read {len(names)} fields: dataclass", per_line(reads, datas)),
    ]
    size = sum(map(len, lines)) // len(lines)
    print(f"{len(lines)} log lines of the export bench, {size} bytes each")
    for name, us in rows:
        print(f"{name:50} {us:7.2f} µs/line")


if __name__ == "__main__":
    main()
