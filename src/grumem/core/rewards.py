"""Reward assembly (paper §3.2): pure functions over recorded gates and labels.

- r_update per turn: +1 when the recorded update gate equals the label, −1
  otherwise. An unparsed turn has no gate (null) and never matches.
- r_exit per trajectory, from the recorded exit gates and never from whether
  the loop stopped: at L1 the loop ignores the exit gate, so a loop-derived
  exit would make every L1 trajectory a constant "late" −0.5. Without a
  recorded `end`, t_exit is the last chunk only when the trajectory ran out
  of chunks with gates recorded; a trajectory cut short (budget, failed
  request) or one where no turn parsed made no exit decision: r_exit null,
  with the reason in r_exit_reason.
- r_format per trajectory: 1 only if every ask of every turn parsed (a
  re-ask does not erase the malformed answer before it). Strict on purpose: a
  malformed turn may be caused by the one before it, so no turn of the
  trajectory earns it.
- r_outcome: None, always. Extraction has no answer-correctness signal (the
  paper's is_equiv has no analogue); 0 would be a real reward a trainer uses.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

R_EXIT_ON_TIME = 0.0
R_EXIT_EARLY = -0.75
R_EXIT_LATE = -0.5
R_OUTCOME = None

# why r_exit is null (None when it is a value)
ExitReason: TypeAlias = Literal["aborted", "no_exit_gate", "no_evidence"]
EXIT_ABORTED: Final = (
    "aborted"  # cut short before any recorded `end`: where it stopped is no decision
)
EXIT_NO_GATE: Final = "no_exit_gate"  # no turn parsed: no exit gate was recorded at all
EXIT_NO_EVIDENCE: Final = "no_evidence"  # no chunk is evidence: nothing to be on time for


@dataclass(frozen=True)
class TurnGates:
    """What rewards need of one recorded turn."""

    t: int
    parsed: bool
    update_gate: bool | None
    exit_gate: bool | None
    label: bool


@dataclass(frozen=True)
class TrajectoryRewards:
    r_update: tuple[Literal[1, -1], ...]  # per turn, in turn order
    t_exit: int | None  # None: no exit decision (see r_exit_reason)
    t_last_evidence: int | None
    r_exit: float | None
    r_exit_reason: ExitReason | None  # why r_exit is None; None when it is a value
    r_format: Literal[0, 1]
    r_outcome: None = R_OUTCOME


def r_update(update_gate: bool | None, label: bool) -> Literal[1, -1]:
    """+1 if the recorded gate equals the label; an unparsed turn (None) is −1."""
    return 1 if update_gate is not None and update_gate == label else -1


def exit_turn(turns: Sequence[tuple[int, bool | None]]) -> int:
    """t_exit from (t, recorded exit gate) in turn order: the first t whose gate
    said end, else the last turn (the trajectory ran out of chunks)."""
    if not turns:
        raise ValueError("a trajectory without turns has no exit turn")
    for t, exit_gate in turns:
        if exit_gate is True:
            return t
    return turns[-1][0]


def last_evidence_turn(turns: Iterable[tuple[int, bool]]) -> int | None:
    """The largest t whose label is evidence; None when no chunk is evidence."""
    evidence = [t for t, label in turns if label]
    return max(evidence) if evidence else None


def r_exit(t_exit: int, t_last_evidence: int | None) -> float | None:
    """0 on time, −0.75 early, −0.5 late; None (no signal) without evidence."""
    if t_last_evidence is None:
        return None
    if t_exit == t_last_evidence:
        return R_EXIT_ON_TIME
    return R_EXIT_EARLY if t_exit < t_last_evidence else R_EXIT_LATE


def r_format(parsed: Iterable[bool]) -> Literal[0, 1]:
    """1 only if every turn parsed, else 0: one value for the whole trajectory."""
    flags = list(parsed)
    if not flags:
        raise ValueError("r_format of a trajectory without turns is undefined")
    return 1 if all(flags) else 0


def exit_decision(
    turns: Sequence[tuple[int, bool | None]], aborted: bool
) -> tuple[int | None, ExitReason | None]:
    """(t_exit, None), or (None, reason) when the record holds no exit decision:
    the trajectory was cut short before a recorded `end`, or no exit gate was
    recorded at all. Only a trajectory that ran out of chunks with gates
    recorded exits at its last turn."""
    if any(g is True for _, g in turns):
        return exit_turn(turns), None
    if aborted:
        return None, EXIT_ABORTED
    if all(g is None for _, g in turns):
        return None, EXIT_NO_GATE
    return exit_turn(turns), None


def score_trajectory(
    turns: Sequence[TurnGates],
    evidence: Iterable[tuple[int, bool]] | None = None,
    aborted: bool = False,
    parsed_asks: Iterable[bool] | None = None,
) -> TrajectoryRewards:
    """All rewards of one trajectory.

    `evidence` is (t, label) over every chunk of the session when known (an
    L2 trajectory that stopped early never visited its later chunks); by
    default the turns' own labels. `aborted`: the run was cut short after
    these turns. `parsed_asks`: whether each ask of each turn parsed, re-asks
    included (by default each turn's `parsed`).
    """
    t_exit, reason = exit_decision([(g.t, g.exit_gate) for g in turns], aborted)
    if evidence is None:
        evidence = [(g.t, g.label) for g in turns]
    t_last = last_evidence_turn(evidence)
    value = None if t_exit is None else r_exit(t_exit, t_last)
    if reason is None and value is None:
        reason = EXIT_NO_EVIDENCE
    if parsed_asks is None:
        parsed_asks = [g.parsed for g in turns]
    return TrajectoryRewards(
        r_update=tuple(r_update(g.update_gate, g.label) for g in turns),
        t_exit=t_exit,
        t_last_evidence=t_last,
        r_exit=value,
        r_exit_reason=reason,
        r_format=r_format(parsed_asks),
    )
