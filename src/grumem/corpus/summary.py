"""summary.json: the counts of an export (trajectories, turns, the r_update split, the
r_format pass rate, the t_last_evidence distribution), the account of the
advantages, and its text."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from grumem.core.rewards import (
    EXIT_ABORTED,
    EXIT_NO_EVIDENCE,
    EXIT_NO_GATE,
    R_EXIT_EARLY,
    R_EXIT_LATE,
    R_EXIT_ON_TIME,
)
from grumem.records.base import Record
from grumem.records.summary import (
    AbortedCounts,
    Advantages,
    ByReason,
    CorpusSummary,
    Inputs,
    Levels,
    Parsed,
    Reasks,
    RExit,
    RFormat,
    RUpdate,
)
from grumem.records.trajectory import Trajectory


@dataclass
class Summary:
    trajectories_in_log: int = 0
    trajectories: int = 0
    turns: int = 0
    r_update_pos: int = 0
    r_update_neg: int = 0
    r_format_pass: int = 0
    r_exit: Counter[str] = field(default_factory=Counter)
    t_last_evidence: Counter[int] = field(default_factory=Counter)
    parsed: int = 0
    no_evidence: int = 0
    reasked_turns: int = 0
    reasks: int = 0
    aborted: Counter[str] = field(default_factory=Counter)
    aborted_without_turns: int = 0
    levels: Counter[str] = field(default_factory=Counter)
    # for the dataset card, not summary.json: trajectories per model asked, turns per
    # model that answered
    models: Counter[str] = field(default_factory=Counter)
    response_models: Counter[str] = field(default_factory=Counter)

    def add(self, traj: Trajectory) -> None:
        self.trajectories += 1
        self.levels[traj.level] += 1
        self.models[traj.model] += 1
        for turn in traj.turns:
            self.turns += 1
            self.response_models[turn.response_model or "(not recorded)"] += 1
            self.parsed += turn.parsed
            self.reasked_turns += bool(turn.earlier_asks)
            self.reasks += len(turn.earlier_asks)
            if turn.r_update > 0:
                self.r_update_pos += 1
            else:
                self.r_update_neg += 1
        self.r_format_pass += traj.r_format
        self.r_exit[_exit_name(traj)] += 1
        if traj.t_last_evidence is not None:
            self.t_last_evidence[traj.t_last_evidence] += 1
        else:
            self.no_evidence += 1

    def record(self, advantages: Advantages, inputs: Inputs) -> CorpusSummary:
        """summary.json's record: these counts, the advantages' account and the inputs."""

        def rate(k: int, n: int) -> float | None:
            return k / n if n else None

        return CorpusSummary(
            trajectories=self.trajectories,
            trajectories_in_log=self.trajectories_in_log,
            levels=Levels(L1=self.levels["L1"], L2=self.levels["L2"]),
            turns=self.turns,
            r_update=RUpdate(positive=self.r_update_pos, negative=self.r_update_neg),
            r_format=RFormat(
                pass_=self.r_format_pass,
                fail=self.trajectories - self.r_format_pass,
                pass_rate=rate(self.r_format_pass, self.trajectories),
            ),
            r_exit=RExit(**{name: self.r_exit[name] for name in _EXIT_KEYS}),
            t_last_evidence={str(t): self.t_last_evidence[t] for t in sorted(self.t_last_evidence)},
            no_evidence=self.no_evidence,
            aborted=AbortedCounts(
                trajectories=sum(self.aborted.values()),
                by_reason=ByReason(
                    budget=self.aborted["budget"], request_failed=self.aborted["request_failed"]
                ),
                without_turns=self.aborted_without_turns,
            ),
            parsed=Parsed(
                turns=self.parsed,
                unparsed=self.turns - self.parsed,
                rate=rate(self.parsed, self.turns),
            ),
            reasks=Reasks(turns=self.reasked_turns, asks=self.reasks),
            advantages=advantages,
            inputs=inputs,
        )


_EXIT_NAMES = {
    R_EXIT_ON_TIME: "on_time",
    R_EXIT_EARLY: "early",
    R_EXIT_LATE: "late",
}
# r_exit null: no evidence, or no exit decision in the record (counted apart)
_EXIT_KEYS = (*_EXIT_NAMES.values(), EXIT_NO_EVIDENCE, EXIT_ABORTED, EXIT_NO_GATE)


def _exit_name(traj: Trajectory) -> str:
    if traj.r_exit is None:
        assert traj.r_exit_reason is not None  # the record's rule: null r_exit says why
        return traj.r_exit_reason
    return _EXIT_NAMES[traj.r_exit]


L2_NOTE = (
    "note: t_last_evidence is over the recorded turns only; an L2 trajectory that exited"
    " before evidence it never visited scores as on time, not early: pass --chunks"
)


def format_summary(s: CorpusSummary) -> str:
    """The summary as a person reads it."""

    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{100 * x:.1f}%"

    def counts(record: Record) -> str:
        return ", ".join(f"{k} {v}" for k, v in record.to_dict().items())

    hist = ", ".join(f"t={t}: {n}" for t, n in s.t_last_evidence.items()) or "none"
    ab = s.aborted
    adv = s.advantages
    return "\n".join(
        [
            f"corpus: {s.trajectories} trajectories ({s.trajectories_in_log} in the log),"
            f" {s.turns} turns",
            f"r_update: +1 {s.r_update.positive}, -1 {s.r_update.negative}",
            f"r_format: {s.r_format.pass_} pass, {s.r_format.fail} fail"
            f" (pass rate {pct(s.r_format.pass_rate)})",
            f"r_exit: {counts(s.r_exit)}",
            f"t_last_evidence: {hist}",
            f"trajectories with no evidence: {s.no_evidence}",
            f"aborted trajectories: {ab.trajectories} (budget {ab.by_reason.budget},"
            f" request_failed {ab.by_reason.request_failed};"
            f" {ab.without_turns} with no turn, not exported)",
            f"parse rate: {pct(s.parsed.rate)}"
            f" ({s.parsed.turns} of {s.turns} turns parsed;"
            f" {s.reasks.asks} re-ask(s) in {s.reasks.turns} turn(s))",
            f"advantages: {adv.turns_with_advantage} of {s.turns} turns in"
            f" {adv.groups} group(s); null A_traj: {counts(adv.null_traj)};"
            f" null A_turn: {counts(adv.null_turn)}",
            *(
                [L2_NOTE]
                if s.levels.L2 and s.inputs.t_last_evidence_over == "recorded turns"
                else []
            ),
        ]
    )
