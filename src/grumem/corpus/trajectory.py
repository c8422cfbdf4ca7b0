"""Reward assembly: one trajectory's log lines and labels -> its corpus
record (rewards from grumem.core.rewards, r_outcome null), joined by chunk_sha."""

from __future__ import annotations

from typing import Any

import fastjsonschema

from grumem.core.evidence import Labels
from grumem.core.json_text import dumps_bytes_where
from grumem.core.rewards import TurnGates, score_trajectory
from grumem.core.split import Split
from grumem.corpus.log_reader import (
    TRAJECTORY_FIELDS,
    LogTrajectory,
    earlier_ask,
    recorded_messages,
    response_text,
)
from grumem.errors import GrumemError, RecordError, RecordShapeError
from grumem.io.jsonl import fast_validator
from grumem.records.trajectory import Trajectory

MISSING_SHOWN = 5


class Missing:
    """Pairs without a label, counted in full, a few kept to show."""

    def __init__(self) -> None:
        self.turns = 0
        self.chunks = 0
        self.examples: list[str] = []

    def add(self, what: str, where: str, query_id: str, chunk_sha: str) -> None:
        if what == "turn":
            self.turns += 1
        else:
            self.chunks += 1
        if len(self.examples) < MISSING_SHOWN:
            self.examples.append(f"{where} (query {query_id!r}, chunk {chunk_sha[:12]}…)")

    def __bool__(self) -> bool:
        return bool(self.turns or self.chunks)


def check_trajectory(record: dict[str, Any]) -> None:
    """A corpus line against workflow/schemas/trajectory.schema.yaml, by its record class
    in one C pass (a bug if it fails: the compiled schema then words why)."""
    try:
        Trajectory.convert(record)
    except RecordShapeError as e:
        why = f"{e.field or '(record)'}: {e.why}"
        try:
            fast_validator("trajectory")(record)
        except fastjsonschema.JsonSchemaValueException as schema_error:
            why = schema_error.message
        raise GrumemError(
            f"internal error: trajectory {record.get('trajectory_id')!r} does not"
            f" match trajectory.schema.yaml: {why}"
        ) from None


def record_bytes(record: dict[str, Any]) -> bytes:
    """A checked corpus line as `jsonl.dumps` writes it (UTF-8). Its values are JSON
    types read from the log, so only its floats (r_exit, advantages) and the
    re-asks' parse errors (any JSON) can be written differently by orjson."""
    suspects = [record["r_exit"]]
    for turn in record["turns"]:
        suspects += (turn["advantage"], turn["advantage_traj"], turn["advantage_turn"])
        suspects += (ask["parse_error"] for ask in turn["earlier_asks"])
    return dumps_bytes_where(record, suspects)


def trajectory(
    path: str,
    traj: LogTrajectory,
    labels: Labels,
    sessions: dict[str, list[str]] | None,
    missing: Missing,
    split: Split,
    rewards_only: bool = False,
) -> dict[str, Any] | None:
    """One trajectory's corpus record: None when it has no turn, or while labels are
    missing (they are counted in `missing`, to be named all at once). Its session's
    place in `split` goes into the record, and so into each of its rows.

    `rewards_only` (the export's scoring pass) leaves out the prompts, the responses
    and the earlier asks but their `parsed`, and so skips the recordings' checks:
    the full pass makes them, and fails before anything is kept."""
    first = traj.first
    tid, query_id = first.trajectory_id, first.query_id
    turns: list[dict[str, Any]] = []
    gates: list[TurnGates] = []
    parsed_asks: list[bool] = []
    for lineno, rec in traj.turns:
        request, attempt = rec.request, rec.response
        assert request is not None and attempt is not None  # check_line: status ok
        if rewards_only:
            messages, response = None, None
            earlier = [{"parsed": a.parsed} for a in rec.earlier_asks]
        else:
            messages = recorded_messages(path, lineno, request)
            response = response_text(path, lineno, "content", rec)
            earlier = [
                earlier_ask(path, lineno, f"earlier_asks.{i}", a)
                for i, a in enumerate(rec.earlier_asks)
            ]
        label = labels.get(query_id, rec.chunk_sha)
        if label is None:
            missing.add("turn", f"{path}:{lineno} {tid} t={rec.t}", query_id, rec.chunk_sha)
            continue
        if missing:
            continue
        turns.append(
            {
                "t": rec.t,
                "prompt": messages,
                "response": response,
                "r_update": None,  # filled below, once the trajectory is complete
                "parsed": rec.parsed,
                "chunk_sha": rec.chunk_sha,
                "label": label,
                "update_gate": rec.update_gate,
                "exit_gate": rec.exit_gate,
                "attempt": attempt.attempt,
                "asks": rec.asks,
                "earlier_asks": earlier,
                "request_sha256": request.sha256,
                "response_model": rec.get("response_model"),
            }
        )
        parsed_asks += [a["parsed"] for a in earlier] + [rec.parsed]
        gates.append(TurnGates(rec.t, rec.parsed, rec.update_gate, rec.exit_gate, label))
    evidence = session_evidence(path, traj, labels, sessions, missing)
    if missing or not turns:
        return None

    rewards = score_trajectory(gates, evidence, traj.abort is not None, parsed_asks)
    for turn, r in zip(turns, rewards.r_update, strict=True):
        turn["r_update"] = r
    abort = traj.abort[1].abort if traj.abort else None
    record = {
        "trajectory_id": tid,
        "turns": turns,
        "r_exit": rewards.r_exit,
        "r_exit_reason": rewards.r_exit_reason,
        "r_format": rewards.r_format,
        "r_outcome": rewards.r_outcome,
        "t_exit": rewards.t_exit,
        "t_last_evidence": rewards.t_last_evidence,
        **{name: getattr(first, name) for name in TRAJECTORY_FIELDS},
        "split": split.of(first.session),
        "aborted": None
        if traj.abort is None or abort is None
        else {"t": traj.abort[1].t, "reason": abort.reason, "component": abort.component},
    }
    return record


def session_evidence(
    path: str,
    traj: LogTrajectory,
    labels: Labels,
    sessions: dict[str, list[str]] | None,
    missing: Missing,
) -> list[tuple[int, bool]] | None:
    """(t, label) over the whole session when chunk files are given, after checking
    that the log's turns are those chunks; None means: use the turns' labels."""
    if sessions is None:
        return None
    first = traj.first
    session, query_id = first.session, first.query_id
    lineno = traj.first_line[0]
    shas = sessions.get(session)
    if shas is None:
        raise RecordError(
            path, lineno, "session", f"session {session!r} is in none of the chunk files given"
        )
    for ln, rec in [*traj.turns, *([traj.abort] if traj.abort else [])]:
        t = rec.t
        if t > len(shas) or shas[t - 1] != rec.chunk_sha:
            raise RecordError(
                path,
                ln,
                "chunk_sha",
                f"turn t={t} of {first.trajectory_id!r} is not chunk {t} of"
                f" session {session!r} in the chunk files: re-chunked since the run?",
            )
    visited = {rec.t for _, rec in traj.turns}  # their missing labels are counted already
    evidence: list[tuple[int, bool]] = []
    for t, sha in enumerate(shas, start=1):
        label = labels.get(query_id, sha)
        if label is None:
            if t not in visited:
                missing.add("chunk", f"session {session!r} chunk t={t}", query_id, sha)
            continue
        evidence.append((t, label))
    return evidence
