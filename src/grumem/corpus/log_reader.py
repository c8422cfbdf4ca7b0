"""The turn log as the export reads it: validated lines with their numbers, checked
across fields, grouped into trajectories; each turn's prompt and response taken
from its sha-checked recording (grumem.core.recording), never re-assembled."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from grumem.core.recording import body_json, check_request, recorded_content
from grumem.errors import RecordError
from grumem.io.jsonl import open_input
from grumem.io.typed import decode_line
from grumem.records.log import EarlierAsk, LogLine
from grumem.records.response import Request
from grumem.records.trajectory import Aborted, Message, TrajectoryEarlierAsk

# the fields every line of a trajectory repeats
TRAJECTORY_FIELDS = ("project", "query_id", "session", "sample", "level", "model")


@dataclass
class LogReader:
    """The log's lines as checked LogLines with their line numbers; hashes the bytes
    as it goes (unless `hash` is false)."""

    path: str
    sha256: Any = field(default_factory=hashlib.sha256)
    hash: bool = True

    def __iter__(self) -> Iterator[tuple[int, LogLine]]:
        path, update = self.path, self.sha256.update
        with open_input(path) as f:
            for lineno, raw in enumerate(f, start=1):
                if self.hash:
                    update(raw)
                yield lineno, decode_line(path, lineno, raw, LogLine)


@dataclass
class LogTrajectory:
    """The lines of one trajectory: its trainable turns and the abort line, if any."""

    turns: list[tuple[int, LogLine]]
    abort: tuple[int, LogLine] | None

    @property
    def first_line(self) -> tuple[int, LogLine]:
        """(line number, record) of its first line: a turn, or the abort of one without."""
        line = self.turns[0] if self.turns else self.abort
        assert line is not None  # group_trajectories makes none without a line
        return line

    @property
    def first(self) -> LogLine:
        return self.first_line[1]

    @property
    def aborted(self) -> Aborted | None:
        """Where and why the trajectory was cut short (None: it was not), as the corpus
        says it."""
        if self.abort is None:
            return None
        line = self.abort[1]
        assert line.abort is not None  # check_line: an aborted line says why
        return Aborted(t=line.t, reason=line.abort.reason, component=line.abort.component)


def group_trajectories(path: str, lines: Iterator[tuple[int, LogLine]]) -> Iterator[LogTrajectory]:
    """Contiguous runs of one trajectory_id, checked: t = 1, 2, … with no gap, the
    trajectory's fields constant, nothing after an abort, no id seen twice."""
    seen: set[str] = set()  # ids only: grows with trajectories, not with turns
    current: LogTrajectory | None = None
    for lineno, rec in lines:
        check_line(path, lineno, rec)
        tid = rec.trajectory_id
        if current is not None and tid != current.first.trajectory_id:
            yield current
            current = None
        if current is None:
            if tid in seen:
                raise RecordError(
                    path,
                    lineno,
                    "trajectory_id",
                    f"trajectory {tid!r} appears again after other trajectories:"
                    " the log must hold each trajectory's lines together",
                )
            seen.add(tid)
            current = LogTrajectory([], None)
            expected_t = 1
        else:
            if current.abort is not None:
                raise RecordError(
                    path,
                    lineno,
                    "status",
                    f"trajectory {tid!r} continues after its abort at line {current.abort[0]}",
                )
            first = current.first
            for name in TRAJECTORY_FIELDS:
                if getattr(rec, name) != getattr(first, name):
                    raise RecordError(
                        path,
                        lineno,
                        name,
                        f"{getattr(rec, name)!r} differs from {getattr(first, name)!r}"
                        f" earlier in trajectory {tid!r}",
                    )
            expected_t = current.turns[-1][1].t + 1
        if rec.t != expected_t:
            raise RecordError(
                path,
                lineno,
                "t",
                f"trajectory {tid!r} expects t={expected_t} here, found {rec.t}"
                " (turns must be contiguous and ascending from 1)",
            )
        if rec.status == "aborted":
            current.abort = (lineno, rec)
        else:
            current.turns.append((lineno, rec))
    if current is not None:
        yield current


def check_line(path: str, lineno: int, rec: LogLine) -> None:
    """Cross-field rules the log schema cannot say."""
    if rec.status == "aborted":
        if rec.abort is None:
            raise RecordError(path, lineno, "abort", "an aborted turn must say why (abort is null)")
        return
    for name in ("request", "response"):
        if getattr(rec, name) is None:
            raise RecordError(path, lineno, name, f"status is ok but {name} is null")
    if rec.abort is not None:
        raise RecordError(path, lineno, "abort", "status is ok but abort is set")
    gates = (rec.update_gate, rec.exit_gate)
    if rec.parsed and not all(isinstance(g, bool) for g in gates):
        raise RecordError(path, lineno, "update_gate", "parsed is true but a gate is null")
    if not rec.parsed and any(g is not None for g in gates):
        raise RecordError(
            path,
            lineno,
            "update_gate",
            "parsed is false but a gate is recorded: no gate is ever defaulted",
        )


def recorded_messages(path: str, lineno: int, request: Request) -> list[Message]:
    """The chat messages exactly as sent: the recorded body, verified, never rebuilt."""
    body = check_request(path, lineno, request)
    try:
        messages = body_json(body)["messages"]
    except (json.JSONDecodeError, TypeError, KeyError) as e:
        raise RecordError(
            path,
            lineno,
            "request.body",
            f"not a chat request body with messages ({type(e).__name__}: {e})",
        ) from None
    if not isinstance(messages, list) or not messages:
        raise RecordError(path, lineno, "request.body", "messages is not a non-empty list")
    for i, m in enumerate(messages):
        if (
            not isinstance(m, dict)
            or set(m) != {"role", "content"}
            or not isinstance(m["role"], str)
            or not isinstance(m["content"], str)
        ):
            raise RecordError(
                path,
                lineno,
                f"request.body.messages.{i}",
                "expected {role, content} with string values",
            )
    return [Message(role=m["role"], content=m["content"]) for m in messages]


def response_text(path: str, lineno: int, field: str, ask: LogLine | EarlierAsk) -> str | None:
    """The assistant text of one recorded ask, derived from its sha-checked body; the
    log's `content` must say the same (it is what the gates were parsed from)."""
    text = recorded_content(path, lineno, ask.response)
    if text != ask.content:
        raise RecordError(
            path,
            lineno,
            field,
            "differs from the assistant text of the recorded response body: the log was"
            " edited; the export takes the text from the recording only (restore the log"
            " or rerun rule `log`)",
        )
    return text


def earlier_ask(path: str, lineno: int, field: str, ask: EarlierAsk) -> TrajectoryEarlierAsk:
    """An ask before the turn's last, as the corpus keeps it: checked like the last."""
    check_request(path, lineno, ask.request)
    if ask.parsed:
        raise RecordError(
            path,
            lineno,
            f"{field}.parsed",
            "an earlier ask parsed, yet the turn was asked again: the loop re-asks only"
            " after a parse failure",
        )
    return TrajectoryEarlierAsk(
        ask=ask.ask,
        request_sha256=ask.request.sha256,
        response=response_text(path, lineno, f"{field}.content", ask),
        parsed=ask.parsed,
        parse_error=ask.parse_error,
    )
