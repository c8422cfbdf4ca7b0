"""Trajectory datasets: Parquet or JSON Lines, one trajectory per row, its messages in a column.

Read from the shape of the public agent-trajectory datasets on the Hugging
Face hub as their dataset cards list their features (2025):
nebius/SWE-agent-trajectories (`instance_id`, `trajectory`: a list of
`{role, text, ...}` with roles `system`, `user`, `ai`) and
SWE-Gym/OpenHands-SFT-Trajectories and SWE-bench/SWE-smith-trajectories
(`messages`: OpenAI chat messages `{role, content, tool_calls?, ...}`; in
some releases the column is the messages as a JSON string).

Options (config `transcripts.messages_field` / `id_field` / `text_field`,
`grumem chunk --messages-field` / `--id-field` / `--text-field`):
- messages_field: the column holding the messages; unset, the first of
  `messages`, `trajectory` a file has.
- id_field: the column naming the session; unset, the session is
  `<file stem>-<row>` (rows count from 0). Public datasets repeat an
  instance id over several models' runs, so a repeated id is an error
  naming both rows, never a silent overwrite.
- text_field: the message key holding the text (`content` or `text`);
  unset, `content` when a message has one, else `text`.

Each row is one Session; a message maps as in the OpenAI reader (roles
system/developer, user, assistant, tool/function; `ai` is assistant and
`human` user; tool calls, reasoning and image parts the same way). Keys a
message has besides role, text and the OpenAI ones (`mask`,
`system_prompt`, `cutoff_date`) are the dataset's bookkeeping.

Parquet is read with pyarrow in batches of rows (`iter_batches`, only the
two columns needed), so a multi-GB file streams: sessions are made one at
a time as the chunk stage asks for them. JSON Lines is read line by line
with the json module rather than pyarrow's reader, whose type inference
refuses a column that is a string in one row and a list in the next (a
message's content often is); it streams the same way and names the line.
Errors name the file, the line (JSON Lines) or row (Parquet), and the
field as a path (`messages[3].content`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from typing import Any

from grumem.core.json_text import stdlib_loads
from grumem.errors import NestingError, RecordError
from grumem.transcripts.base import (
    Detection,
    Head,
    NotThisFormat,
    Session,
    SessionStream,
    is_not,
    iter_json_objects,
    kind_of,
    session_stem,
)
from grumem.transcripts.formats.openai_chat import ROLE_MAP, convert_message

NAME = "trajectory-dataset"
OPTIONS = ("messages_field", "id_field", "text_field")
MESSAGES_FIELDS = ("messages", "trajectory")
TEXT_FIELDS = ("content", "text")
SUFFIXES = (".parquet", ".jsonl", ".json")
PARQUET_MAGIC = b"PAR1"
BATCH_ROWS = 64
_ROLES = {**ROLE_MAP, "ai": "assistant", "human": "user"}


def is_parquet(path: str | os.PathLike[str]) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == PARQUET_MAGIC


def detect(path: str | os.PathLike[str], head: Head) -> Detection:
    if is_parquet(path):
        names = _parquet_file(path).schema_arrow.names
        if any(f in names for f in MESSAGES_FIELDS):
            return True
        return NotThisFormat(f"a Parquet file without a {' or '.join(MESSAGES_FIELDS)} column")
    row = head.first_line
    if not isinstance(row, dict):
        return NotThisFormat(is_not("not Parquet, and the first line", row, "an object"))
    for field in MESSAGES_FIELDS:
        messages = row.get(field)
        if isinstance(messages, str):  # the messages as a JSON string
            try:
                messages = stdlib_loads(messages, path, 1, field)
            except NestingError:
                raise
            except json.JSONDecodeError:
                continue
        if (
            isinstance(messages, list)
            and messages
            and all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages)
        ):
            return True
    return NotThisFormat(
        f"the first line has no {' or '.join(MESSAGES_FIELDS)} list of messages with a role"
    )


def read(
    path: str | os.PathLike[str],
    drop_thinking: bool,
    messages_field: str | None = None,
    id_field: str | None = None,
    text_field: str | None = None,
) -> SessionStream:
    path = str(path)
    if text_field is not None and text_field not in TEXT_FIELDS:
        raise RecordError(
            path, None, None, f"text_field {text_field!r}: expected one of {', '.join(TEXT_FIELDS)}"
        )
    if is_parquet(path):
        count, rows = _parquet_rows(path, messages_field, id_field)
        where = "row"
    else:
        count, rows = _json_lines_rows(path, messages_field, id_field)
        where = "line"

    def sessions() -> Iterator[Session]:
        seen: dict[str, int] = {}
        stem = session_stem(path, SUFFIXES)
        for n, (at, field, messages, sid) in enumerate(rows()):
            line = at if where == "line" else None
            if id_field is None:
                sid = f"{stem}-{n}"
            elif not isinstance(sid, (str, int)) or isinstance(sid, bool):
                raise _error(
                    path,
                    where,
                    at,
                    id_field,
                    f"expected a string or number, found {type(sid).__name__}",
                )
            sid = str(sid)
            if sid in seen:
                why = (
                    f"{sid!r} again (first at {where} {seen[sid]}): ids must be unique;"
                    " leave id_field unset to name sessions by row"
                )
                raise _error(path, where, at, id_field, why)
            seen[sid] = at
            yield _session(path, where, at, line, field, messages, sid, text_field, drop_thinking)

    return SessionStream(count, sessions)


def _error(path: str, where: str, at: int, field: str | None, why: str) -> RecordError:
    if where == "line":
        return RecordError(path, at, field, why)
    return RecordError(path, None, field, f"(row {at}) {why}")


def _session(
    path: str,
    where: str,
    at: int,
    line: int | None,
    field: str,
    messages: Any,
    sid: str,
    text_field: str | None,
    drop_thinking: bool,
) -> Session:
    if isinstance(messages, str):
        try:
            messages = stdlib_loads(messages)
        except NestingError as e:
            raise _error(path, where, at, field, e.why) from None
        except json.JSONDecodeError as e:
            raise _error(path, where, at, field, f"a string that is not JSON: {e.msg}") from None
    if not isinstance(messages, list):
        raise _error(
            path, where, at, field, f"expected a list of messages, found {kind_of(messages)}"
        )
    session = Session(sid)
    tool_names: dict[str, str] = {}
    base = {"file": path, where: at}
    for i, msg in enumerate(messages):
        mwhere = f"{field}[{i}]"
        try:
            convert_message(
                _with_content(msg, text_field, mwhere, path),
                mwhere,
                path,
                {**base, "index": i},
                drop_thinking,
                session.records,
                session.skipped,
                tool_names,
                _ROLES,
            )
        except RecordError as e:
            if where == "line":
                raise RecordError(path, line, e.field, e.why) from None
            raise RecordError(path, None, e.field, f"(row {at}) {e.why}") from None
    return session


def _with_content(msg: Any, text_field: str | None, where: str, path: str) -> Any:
    """The message with its text under `content`, where the OpenAI reader looks."""
    if not isinstance(msg, dict):
        return msg
    key = text_field or ("content" if msg.get("content") is not None else "text")
    if key == "content":
        return msg
    if text_field is not None and key not in msg:
        raise RecordError(path, None, f"{where}.{key}", "missing (text_field)")
    return {**msg, "content": msg.get(key)}


def _pick(names: list[str], wanted: str | None, path: str) -> str:
    if wanted is not None:
        if wanted not in names:
            raise RecordError(path, None, wanted, f"no such column (columns: {', '.join(names)})")
        return wanted
    for f in MESSAGES_FIELDS:
        if f in names:
            return f
    why = f"no {' or '.join(MESSAGES_FIELDS)} column; set messages_field"
    raise RecordError(path, None, MESSAGES_FIELDS[0], why)


# (rows, a function iterating (row number, messages field, messages, id) over them)
Rows = tuple[int, Callable[[], Iterator[tuple[int, str, Any, Any]]]]


def _parquet_file(path: str | os.PathLike[str]) -> Any:
    """The Parquet file opened; what pyarrow refuses (a schema nested deeper than its
    limit of 100 nodes, a damaged footer) is a RecordError naming the file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(os.fspath(path))
    except (OSError, pa.ArrowException) as e:
        raise RecordError(path, None, None, f"cannot be read as Parquet: {e}") from None


def _parquet_rows(path: str, messages_field: str | None, id_field: str | None) -> Rows:
    pf = _parquet_file(path)
    names = pf.schema_arrow.names
    field = _pick(names, messages_field, path)
    if id_field is not None and id_field not in names:
        raise RecordError(path, None, id_field, f"no such column (columns: {', '.join(names)})")
    columns = [field] + ([id_field] if id_field is not None else [])

    def rows() -> Iterator[tuple[int, str, Any, Any]]:
        n = 0
        for batch in _parquet_file(path).iter_batches(batch_size=BATCH_ROWS, columns=columns):
            for row in batch.to_pylist():
                yield n, field, _no_nulls(row[field]), row.get(id_field) if id_field else None
                n += 1

    return pf.metadata.num_rows, rows


def _no_nulls(value: Any) -> Any:
    """Arrow gives every message every key of the column's struct, null where a message
    had none; dropping them gives back the message as written."""
    if isinstance(value, list):
        return [_no_nulls(v) for v in value]
    if isinstance(value, dict):
        return {k: _no_nulls(v) for k, v in value.items() if v is not None}
    return value


def _json_lines_rows(path: str, messages_field: str | None, id_field: str | None) -> Rows:
    count = 0
    with open(path, "rb") as f:
        for raw in f:
            count += bool(raw.strip())

    def rows() -> Iterator[tuple[int, str, Any, Any]]:
        for lineno, row in iter_json_objects(path):
            field = messages_field or next((f for f in MESSAGES_FIELDS if f in row), None)
            if field is None or field not in row:
                why = "missing; set messages_field" if field is None else "missing"
                raise RecordError(path, lineno, field or MESSAGES_FIELDS[0], why)
            if id_field is not None and id_field not in row:
                raise RecordError(path, lineno, id_field, "missing")
            yield lineno, field, row[field], row.get(id_field) if id_field else None

    return count, rows
