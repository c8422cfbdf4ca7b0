"""Reward assembly: one trajectory's log lines and labels, joined by chunk_sha, ->
its rewards (grumem.core.rewards, r_outcome null) -> its corpus record, a
`Trajectory` with every turn's recorded prompt and response."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from grumem.core.advantages import ScoredTrajectory
from grumem.core.evidence import Labels
from grumem.core.rewards import TrajectoryRewards, TurnGates, score_trajectory
from grumem.core.split import Split
from grumem.corpus.advantage_table import Advantage
from grumem.corpus.log_reader import LogTrajectory, earlier_ask, recorded_messages, response_text
from grumem.errors import RecordError
from grumem.records.base import or_none
from grumem.records.log import LogLine
from grumem.records.trajectory import Trajectory, TrajectoryTurn

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


@dataclass(frozen=True, slots=True)
class Scored:
    """A trajectory's rewards and the labels they were joined from: what the export's
    scoring pass keeps of it (no recording read), and what its record is built from."""

    traj: LogTrajectory
    labels: tuple[bool, ...]  # per trainable turn, in turn order
    rewards: TrajectoryRewards

    @property
    def trajectory_id(self) -> str:
        return self.traj.first.trajectory_id

    def for_advantages(self) -> ScoredTrajectory:
        """What grumem.core.advantages needs of it."""
        first = self.traj.first
        return ScoredTrajectory(
            (first.project, first.query_id, first.session),
            tuple(zip(self.turn_numbers(), self.rewards.r_update, strict=True)),
            self.rewards.r_exit,
            self.rewards.r_format,
        )

    def turn_numbers(self) -> list[int]:
        return [rec.t for _, rec in self.traj.turns]


def score(
    path: str,
    traj: LogTrajectory,
    labels: Labels,
    sessions: dict[str, list[str]] | None,
    missing: Missing,
) -> Scored | None:
    """One trajectory's rewards: None when it has no turn, or while labels are missing
    (they are counted in `missing`, to be named all at once). No recording is read."""
    first = traj.first
    tid, query_id = first.trajectory_id, first.query_id
    turn_labels: list[bool] = []
    gates: list[TurnGates] = []
    parsed_asks: list[bool] = []
    for lineno, rec in traj.turns:
        label = labels.get(query_id, rec.chunk_sha)
        if label is None:
            missing.add("turn", f"{path}:{lineno} {tid} t={rec.t}", query_id, rec.chunk_sha)
            continue
        if missing:
            continue
        turn_labels.append(label)
        parsed_asks += [a.parsed for a in rec.earlier_asks] + [rec.parsed]
        gates.append(TurnGates(rec.t, rec.parsed, rec.update_gate, rec.exit_gate, label))
    evidence = session_evidence(path, traj, labels, sessions, missing)
    if missing or not gates:
        return None
    rewards = score_trajectory(gates, evidence, traj.abort is not None, parsed_asks)
    return Scored(traj, tuple(turn_labels), rewards)


def trajectory(
    path: str, scored: Scored, advantages: Sequence[Advantage], split: Split
) -> Trajectory:
    """The corpus record of a scored trajectory, its turns' advantages given: each turn's
    prompt and response from its sha-checked recording, never re-assembled. Its
    session's place in `split` goes into the record, and so into each of its rows."""
    traj, rewards = scored.traj, scored.rewards
    first = traj.first
    turns = [
        _turn(path, lineno, rec, label, r_update, adv)
        for (lineno, rec), label, r_update, adv in zip(
            traj.turns, scored.labels, rewards.r_update, advantages, strict=True
        )
    ]
    return Trajectory(
        trajectory_id=first.trajectory_id,
        turns=turns,
        r_exit=rewards.r_exit,
        r_exit_reason=rewards.r_exit_reason,
        r_format=rewards.r_format,
        r_outcome=rewards.r_outcome,
        t_exit=rewards.t_exit,
        t_last_evidence=rewards.t_last_evidence,
        project=first.project,
        query_id=first.query_id,
        session=first.session,
        sample=first.sample,
        level=first.level,
        model=first.model,
        split=split.of(first.session),
        aborted=traj.aborted,
    )


def _turn(
    path: str,
    lineno: int,
    rec: LogLine,
    label: bool,
    r_update: Literal[1, -1],
    adv: Advantage,
) -> TrajectoryTurn:
    """A trainable turn; its recordings are checked in the order its fields are written
    (the prompt, the response, the earlier asks)."""
    request, attempt = rec.request, rec.response
    assert request is not None and attempt is not None  # check_line: status ok
    return TrajectoryTurn(
        t=rec.t,
        prompt=recorded_messages(path, lineno, request),
        response=response_text(path, lineno, "content", rec),
        r_update=r_update,
        parsed=rec.parsed,
        chunk_sha=rec.chunk_sha,
        label=label,
        update_gate=rec.update_gate,
        exit_gate=rec.exit_gate,
        attempt=attempt.attempt,
        asks=rec.asks,
        earlier_asks=[
            earlier_ask(path, lineno, f"earlier_asks.{i}", a)
            for i, a in enumerate(rec.earlier_asks)
        ],
        request_sha256=request.sha256,
        response_model=or_none(rec.response_model),
        advantage=adv[0],
        advantage_traj=adv[1],
        advantage_turn=adv[2],
    )


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
