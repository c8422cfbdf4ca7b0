"""log.jsonl lines decoded and checked in one C pass (msgspec), for the export.

The structs below mirror workflow/schemas/log.schema.yaml (tests check that
every line they accept the schema accepts too). A line they refuse is not an
error yet: the caller re-reads it through the reference path
(grumem.io.jsonl: orjson or the stdlib, then the schema), which accepts it or
names the file, line and field. So the structs may be
stricter than the schema, never looser. They are read like the dicts they
replace (`line["t"]`, `line.get("response_model")`), so the export's code
takes either.

orjson plus the compiled schema took 77 µs a bench line (fastjsonschema's
`oneOf` raises an exception per branch tried), this 18 µs (a loaded 2-core
machine).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

__all__ = ["decode_line"]


class _Record(msgspec.Struct, frozen=True):
    """Read like a dict: `r["name"]`, `r.get("name")` (an absent optional field is None).

    `r["name"]` is the attribute lookup itself (a C slot, not a Python method: the
    export reads ~45 fields a line); every field is required but `response_model`,
    which is read with `get`."""

    __getitem__ = object.__getattribute__

    def get(self, name: str, default: Any = None) -> Any:
        value = getattr(self, name, default)
        return default if value is msgspec.UNSET else value


# Every value a struct holds is typed and no container of any depth: a line nested
# deeper than grumem.core.json_text.MAX_JSON_DEPTH is refused here before msgspec recurses (as
# far as Python's recursion limit), and the reference path names it.
Scalar = str | int | float | bool | None


class Request(_Record, frozen=True, forbid_unknown_fields=True):
    # the schema lets a request carry other keys; a line with one goes the reference way
    body: str
    sha256: str


class Response(_Record, frozen=True, forbid_unknown_fields=True):
    # the schema requires these keys but not their types: recording.py checks them
    attempt: Scalar
    status: Scalar
    body: Scalar
    sha256: Scalar
    latency_s: Scalar
    error: Scalar
    body_b64: Scalar | msgspec.UnsetType = msgspec.UNSET
    endpoint: Scalar | msgspec.UnsetType = msgspec.UNSET


class Abort(_Record, frozen=True):
    reason: Literal["budget", "request_failed"]
    component: str | None
    detail: str


Count = Annotated[int, msgspec.Meta(ge=0)]
Sha = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{64}$")]


class EarlierAsk(_Record, frozen=True, forbid_unknown_fields=True):
    ask: Count
    request: Request
    response: Response
    content: str | None
    finish_reason: str | None
    parsed: bool
    parse_error: dict[str, Scalar] | None


class LogLine(_Record, frozen=True, forbid_unknown_fields=True):
    trajectory_id: str
    project: str
    query_id: str
    session: str
    sample: Count
    level: Literal["L1", "L2"]
    model: str
    t: Annotated[int, msgspec.Meta(ge=1)]
    chunk_sha: Sha
    status: Literal["ok", "aborted"]
    abort: Abort | None
    asks: Count
    earlier_asks: list[EarlierAsk]
    memory_before: str | None
    memory_after: str | None
    request: Request | None
    response: Response | None
    content: str | None
    finish_reason: str | None
    parsed: bool
    update_gate: bool | None
    exit_gate: bool | None
    candidate: str | None
    think: str | None
    parse_error: dict[str, Scalar] | None
    response_model: str | None | msgspec.UnsetType = msgspec.UNSET


_DECODER = msgspec.json.Decoder(LogLine)


def decode_line(raw: bytes) -> LogLine | None:
    """The line as a checked LogLine; None when the structs refuse it (the caller's
    reference path then accepts it or says exactly why not)."""
    try:
        return _DECODER.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
