"""The corpus export (card 004, M5.3): log + labels + kappa.json → verl-ready corpus.

Reads log.jsonl as a stream, one trajectory in memory at a time, and writes
under the output directory:

- `trajectories.jsonl`: card 004's trajectory shape, one line per trajectory
  in the log's order, with the exact recorded chat messages as each turn's
  prompt and `r_outcome: null`;
- `turns.parquet`: one row per turn in verl's RL dataset shape (`data_source`,
  `prompt` as chat messages, `ability`, `reward_model`, `extra_info`),
  written in row groups as the stream goes;
- `summary.json`: the counts card 004 asks for, also printed.

Prompts are the recorded request bodies, checked against their sha256 and
never re-assembled: a template change after the run would otherwise train
the policy on prompts the model never saw. Responses likewise: each turn's
text is derived from its sha-checked recorded body (grumem.recording), and a
log whose `content` disagrees with that body is refused. All three files are
written to temporary names and renamed only when the whole log has been read
without error; on refusal or error nothing is left in the output directory,
and nothing is ever written next to the inputs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fastjsonschema
import pyarrow as pa
import pyarrow.parquet as pq

from grumem.errors import GrumemError
from grumem.jsonl import (
    RecordError,
    dumps,
    fast_validator,
    read_jsonl_fast,
    sha256_file,
    validate,
)
from grumem.labels import Labels, MissingLabelsError, load_labels
from grumem.recording import check_request, recorded_content
from grumem.rewards import (
    EXIT_ABORTED,
    EXIT_NO_EVIDENCE,
    EXIT_NO_GATE,
    R_EXIT_EARLY,
    R_EXIT_LATE,
    R_EXIT_ON_TIME,
    TurnGates,
    score_trajectory,
)
from grumem.stages.kappa import read_kappa

TRAJECTORIES = "trajectories.jsonl"
TURNS = "turns.parquet"
SUMMARY = "summary.json"
ABILITY = "memory_gating"
MISSING_SHOWN = 5
# A row group is flushed at whichever comes first; prompts are up to ~30k
# tokens each, so a row count alone would not bound memory. The parquet
# footer keeps metadata per row group until the file closes, so row groups
# are not made smaller than this (memory would grow with the turn count).
ROW_GROUP_ROWS = 4096
ROW_GROUP_BYTES = 32 << 20
# Min/max statistics of prompts and responses are kilobytes per row group in
# the footer and useless for filtering; keep them for the small columns only.
_NO_STATISTICS = {
    "prompt.list.element.content",
    "extra_info.response",
    "extra_info.chunk_sha",
    "extra_info.request_sha256",
}

_TRAJECTORY_FIELDS = ("project", "query_id", "session", "sample", "level", "model")


class ExportRefused(GrumemError):
    """The export's preconditions (M5.2 calibration) are not met; nothing was written."""


# ---------------------------------------------------------------- calibration


def check_calibration(kappa_path: str, labels_path: str, min_kappa: float) -> dict[str, Any]:
    """The kappa.json the export may rely on, or ExportRefused saying why not."""
    if not min_kappa >= 0:
        raise ExportRefused(
            f"export.min_kappa {min_kappa} is below 0 (chance agreement): the calibration"
            " check cannot be switched off; set a threshold between 0 and 1"
        )
    if not os.path.exists(kappa_path):
        raise ExportRefused(
            f"no calibration: {kappa_path} does not exist. The export is refused until the labels"
            " are calibrated (M5.2): label a sample of (query_id, chunk_sha) pairs a second time,"
            " set the project's `calibration` file and run rule `kappa`"
            " (grumem kappa --labels … --calibration … --out kappa.json)"
        )
    record = read_kappa(kappa_path)
    labels_sha = sha256_file(labels_path)
    if record["labels_sha256"] != labels_sha:
        raise ExportRefused(
            f"stale calibration: {kappa_path} was computed for labels with sha256"
            f" {record['labels_sha256'][:12]}…, but {labels_path} now has {labels_sha[:12]}…;"
            " rerun rule `kappa` (M5.2) on the current labels"
        )
    if record["kappa"] < min_kappa:
        raise ExportRefused(
            f"calibration too weak: Cohen's kappa {record['kappa']:.4f} over {record['n']} pairs"
            f" ({kappa_path}) is below export.min_kappa {min_kappa}: the labels the rewards are"
            " computed from disagree too much with the independent calibration (M5.2);"
            " revise the labelling guide or the labels"
        )
    return record


# ---------------------------------------------------------------- log reading


@dataclass
class LogReader:
    """Validated log lines with their line numbers; hashes the bytes as it goes."""

    path: str
    sha256: Any = field(default_factory=hashlib.sha256)

    def __iter__(self) -> Iterator[tuple[int, dict[str, Any]]]:
        for lineno, raw, record in read_jsonl_fast(self.path, "log"):
            self.sha256.update(raw)
            yield lineno, record


@dataclass
class LogTrajectory:
    """The lines of one trajectory: its trainable turns and the abort line, if any."""

    turns: list[tuple[int, dict[str, Any]]]
    abort: tuple[int, dict[str, Any]] | None

    @property
    def first(self) -> dict[str, Any]:
        return (self.turns[0] if self.turns else self.abort)[1]


def group_trajectories(
    path: str, lines: Iterator[tuple[int, dict[str, Any]]]
) -> Iterator[LogTrajectory]:
    """Contiguous runs of one trajectory_id, checked: t = 1, 2, … with no gap, the
    trajectory's fields constant, nothing after an abort, no id seen twice."""
    seen: set[str] = set()  # ids only: grows with trajectories, not with turns
    current: LogTrajectory | None = None
    for lineno, rec in lines:
        _check_line(path, lineno, rec)
        tid = rec["trajectory_id"]
        if current is not None and tid != current.first["trajectory_id"]:
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
            for name in _TRAJECTORY_FIELDS:
                if rec[name] != first[name]:
                    raise RecordError(
                        path,
                        lineno,
                        name,
                        f"{rec[name]!r} differs from {first[name]!r} earlier in trajectory {tid!r}",
                    )
            expected_t = current.turns[-1][1]["t"] + 1
        if rec["t"] != expected_t:
            raise RecordError(
                path,
                lineno,
                "t",
                f"trajectory {tid!r} expects t={expected_t} here, found {rec['t']}"
                " (turns must be contiguous and ascending from 1)",
            )
        if rec["status"] == "aborted":
            current.abort = (lineno, rec)
        else:
            current.turns.append((lineno, rec))
    if current is not None:
        yield current


def _check_line(path: str, lineno: int, rec: dict[str, Any]) -> None:
    """Cross-field rules the log schema cannot say."""
    if rec["status"] == "aborted":
        if rec["abort"] is None:
            raise RecordError(path, lineno, "abort", "an aborted turn must say why (abort is null)")
        return
    for name in ("request", "response"):
        if rec[name] is None:
            raise RecordError(path, lineno, name, f"status is ok but {name} is null")
    if rec["abort"] is not None:
        raise RecordError(path, lineno, "abort", "status is ok but abort is set")
    gates = (rec["update_gate"], rec["exit_gate"])
    if rec["parsed"] and not all(isinstance(g, bool) for g in gates):
        raise RecordError(path, lineno, "update_gate", "parsed is true but a gate is null")
    if not rec["parsed"] and any(g is not None for g in gates):
        raise RecordError(
            path,
            lineno,
            "update_gate",
            "parsed is false but a gate is recorded: no gate is ever defaulted",
        )


def recorded_messages(path: str, lineno: int, request: dict[str, Any]) -> list[dict[str, str]]:
    """The chat messages exactly as sent: the recorded body, verified, never rebuilt."""
    body = check_request(path, lineno, request)
    try:
        messages = json.loads(body)["messages"]
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
    return messages


def response_text(path: str, lineno: int, field: str, ask: dict[str, Any]) -> str | None:
    """The assistant text of one recorded ask, derived from its sha-checked body; the
    log's `content` must say the same (it is what the gates were parsed from)."""
    text = recorded_content(path, lineno, ask["response"])
    if text != ask["content"]:
        raise RecordError(
            path,
            lineno,
            field,
            "differs from the assistant text of the recorded response body: the log was"
            " edited; the export takes the text from the recording only (restore the log"
            " or rerun rule `log`)",
        )
    return text


# ---------------------------------------------------------------- chunks


def session_chunk_shas(paths: Sequence[str]) -> dict[str, list[str]]:
    """chunk_sha per t (index t-1) of every session in the chunk files."""
    from grumem.chunk_files import iter_sessions

    return {session: [c.sha for c in chunks] for session, chunks in iter_sessions(paths)}


# ---------------------------------------------------------------- parquet


PARQUET_SCHEMA = pa.schema(
    [
        ("data_source", pa.string()),
        ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        (
            "extra_info",
            pa.struct(
                [
                    ("split", pa.string()),
                    ("index", pa.int64()),
                    ("trajectory_id", pa.string()),
                    ("t", pa.int64()),
                    ("chunk_sha", pa.string()),
                    ("label", pa.bool_()),
                    ("response", pa.string()),
                    ("r_update", pa.int64()),
                    ("r_exit", pa.float64()),
                    ("r_exit_reason", pa.string()),
                    ("r_format", pa.int64()),
                    ("r_outcome", pa.float64()),
                    ("t_exit", pa.int64()),
                    ("t_last_evidence", pa.int64()),
                    ("parsed", pa.bool_()),
                    ("update_gate", pa.bool_()),
                    ("exit_gate", pa.bool_()),
                    ("attempt", pa.int64()),
                    ("asks", pa.int64()),
                    ("request_sha256", pa.string()),
                    ("response_model", pa.string()),
                    ("project", pa.string()),
                    ("query_id", pa.string()),
                    ("session", pa.string()),
                    ("sample", pa.int64()),
                    ("level", pa.string()),
                    ("model", pa.string()),
                    ("aborted", pa.bool_()),
                ]
            ),
        ),
    ]
)


def _statistics_columns() -> list[str]:
    leaves: list[str] = []

    def walk(prefix: str, t: pa.DataType) -> None:
        if pa.types.is_struct(t):
            for f in t:
                walk(f"{prefix}.{f.name}", f.type)
        elif pa.types.is_list(t):
            walk(f"{prefix}.list.element", t.value_type)
        else:
            leaves.append(prefix)

    for f in PARQUET_SCHEMA:
        walk(f.name, f.type)
    return [c for c in leaves if c not in _NO_STATISTICS]


class ParquetSink:
    """verl rows, buffered and written one row group at a time."""

    def __init__(self, path: str):
        # no created_by override needed: pyarrow writes its version, not a time,
        # so equal rows give equal bytes (tests check)
        self._writer = pq.ParquetWriter(
            path, PARQUET_SCHEMA, compression="zstd", write_statistics=_statistics_columns()
        )
        self._rows: list[dict[str, Any]] = []
        self._bytes = 0

    def add(self, row: dict[str, Any], size: int) -> None:
        self._rows.append(row)
        self._bytes += size
        if len(self._rows) >= ROW_GROUP_ROWS or self._bytes >= ROW_GROUP_BYTES:
            self.flush()

    def flush(self) -> None:
        if self._rows:
            self._writer.write_table(pa.Table.from_pylist(self._rows, schema=PARQUET_SCHEMA))
            self._rows, self._bytes = [], 0

    def close(self) -> None:
        """Close the file; rows not yet flushed are dropped (the caller flushes on success)."""
        self._writer.close()


# ---------------------------------------------------------------- summary


@dataclass
class Summary:
    trajectories_in_log: int = 0
    trajectories: int = 0
    turns: int = 0
    r_update_pos: int = 0
    r_update_neg: int = 0
    r_format_pass: int = 0
    r_exit: Counter = field(default_factory=Counter)
    t_last_evidence: Counter = field(default_factory=Counter)
    parsed: int = 0
    no_evidence: int = 0
    reasked_turns: int = 0
    reasks: int = 0
    aborted: Counter = field(default_factory=Counter)
    aborted_without_turns: int = 0
    levels: Counter = field(default_factory=Counter)

    def add(self, traj: dict[str, Any]) -> None:
        self.trajectories += 1
        self.levels[traj["level"]] += 1
        for turn in traj["turns"]:
            self.turns += 1
            self.parsed += turn["parsed"]
            self.reasked_turns += bool(turn["earlier_asks"])
            self.reasks += len(turn["earlier_asks"])
            if turn["r_update"] > 0:
                self.r_update_pos += 1
            else:
                self.r_update_neg += 1
        self.r_format_pass += traj["r_format"]
        self.r_exit[_exit_name(traj)] += 1
        if traj["t_last_evidence"] is not None:
            self.t_last_evidence[traj["t_last_evidence"]] += 1
        else:
            self.no_evidence += 1

    def as_dict(self, inputs: dict[str, Any]) -> dict[str, Any]:
        def rate(k: int, n: int) -> float | None:
            return k / n if n else None

        return {
            "trajectories": self.trajectories,
            "trajectories_in_log": self.trajectories_in_log,
            "levels": {level: self.levels[level] for level in ("L1", "L2")},
            "turns": self.turns,
            "r_update": {"positive": self.r_update_pos, "negative": self.r_update_neg},
            "r_format": {
                "pass": self.r_format_pass,
                "fail": self.trajectories - self.r_format_pass,
                "pass_rate": rate(self.r_format_pass, self.trajectories),
            },
            "r_exit": {name: self.r_exit[name] for name in _EXIT_KEYS},
            "t_last_evidence": {
                str(t): self.t_last_evidence[t] for t in sorted(self.t_last_evidence)
            },
            "no_evidence": self.no_evidence,
            "aborted": {
                "trajectories": sum(self.aborted.values()),
                "by_reason": {r: self.aborted[r] for r in ("budget", "request_failed")},
                "without_turns": self.aborted_without_turns,
            },
            "parsed": {
                "turns": self.parsed,
                "unparsed": self.turns - self.parsed,
                "rate": rate(self.parsed, self.turns),
            },
            "reasks": {"turns": self.reasked_turns, "asks": self.reasks},
            "inputs": inputs,
        }


_EXIT_NAMES = {
    R_EXIT_ON_TIME: "on_time",
    R_EXIT_EARLY: "early",
    R_EXIT_LATE: "late",
}
# r_exit null: no evidence, or no exit decision in the record (counted apart)
_EXIT_KEYS = (*_EXIT_NAMES.values(), EXIT_NO_EVIDENCE, EXIT_ABORTED, EXIT_NO_GATE)


def _exit_name(traj: dict[str, Any]) -> str:
    if traj["r_exit"] is None:
        return traj["r_exit_reason"]
    return _EXIT_NAMES[traj["r_exit"]]


L2_NOTE = (
    "note: t_last_evidence is over the recorded turns only; an L2 trajectory that exited"
    " before evidence it never visited scores as on time, not early: pass --chunks"
)


def format_summary(s: dict[str, Any]) -> str:
    """The summary as a person reads it."""

    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{100 * x:.1f}%"

    hist = ", ".join(f"t={t}: {n}" for t, n in s["t_last_evidence"].items()) or "none"
    ab = s["aborted"]
    return "\n".join(
        [
            f"corpus: {s['trajectories']} trajectories ({s['trajectories_in_log']} in the log),"
            f" {s['turns']} turns",
            f"r_update: +1 {s['r_update']['positive']}, -1 {s['r_update']['negative']}",
            f"r_format: {s['r_format']['pass']} pass, {s['r_format']['fail']} fail"
            f" (pass rate {pct(s['r_format']['pass_rate'])})",
            "r_exit: " + ", ".join(f"{k} {v}" for k, v in s["r_exit"].items()),
            f"t_last_evidence: {hist}",
            f"trajectories with no evidence: {s['no_evidence']}",
            f"aborted trajectories: {ab['trajectories']} (budget {ab['by_reason']['budget']},"
            f" request_failed {ab['by_reason']['request_failed']};"
            f" {ab['without_turns']} with no turn, not exported)",
            f"parse rate: {pct(s['parsed']['rate'])}"
            f" ({s['parsed']['turns']} of {s['turns']} turns parsed;"
            f" {s['reasks']['asks']} re-ask(s) in {s['reasks']['turns']} turn(s))",
            *(
                [L2_NOTE]
                if s["levels"]["L2"] and s["inputs"]["t_last_evidence_over"] == "recorded turns"
                else []
            ),
        ]
    )


# ---------------------------------------------------------------- export


@dataclass(frozen=True)
class ExportInputs:
    log: str
    labels: str
    kappa: str
    out_dir: str
    min_kappa: float = 0.6
    data_source: str = "grumem"
    ability: str = ABILITY
    chunks: tuple[str, ...] = ()


class _Missing:
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


def export(inputs: ExportInputs) -> dict[str, Any]:
    """Run the export; return the summary. Raises before renaming anything into place."""
    for what, p in (("log", inputs.log), ("labels", inputs.labels)):
        if not os.path.exists(p):
            raise GrumemError(f"{what} file {p} does not exist")
    kappa = check_calibration(inputs.kappa, inputs.labels, inputs.min_kappa)
    labels = load_labels(inputs.labels)
    sessions = session_chunk_shas(inputs.chunks) if inputs.chunks else None

    out_dir = Path(inputs.out_dir)
    created_dir = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    temps = {name: _temp_path(out_dir, name) for name in (TRAJECTORIES, TURNS, SUMMARY)}
    try:
        reader = LogReader(inputs.log)
        summary = Summary()
        sink = ParquetSink(temps[TURNS])
        try:
            with open(temps[TRAJECTORIES], "w", encoding="utf-8") as out:
                _export_stream(inputs, reader, labels, sessions, summary, sink, out)
            sink.flush()
        finally:
            sink.close()
        if summary.turns == 0:
            raise GrumemError(
                f"{inputs.log}: no trainable turns to export"
                f" ({summary.trajectories_in_log} trajectories, all aborted"
                " before their first answer)"
            )
        result = summary.as_dict(
            {
                "data_source": inputs.data_source,
                "ability": inputs.ability,
                "log": inputs.log,
                "log_sha256": reader.sha256.hexdigest(),
                "labels": inputs.labels,
                "labels_sha256": kappa["labels_sha256"],
                "kappa": kappa["kappa"],
                "kappa_n": kappa["n"],
                "min_kappa": inputs.min_kappa,
                "t_last_evidence_over": "session chunks"
                if sessions is not None
                else "recorded turns",
            }
        )
        validate(result, "summary", temps[SUMMARY])
        with open(temps[SUMMARY], "w", encoding="utf-8") as f:
            f.write(json.dumps(result, ensure_ascii=False, indent=2))
            f.write("\n")
        for name in (TURNS, TRAJECTORIES, SUMMARY):  # summary last: its presence means complete
            _fsync(temps[name])
            os.replace(temps[name], out_dir / name)
    except BaseException:
        for tmp in temps.values():
            if os.path.exists(tmp):
                os.unlink(tmp)
        if created_dir and not any(out_dir.iterdir()):
            out_dir.rmdir()
        raise
    return result


def check_trajectory(record: dict[str, Any]) -> None:
    """A corpus line against workflow/schemas/trajectory.schema.yaml (a bug if it fails)."""
    try:
        fast_validator("trajectory")(record)
    except fastjsonschema.JsonSchemaValueException as e:
        raise GrumemError(
            f"internal error: trajectory {record.get('trajectory_id')!r} does not"
            f" match trajectory.schema.yaml: {e.message}"
        ) from None


def _export_stream(
    inputs: ExportInputs,
    reader: LogReader,
    labels: Labels,
    sessions: dict[str, list[str]] | None,
    summary: Summary,
    sink: ParquetSink,
    out: Any,
) -> None:
    missing = _Missing()
    for traj in group_trajectories(inputs.log, iter(reader)):
        summary.trajectories_in_log += 1
        record, rows = _trajectory(inputs, traj, labels, sessions, missing)
        if traj.abort is not None:
            summary.aborted[traj.abort[1]["abort"]["reason"]] += 1
            if record is None and not traj.turns:
                summary.aborted_without_turns += 1
        if record is None or missing:
            continue  # keep reading to count every missing label, write nothing more
        check_trajectory(record)
        out.write(dumps(record))
        out.write("\n")
        first_index = summary.turns  # verl's extra_info.index: the row's place in the file
        summary.add(record)
        for row, size in rows:
            row["extra_info"]["index"] += first_index
            sink.add(row, size)
    if missing:
        count = missing.turns + missing.chunks
        raise MissingLabelsError(
            inputs.labels,
            count,
            missing.examples,
            MISSING_SHOWN,
            what=f"{missing.turns} turn(s)"
            + (f" and {missing.chunks} unvisited session chunk(s)" if missing.chunks else ""),
        )


def _trajectory(
    inputs: ExportInputs,
    traj: LogTrajectory,
    labels: Labels,
    sessions: dict[str, list[str]] | None,
    missing: _Missing,
) -> tuple[dict[str, Any] | None, list[tuple[dict[str, Any], int]]]:
    """One trajectory's corpus record and its parquet rows (None when it has no turn)."""
    path = inputs.log
    first = traj.first
    tid, query_id = first["trajectory_id"], first["query_id"]
    turns: list[dict[str, Any]] = []
    gates: list[TurnGates] = []
    parsed_asks: list[bool] = []
    for lineno, rec in traj.turns:
        messages = recorded_messages(path, lineno, rec["request"])
        response = response_text(path, lineno, "content", rec)
        earlier = [
            _earlier_ask(path, lineno, f"earlier_asks.{i}", a)
            for i, a in enumerate(rec["earlier_asks"])
        ]
        label = labels.get(query_id, rec["chunk_sha"])
        if label is None:
            missing.add("turn", f"{path}:{lineno} {tid} t={rec['t']}", query_id, rec["chunk_sha"])
            continue
        if missing:
            continue
        turns.append(
            {
                "t": rec["t"],
                "prompt": messages,
                "response": response,
                "r_update": None,  # filled below, once the trajectory is complete
                "parsed": rec["parsed"],
                "chunk_sha": rec["chunk_sha"],
                "label": label,
                "update_gate": rec["update_gate"],
                "exit_gate": rec["exit_gate"],
                "attempt": rec["response"]["attempt"],
                "asks": rec["asks"],
                "earlier_asks": earlier,
                "request_sha256": rec["request"]["sha256"],
                "response_model": rec.get("response_model"),
            }
        )
        parsed_asks += [a["parsed"] for a in earlier] + [rec["parsed"]]
        gates.append(
            TurnGates(rec["t"], rec["parsed"], rec["update_gate"], rec["exit_gate"], label)
        )
    evidence = _session_evidence(path, traj, labels, sessions, missing)
    if missing or not turns:
        return None, []

    rewards = score_trajectory(gates, evidence, traj.abort is not None, parsed_asks)
    for turn, r in zip(turns, rewards.r_update, strict=True):
        turn["r_update"] = r
    abort = traj.abort[1] if traj.abort else None
    record = {
        "trajectory_id": tid,
        "turns": turns,
        "r_exit": rewards.r_exit,
        "r_exit_reason": rewards.r_exit_reason,
        "r_format": rewards.r_format,
        "r_outcome": rewards.r_outcome,
        "t_exit": rewards.t_exit,
        "t_last_evidence": rewards.t_last_evidence,
        **{name: first[name] for name in _TRAJECTORY_FIELDS},
        "aborted": None
        if abort is None
        else {
            "t": abort["t"],
            "reason": abort["abort"]["reason"],
            "component": abort["abort"]["component"],
        },
    }
    rows = [
        (_parquet_row(inputs, record, turn, i), _row_size(turn)) for i, turn in enumerate(turns)
    ]
    return record, rows


def _earlier_ask(path: str, lineno: int, field: str, ask: dict[str, Any]) -> dict[str, Any]:
    """An ask before the turn's last, as the corpus keeps it: checked like the last."""
    check_request(path, lineno, ask["request"])
    if ask["parsed"]:
        raise RecordError(
            path,
            lineno,
            f"{field}.parsed",
            "an earlier ask parsed, yet the turn was asked again: the loop re-asks only"
            " after a parse failure",
        )
    return {
        "ask": ask["ask"],
        "request_sha256": ask["request"]["sha256"],
        "response": response_text(path, lineno, f"{field}.content", ask),
        "parsed": ask["parsed"],
        "parse_error": ask["parse_error"],
    }


def _session_evidence(
    path: str,
    traj: LogTrajectory,
    labels: Labels,
    sessions: dict[str, list[str]] | None,
    missing: _Missing,
) -> list[tuple[int, bool]] | None:
    """(t, label) over the whole session when chunk files are given, after checking
    that the log's turns are those chunks; None means: use the turns' labels."""
    if sessions is None:
        return None
    first = traj.first
    session, query_id = first["session"], first["query_id"]
    lineno = (traj.turns[0] if traj.turns else traj.abort)[0]
    shas = sessions.get(session)
    if shas is None:
        raise RecordError(
            path, lineno, "session", f"session {session!r} is in none of the chunk files given"
        )
    for ln, rec in [*traj.turns, *([traj.abort] if traj.abort else [])]:
        t = rec["t"]
        if t > len(shas) or shas[t - 1] != rec["chunk_sha"]:
            raise RecordError(
                path,
                ln,
                "chunk_sha",
                f"turn t={t} of {first['trajectory_id']!r} is not chunk {t} of"
                f" session {session!r} in the chunk files: re-chunked since the run?",
            )
    visited = {rec["t"] for _, rec in traj.turns}  # their missing labels are counted already
    evidence: list[tuple[int, bool]] = []
    for t, sha in enumerate(shas, start=1):
        label = labels.get(query_id, sha)
        if label is None:
            if t not in visited:
                missing.add("chunk", f"session {session!r} chunk t={t}", query_id, sha)
            continue
        evidence.append((t, label))
    return evidence


def _parquet_row(
    inputs: ExportInputs, traj: dict[str, Any], turn: dict[str, Any], index: int
) -> dict[str, Any]:
    return {
        "data_source": inputs.data_source,
        "prompt": turn["prompt"],
        "ability": inputs.ability,
        "reward_model": {"style": "rule", "ground_truth": "yes" if turn["label"] else "no"},
        "extra_info": {
            "split": "train",
            "index": index,  # made global by the caller
            "trajectory_id": traj["trajectory_id"],
            "t": turn["t"],
            "chunk_sha": turn["chunk_sha"],
            "label": turn["label"],
            "response": turn["response"],
            "r_update": turn["r_update"],
            "r_exit": traj["r_exit"],
            "r_exit_reason": traj["r_exit_reason"],
            "r_format": traj["r_format"],
            "r_outcome": traj["r_outcome"],
            "t_exit": traj["t_exit"],
            "t_last_evidence": traj["t_last_evidence"],
            "parsed": turn["parsed"],
            "update_gate": turn["update_gate"],
            "exit_gate": turn["exit_gate"],
            "attempt": turn["attempt"],
            "asks": turn["asks"],
            "request_sha256": turn["request_sha256"],
            "response_model": turn["response_model"],
            **{name: traj[name] for name in _TRAJECTORY_FIELDS},
            "aborted": traj["aborted"] is not None,
        },
    }


def _row_size(turn: dict[str, Any]) -> int:
    return sum(len(m["content"]) for m in turn["prompt"]) + len(turn["response"] or "")


def _temp_path(out_dir: Path, name: str) -> str:
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=out_dir)
    os.close(fd)
    # mkstemp makes the file private (0600); the corpus gets the usual mode
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    return tmp


def _fsync(path: str) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def main(args: argparse.Namespace) -> int:
    """`grumem export`: the corpus; its summary to stderr (the job's log)."""
    summary = export(
        ExportInputs(
            log=args.turn_log,
            labels=args.labels,
            kappa=args.kappa,
            out_dir=args.out_dir,
            min_kappa=args.min_kappa,
            data_source=args.data_source,
            chunks=tuple(args.chunks),
        )
    )
    print(format_summary(summary), file=sys.stderr)
    return 0
