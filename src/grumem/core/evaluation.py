"""A policy measured from its turn log, and two policies compared: pure functions.

One trajectory's log lines, the evidence labels and its session's chunks make a
`TrajectoryOutcome` (what the figures count of it); a policy's outcomes make its
`PolicyFigures`; two policies' outcomes on the keys both ran make a `Pair`.

Every figure that is a rate or a mean is a ratio of two sums over trajectories,
numerator / denominator, so that a figure, its interval and a paired difference are
all found the same way (`RATIOS`). The figures, as implemented:

- trajectories: the trajectory ids of the log; aborted: those ending on an abort
  line; turns: the answered turns (status ok); asks: their asks, re-asks included.
- parse_rate: turns whose final ask parsed / turns. asks_parse_rate: asks that
  parsed / asks.
- update_agreement (the headline): turns whose recorded update gate equals the
  label / all turns, an unparsed turn counting as a disagreement (as r_update
  scores it −1: a policy gains nothing by failing to answer).
  update_agreement_parsed: the same over the parsed turns only.
- update_precision: parsed turns saying `yes` on an evidence chunk / turns saying
  `yes`. update_recall: the same numerator / turns on an evidence chunk (an
  unparsed turn there is a miss).
- exit: each trajectory's exit by the corpus's r_exit rules
  (grumem.core.rewards), from the recorded exit gates: on_time (t_exit =
  t_last_evidence), early, late, no_evidence (no chunk of the session is
  evidence), no_decision (cut short before a recorded `end`, or no exit gate
  recorded at all); each / all trajectories, so the five add up to 1.
  t_last_evidence is over every chunk of the session, visited or not: a policy
  that stops early never sees its later chunks.
- exit_offset: t_exit − t_last_evidence of the trajectories with both, as a
  histogram and its mean.
- chunks_read_mean: turns answered / trajectories; chunks_total_mean: the
  session's chunks / trajectories; speedup: the session's chunks / turns
  answered, each summed over the trajectories not cut short (an abort stops the
  reading for a reason that is no decision of the policy's, and would count as
  a speed-up). At L1 the loop reads on past a recorded `end`: speedup 1.
- memory_tokens_by_t: the tokens of the memory after the turn (no memory yet
  counts 0) over the turns answered at each t: turns, mean, median, max. Later t
  hold only the trajectories still reading there.
- latency_s_per_trajectory: the recorded latency of each ask's final HTTP
  attempt (the attempt the log keeps), summed over a trajectory's asks, over the
  trajectories not cut short; latency_s_per_turn: all of it / all turns.
- completion_tokens_per_trajectory, prompt_tokens_per_trajectory: the `usage` of
  each ask's recorded response body, summed per trajectory, over the
  trajectories not cut short; null (never guessed) when any ask's body does not
  record it.

Intervals (grumem.core.confidence): Wilson for the proportions of turns, asks and
trajectories; for the other ratios, a percentile bootstrap that resamples the
policy's sessions (its trajectories are not independent within one), null unless
two sessions or more define the ratio. A pair is
compared on its common (query_id, session, sample) keys: each figure's value per
policy there, the difference a − b with a paired bootstrap over (query_id,
session) groups, wins per key, and for the yes/no exit_on_time McNemar's exact
test. A difference is beyond noise when its interval excludes 0.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from grumem.core.confidence import CONFIDENCE, Interval, bootstrap, sign_test, wilson
from grumem.core.evidence import Labels
from grumem.core.recording import body_json, response_bytes
from grumem.core.rewards import (
    EXIT_ABORTED,
    EXIT_NO_GATE,
    R_EXIT_EARLY,
    R_EXIT_LATE,
    R_EXIT_ON_TIME,
    exit_decision,
    last_evidence_turn,
    r_exit,
)
from grumem.records.compare import (
    CompareResult,
    Estimate,
    Exit,
    ExitOffset,
    Levels,
    MemoryAtT,
    NoDecision,
    Pair,
    PairFigure,
    PairFigures,
    PolicyFigures,
    Settings,
)
from grumem.records.log import EarlierAsk, LogLine
from grumem.records.response import Attempt

__all__ = [
    "PAIR_FIGURES",
    "RATIOS",
    "RESAMPLES",
    "SEED",
    "Ratio",
    "RunSource",
    "TrajectoryOutcome",
    "compare",
    "pair",
    "policy_figures",
    "trajectory_outcome",
]

RESAMPLES = 1000
SEED = 0
DECIMALS = 6  # floats in compare.json: rounded, so that last-bit noise never shows

ExitKind = Literal["on_time", "early", "late", "no_evidence", "no_decision"]
EXITS: tuple[ExitKind, ...] = ("on_time", "early", "late", "no_evidence", "no_decision")
TrajectoryKey = tuple[str, str, int]  # (query_id, session, sample): what a pair joins on


@dataclass(frozen=True)
class TrajectoryOutcome:
    """What the figures count of one trajectory."""

    trajectory_id: str
    query_id: str
    session: str
    sample: int
    level: str
    model: str
    turns: int  # answered turns
    parsed_turns: int
    asks: int
    parsed_asks: int
    agreements: int  # turns whose recorded update gate equals the label
    yes_gates: int  # parsed turns saying `yes`
    true_yes: int  # of those, on an evidence chunk
    evidence_turns: int  # turns on an evidence chunk
    exit: ExitKind
    no_decision_reason: str | None
    t_exit: int | None
    t_last_evidence: int | None
    aborted: bool
    chunks_total: int
    latency_s: float
    completion_tokens: int | None  # None: an ask's body records no usage
    prompt_tokens: int | None
    memory_tokens: tuple[int, ...]  # after each answered turn, t = 1, 2, ...

    @property
    def key(self) -> TrajectoryKey:
        return (self.query_id, self.session, self.sample)

    @property
    def chunks_read(self) -> int:
        return self.turns


def trajectory_outcome(
    lines: Sequence[LogLine],
    labels: Labels,
    session_chunks: Sequence[str],
    count_tokens: Callable[[str], int],
) -> TrajectoryOutcome:
    """One trajectory's outcome from its log lines in t order (an abort line last, if
    any), the labels of every chunk of its session (`session_chunks`: their shas in
    session order) and the budget's token counter. A chunk without a label is a
    ValueError: the caller refuses such input naming file and line first."""
    if not lines:
        raise ValueError("a trajectory has at least one log line")
    first = lines[0]
    answered = [line for line in lines if line.status == "ok"]

    def label(chunk_sha: str) -> bool:
        value = labels.get(first.query_id, chunk_sha)
        if value is None:
            raise ValueError(f"no label for query {first.query_id!r}, chunk {chunk_sha}")
        return value

    turn_labels = [label(line.chunk_sha) for line in answered]
    aborted = lines[-1].status == "aborted"
    t_exit, reason = exit_decision([(line.t, line.exit_gate) for line in answered], aborted)
    t_last = last_evidence_turn((t, label(sha)) for t, sha in enumerate(session_chunks, start=1))
    exit_kind = _exit_kind(t_exit, t_last)
    asks = [ask for line in answered for ask in _asks(line)]
    usage = [_usage(ask.response) for ask in asks]
    known = all(u is not None for u in usage)
    return TrajectoryOutcome(
        trajectory_id=first.trajectory_id,
        query_id=first.query_id,
        session=first.session,
        sample=first.sample,
        level=first.level,
        model=first.model,
        turns=len(answered),
        parsed_turns=sum(line.parsed for line in answered),
        asks=len(asks),
        parsed_asks=sum(ask.parsed for ask in asks),
        agreements=sum(
            line.update_gate is not None and line.update_gate == lab
            for line, lab in zip(answered, turn_labels, strict=True)
        ),
        yes_gates=sum(line.update_gate is True for line in answered),
        true_yes=sum(
            line.update_gate is True and lab
            for line, lab in zip(answered, turn_labels, strict=True)
        ),
        evidence_turns=sum(turn_labels),
        exit=exit_kind,
        no_decision_reason=reason if exit_kind == "no_decision" else None,
        t_exit=t_exit,
        t_last_evidence=t_last,
        aborted=aborted,
        chunks_total=len(session_chunks),
        latency_s=sum(ask.response.latency_s for ask in asks),
        completion_tokens=sum(u[0] for u in usage if u is not None) if known else None,
        prompt_tokens=sum(u[1] for u in usage if u is not None) if known else None,
        memory_tokens=tuple(
            0 if line.memory_after is None else count_tokens(line.memory_after) for line in answered
        ),
    )


# an exit by the r_exit the corpus gives it
EXIT_BY_REWARD: dict[float, ExitKind] = {
    R_EXIT_ON_TIME: "on_time",
    R_EXIT_EARLY: "early",
    R_EXIT_LATE: "late",
}


def _exit_kind(t_exit: int | None, t_last_evidence: int | None) -> ExitKind:
    """The exit as the corpus scores it: no decision recorded, r_exit null for want of
    evidence, or r_exit's value."""
    if t_exit is None:
        return "no_decision"
    value = r_exit(t_exit, t_last_evidence)
    return "no_evidence" if value is None else EXIT_BY_REWARD[value]


@dataclass(frozen=True)
class _Ask:
    parsed: bool
    response: Attempt


def _asks(line: LogLine) -> list[_Ask]:
    """A turn's asks in order: the earlier ones (re-asked after a parse failure), then
    its last, each with the attempt the log keeps of it."""
    assert line.response is not None  # an answered line has its response (check_line)
    earlier: list[EarlierAsk] = line.earlier_asks
    return [_Ask(a.parsed, a.response) for a in earlier] + [_Ask(line.parsed, line.response)]


def _usage(attempt: Attempt) -> tuple[int, int] | None:
    """(completion_tokens, prompt_tokens) as the recorded body states them; None when
    it states none (an error body, a server that sends no usage)."""
    try:
        raw = response_bytes(attempt)
        body: Any = None if raw is None else body_json(raw)
    except ValueError:
        return None
    usage = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(usage, dict):
        return None
    completion, prompt = usage.get("completion_tokens"), usage.get("prompt_tokens")
    if type(completion) is not int or type(prompt) is not int or min(completion, prompt) < 0:
        return None  # a bool is no count either
    return completion, prompt


# --- the figures: each a ratio of sums over trajectories ------------------------------------

Part = Callable[[TrajectoryOutcome], float]


@dataclass(frozen=True)
class Ratio:
    """A figure: sum(numerator) / sum(denominator) over a policy's trajectories."""

    numerator: Part
    denominator: Part
    method: Literal["wilson", "bootstrap"]
    better: Literal["higher", "lower"] | None = None  # for a pair; None: neither


def _completed(part: Part) -> Part:
    """The part over the trajectories not cut short; 0 for the others."""
    return lambda o: 0 if o.aborted else part(o)


def _one(o: TrajectoryOutcome) -> float:
    return 1


def _is(kind: ExitKind) -> Part:
    return lambda o: o.exit == kind


def _has_offset(o: TrajectoryOutcome) -> bool:
    return o.t_exit is not None and o.t_last_evidence is not None


def _offset(o: TrajectoryOutcome) -> float:
    if o.t_exit is None or o.t_last_evidence is None:
        return 0
    return o.t_exit - o.t_last_evidence


RATIOS: dict[str, Ratio] = {
    "parse_rate": Ratio(lambda o: o.parsed_turns, lambda o: o.turns, "wilson", "higher"),
    "asks_parse_rate": Ratio(lambda o: o.parsed_asks, lambda o: o.asks, "wilson", "higher"),
    "update_agreement": Ratio(lambda o: o.agreements, lambda o: o.turns, "wilson", "higher"),
    "update_agreement_parsed": Ratio(
        lambda o: o.agreements, lambda o: o.parsed_turns, "wilson", "higher"
    ),
    "update_precision": Ratio(lambda o: o.true_yes, lambda o: o.yes_gates, "wilson", "higher"),
    "update_recall": Ratio(lambda o: o.true_yes, lambda o: o.evidence_turns, "wilson", "higher"),
    "exit_on_time": Ratio(_is("on_time"), _one, "wilson", "higher"),
    **{f"exit_{kind}": Ratio(_is(kind), _one, "wilson") for kind in EXITS[1:]},
    "exit_offset_mean": Ratio(_offset, _has_offset, "bootstrap"),
    "chunks_read_mean": Ratio(
        _completed(lambda o: o.chunks_read), _completed(_one), "bootstrap", "lower"
    ),
    "chunks_total_mean": Ratio(_completed(lambda o: o.chunks_total), _completed(_one), "bootstrap"),
    "speedup": Ratio(
        _completed(lambda o: o.chunks_total),
        _completed(lambda o: o.chunks_read),
        "bootstrap",
        "higher",
    ),
    "latency_s_per_trajectory": Ratio(
        _completed(lambda o: o.latency_s), _completed(_one), "bootstrap", "lower"
    ),
    "latency_s_per_turn": Ratio(lambda o: o.latency_s, lambda o: o.turns, "bootstrap", "lower"),
    "completion_tokens_per_trajectory": Ratio(
        _completed(lambda o: o.completion_tokens or 0), _completed(_one), "bootstrap", "lower"
    ),
    "prompt_tokens_per_trajectory": Ratio(
        _completed(lambda o: o.prompt_tokens or 0), _completed(_one), "bootstrap", "lower"
    ),
}
# the figures a pair compares, in compare.json's order
PAIR_FIGURES = (
    "parse_rate",
    "update_agreement",
    "update_precision",
    "update_recall",
    "exit_on_time",
    "chunks_read_mean",
    "speedup",
    "latency_s_per_trajectory",
)
# a yes/no outcome per trajectory: a pair's McNemar test applies
BINARY = frozenset({"exit_on_time"})


def _completion_tokens(o: TrajectoryOutcome) -> int | None:
    return o.completion_tokens


def _prompt_tokens(o: TrajectoryOutcome) -> int | None:
    return o.prompt_tokens


# the figures a body's `usage` makes: null unless every ask of the policy records it
USAGE: dict[str, Callable[[TrajectoryOutcome], int | None]] = {
    "completion_tokens_per_trajectory": _completion_tokens,
    "prompt_tokens_per_trajectory": _prompt_tokens,
}


def _round(x: float) -> float:
    return round(x, DECIMALS)


def _number(x: float) -> int | float:
    """An integral sum stays an integer in JSON; any other is rounded."""
    if isinstance(x, bool):
        return int(x)
    return x if isinstance(x, int) else _round(x)


def _ratio(num: float, den: float) -> float | None:
    return None if den == 0 else num / den


def _interval(ci: Interval | None) -> list[int | float] | None:
    return None if ci is None else [_round(ci[0]), _round(ci[1])]


def _supported(
    ci: Interval | None, groups: Sequence[Sequence[float]], denominators: Sequence[int]
) -> Interval | None:
    """The interval, if at least two groups define the ratio (a nonzero denominator at
    each of `denominators`): resamples where it is undefined are left out, so a figure
    that one group alone defines would get that group's value as its interval, a
    certainty the data does not have."""
    defined = sum(all(g[d] != 0 for d in denominators) for g in groups)
    return ci if defined >= 2 else None


@dataclass(frozen=True)
class RunSource:
    """Where a policy's outcomes were read from, named in its figures."""

    log: str
    log_sha256: str


def _sums(outcomes: Sequence[TrajectoryOutcome], names: Sequence[str]) -> list[float]:
    """[numerator, denominator] of each named figure, summed, in order."""
    out = [0.0] * (2 * len(names))
    for o in outcomes:
        for i, name in enumerate(names):
            r = RATIOS[name]
            out[2 * i] += r.numerator(o)
            out[2 * i + 1] += r.denominator(o)
    return out


def _ratio_statistic(i: int) -> Callable[[Sequence[float]], float | None]:
    return lambda total: _ratio(total[2 * i], total[2 * i + 1])


def _estimates(
    outcomes: Sequence[TrajectoryOutcome], resamples: int, seed: int
) -> dict[str, Estimate]:
    """Every figure of RATIOS for one policy, with its interval."""
    names = list(RATIOS)
    # integer parts summed as integers: a count is written as one
    exact = {
        name: (
            sum(RATIOS[name].numerator(o) for o in outcomes),
            sum(RATIOS[name].denominator(o) for o in outcomes),
        )
        for name in names
    }
    boot = [n for n in names if RATIOS[n].method == "bootstrap"]
    by_session: dict[str, list[TrajectoryOutcome]] = defaultdict(list)
    for o in outcomes:
        by_session[o.session].append(o)
    groups = [_sums(by_session[s], boot) for s in sorted(by_session)]
    statistics_ = [_ratio_statistic(i) for i in range(len(boot))]
    found = bootstrap(groups, statistics_, resamples, seed)
    intervals = {
        name: _supported(ci, groups, [2 * i + 1])
        for i, (name, ci) in enumerate(zip(boot, found, strict=True))
    }
    out = {}
    for name in names:
        num, den = exact[name]
        method = RATIOS[name].method
        ci = wilson(int(num), int(den)) if method == "wilson" else intervals[name]
        value = _ratio(num, den)
        out[name] = Estimate(
            value=None if value is None else _round(value),
            ci=None if value is None else _interval(ci),
            numerator=_number(num),
            denominator=_number(den),
            method=method,
        )
    return out


def _memory_by_t(outcomes: Sequence[TrajectoryOutcome]) -> dict[str, MemoryAtT]:
    at: dict[int, list[int]] = defaultdict(list)
    for o in outcomes:
        for t, tokens in enumerate(o.memory_tokens, start=1):
            at[t].append(tokens)
    return {
        str(t): MemoryAtT(
            turns=len(at[t]),
            mean=_round(statistics.fmean(at[t])),
            median=_number(statistics.median(at[t])),
            max=max(at[t]),
        )
        for t in sorted(at)
    }


def policy_figures(
    outcomes: Sequence[TrajectoryOutcome],
    source: RunSource,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> PolicyFigures:
    """One policy's figures from the outcomes of its trajectories (at least one)."""
    if not outcomes:
        raise ValueError(f"{source.log}: a policy needs at least one trajectory")
    e = _estimates(outcomes, resamples, seed)
    levels = Counter(o.level for o in outcomes)
    offsets = Counter(_offset(o) for o in outcomes if _has_offset(o))
    no_decision = Counter(o.no_decision_reason for o in outcomes if o.exit == "no_decision")
    usage_known = {
        name: all(part(o) is not None for o in outcomes if not o.aborted)
        for name, part in USAGE.items()
    }
    return PolicyFigures(
        log=source.log,
        log_sha256=source.log_sha256,
        models=sorted({o.model for o in outcomes}),
        levels=Levels(L1=levels["L1"], L2=levels["L2"]),
        trajectories=len(outcomes),
        aborted=sum(o.aborted for o in outcomes),
        turns=sum(o.turns for o in outcomes),
        asks=sum(o.asks for o in outcomes),
        parse_rate=e["parse_rate"],
        asks_parse_rate=e["asks_parse_rate"],
        update_agreement=e["update_agreement"],
        update_agreement_parsed=e["update_agreement_parsed"],
        update_precision=e["update_precision"],
        update_recall=e["update_recall"],
        exit=Exit(**{kind: e[f"exit_{kind}"] for kind in EXITS}),
        exit_no_decision=NoDecision(
            aborted=no_decision[EXIT_ABORTED],
            no_exit_gate=no_decision[EXIT_NO_GATE],
        ),
        exit_offset=ExitOffset(
            histogram={str(int(k)): offsets[k] for k in sorted(offsets)},
            mean=e["exit_offset_mean"],
        ),
        chunks_read_mean=e["chunks_read_mean"],
        chunks_total_mean=e["chunks_total_mean"],
        speedup=e["speedup"],
        memory_tokens_by_t=_memory_by_t(outcomes),
        latency_s_per_trajectory=e["latency_s_per_trajectory"],
        latency_s_per_turn=e["latency_s_per_turn"],
        **{name: e[name] if usage_known[name] else None for name in USAGE},
    )


# --- two policies on the keys both ran ------------------------------------------------------


def _by_key(name: str, outcomes: Sequence[TrajectoryOutcome]) -> dict[TrajectoryKey, Any]:
    out: dict[TrajectoryKey, TrajectoryOutcome] = {}
    for o in outcomes:
        if o.key in out:
            raise ValueError(
                f"policy {name!r}: trajectories {out[o.key].trajectory_id!r} and"
                f" {o.trajectory_id!r} share (query_id, session, sample) {o.key}"
            )
        out[o.key] = o
    return out


def pair(
    a: str,
    a_outcomes: Sequence[TrajectoryOutcome],
    b: str,
    b_outcomes: Sequence[TrajectoryOutcome],
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> Pair:
    """Policies a and b compared on the (query_id, session, sample) keys both ran."""
    by_a, by_b = _by_key(a, a_outcomes), _by_key(b, b_outcomes)
    keys = sorted(by_a.keys() & by_b.keys())
    by_group: dict[tuple[str, str], list[TrajectoryKey]] = defaultdict(list)
    for k in keys:
        by_group[k[:2]].append(k)
    members = [[(by_a[k], by_b[k]) for k in ks] for _, ks in sorted(by_group.items())]
    groups = [_paired_sums(m) for m in members]
    statistics_ = [_difference(i) for i in range(len(PAIR_FIGURES))]
    intervals = [
        _supported(ci, groups, [4 * i + 1, 4 * i + 3])
        for i, ci in enumerate(bootstrap(groups, statistics_, resamples, seed))
    ]
    both = [(by_a[k], by_b[k]) for k in keys]
    figures = {
        name: _pair_figure(a, b, name, both, ci)
        for name, ci in zip(PAIR_FIGURES, intervals, strict=True)
    }
    return Pair(
        a=a,
        b=b,
        keys=len(keys),
        groups=len(by_group),
        only_a=len(by_a.keys() - by_b.keys()),
        only_b=len(by_b.keys() - by_a.keys()),
        figures=PairFigures(**figures),
    )


Both = Sequence[tuple[TrajectoryOutcome, TrajectoryOutcome]]


def _paired_sums(both: Both) -> list[float]:
    """[num a, den a, num b, den b] of each figure of PAIR_FIGURES, summed, in order."""
    a = _sums([oa for oa, _ in both], PAIR_FIGURES)
    b = _sums([ob for _, ob in both], PAIR_FIGURES)
    return [x for i in range(0, len(a), 2) for x in (a[i], a[i + 1], b[i], b[i + 1])]


def _difference(i: int) -> Callable[[Sequence[float]], float | None]:
    """The statistic a − b of the i-th figure of PAIR_FIGURES, from summed _paired_sums."""

    def statistic(total: Sequence[float]) -> float | None:
        va, vb = _ratio(total[4 * i], total[4 * i + 1]), _ratio(total[4 * i + 2], total[4 * i + 3])
        return None if va is None or vb is None else va - vb

    return statistic


def _pair_figure(a: str, b: str, name: str, both: Both, ci: Interval | None) -> PairFigure:
    r = RATIOS[name]
    assert r.better is not None  # every figure a pair compares says which way is better
    sign = 1 if r.better == "higher" else -1
    va = _ratio(sum(r.numerator(oa) for oa, _ in both), sum(r.denominator(oa) for oa, _ in both))
    vb = _ratio(sum(r.numerator(ob) for _, ob in both), sum(r.denominator(ob) for _, ob in both))
    per_key = Counter[str]()
    for oa, ob in both:
        ka = _ratio(r.numerator(oa), r.denominator(oa))
        kb = _ratio(r.numerator(ob), r.denominator(ob))
        if ka is not None and kb is not None:
            per_key["ties" if ka == kb else "a" if sign * (ka - kb) > 0 else "b"] += 1
    diff = None if va is None or vb is None else va - vb
    beyond = ci is not None and diff is not None and (ci[0] > 0 or ci[1] < 0)
    winner = None if not beyond or diff is None else a if sign * diff > 0 else b
    p_value = None
    if name in BINARY:
        # McNemar's exact test: the keys where only one of the two has the outcome
        only_a = sum(r.numerator(oa) > r.numerator(ob) for oa, ob in both)
        only_b = sum(r.numerator(ob) > r.numerator(oa) for oa, ob in both)
        p_value = _round(sign_test(only_a, only_b))
    return PairFigure(
        better=r.better,
        value_a=None if va is None else _round(va),
        value_b=None if vb is None else _round(vb),
        difference=None if diff is None else _round(diff),
        ci=None if diff is None else _interval(ci),
        wins_a=per_key["a"],
        wins_b=per_key["b"],
        ties=per_key["ties"],
        beyond_noise=beyond,
        winner=winner,
        p_value=p_value,
    )


def compare(
    runs: Mapping[str, tuple[RunSource, Sequence[TrajectoryOutcome]]],
    labels: str,
    labels_sha256: str,
    sessions: int,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> CompareResult:
    """compare.json's record: every policy's figures, sorted by name, and every pair."""
    names = sorted(runs)
    return CompareResult(
        policies={n: policy_figures(runs[n][1], runs[n][0], resamples, seed) for n in names},
        pairs=[
            pair(a, runs[a][1], b, runs[b][1], resamples, seed)
            for i, a in enumerate(names)
            for b in names[i + 1 :]
        ],
        settings=Settings(
            confidence=CONFIDENCE,
            resamples=resamples,
            seed=seed,
            labels=labels,
            labels_sha256=labels_sha256,
            sessions=sessions,
        ),
    )
