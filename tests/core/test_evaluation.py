"""grumem.core.evaluation: policies whose behaviour is known exactly, counted by hand
over the export fixture's sessions (s-alpha 4 chunks, s-beta 7, s-gamma 2) and labels
(q1: evidence at s-alpha t=2, s-beta t=2 and 5; q2: s-beta t=1; none in s-gamma, nor
for q2 in s-alpha); a property test against a direct count of generated logs."""

from __future__ import annotations

import statistics
from collections import Counter
from itertools import groupby
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grumem.core.confidence import sign_test, wilson
from grumem.core.evaluation import (
    RunSource,
    TrajectoryOutcome,
    compare,
    pair,
    policy_figures,
    trajectory_outcome,
)
from grumem.core.evidence import Labels
from grumem.io.tokenizer import cl100k_tokens
from grumem.records.compare import CompareResult, Estimate
from grumem.records.log import LogLine
from support.policy_logs import (
    Abort,
    Fixture,
    Gates,
    Reasked,
    Turn,
    Unparsed,
    always_continue,
    end_at_once,
    fixture,
    follow_labels,
    policy_log,
)

FX = fixture()
TOKENS = cl100k_tokens()
SOURCE = RunSource("log.jsonl", "0" * 64)
CHUNKS = {"s-alpha": 4, "s-beta": 7, "s-gamma": 2}
ALL_CHUNKS = 2 * sum(CHUNKS.values())  # every session once per query: 26


def outcomes(lines: list[dict[str, Any]], fx: Fixture = FX) -> list[TrajectoryOutcome]:
    labels = Labels("labels.jsonl", fx.labels)
    records = [LogLine.convert(line) for line in lines]
    return [
        trajectory_outcome(
            list(group),
            labels,
            [sha for _, sha in fx.sessions[tid.split("/")[2]]],
            TOKENS.count_cached,
        )
        for tid, group in groupby(records, key=lambda r: r.trajectory_id)
    ]


def figures(lines: list[dict[str, Any]], **kw: Any):
    return policy_figures(outcomes(lines), SOURCE, **kw)


def ratio(e: Estimate | None) -> tuple[Any, Any, Any]:
    assert e is not None
    return e.value, e.numerator, e.denominator


def test_a_policy_that_ends_at_t1_reads_one_chunk_per_trajectory() -> None:
    p = figures(policy_log(end_at_once))
    assert (p.trajectories, p.aborted, p.turns, p.asks) == (6, 0, 6, 6)
    assert p.levels.to_dict() == {"L1": 0, "L2": 6}
    assert ratio(p.parse_rate) == (1.0, 6, 6)
    assert ratio(p.asks_parse_rate) == (1.0, 6, 6)
    # it says no at t=1, where only q2/s-beta is evidence
    assert ratio(p.update_agreement) == (round(5 / 6, 6), 5, 6)
    assert ratio(p.update_agreement_parsed) == (round(5 / 6, 6), 5, 6)
    assert ratio(p.update_precision) == (None, 0, 0)
    assert p.update_precision.ci is None
    assert ratio(p.update_recall) == (0.0, 0, 1)
    # on time where the last evidence is t=1 (q2/s-beta); early in q1/s-alpha, q1/s-beta
    assert ratio(p.exit.on_time) == (round(1 / 6, 6), 1, 6)
    assert ratio(p.exit.early) == (round(2 / 6, 6), 2, 6)
    assert ratio(p.exit.late) == (0.0, 0, 6)
    assert ratio(p.exit.no_evidence) == (0.5, 3, 6)
    assert ratio(p.exit.no_decision) == (0.0, 0, 6)
    assert p.exit_offset.histogram == {"-4": 1, "-1": 1, "0": 1}
    assert ratio(p.exit_offset.mean) == (round(-5 / 3, 6), -5, 3)
    assert ratio(p.chunks_read_mean) == (1.0, 6, 6)
    assert ratio(p.chunks_total_mean) == (round(ALL_CHUNKS / 6, 6), ALL_CHUNKS, 6)
    assert ratio(p.speedup) == (round(ALL_CHUNKS / 6, 6), ALL_CHUNKS, 6)
    # "no" keeps the memory empty
    assert {t: m.to_dict() for t, m in p.memory_tokens_by_t.items()} == {
        "1": {"turns": 6, "mean": 0.0, "median": 0, "max": 0}
    }
    assert ratio(p.latency_s_per_trajectory) == (0.25, 1.5, 6)
    assert ratio(p.latency_s_per_turn) == (0.25, 1.5, 6)
    # the recorded usage of the six answers n = 1..6 (support.policy_logs.completion)
    completion = sum(30 + n % 5 for n in range(1, 7))
    prompt = sum(300 + n % 7 for n in range(1, 7))
    assert ratio(p.completion_tokens_per_trajectory) == (round(completion / 6, 6), completion, 6)
    assert ratio(p.prompt_tokens_per_trajectory) == (round(prompt / 6, 6), prompt, 6)


def test_a_policy_that_always_continues_reads_every_chunk_and_is_late() -> None:
    p = figures(policy_log(always_continue, usage=False))
    assert (p.trajectories, p.turns) == (6, ALL_CHUNKS)
    assert ratio(p.parse_rate) == (1.0, 26, 26)
    # it says no everywhere: it disagrees on the 4 evidence chunks
    assert ratio(p.update_agreement) == (round(22 / 26, 6), 22, 26)
    assert ratio(p.update_recall) == (0.0, 0, 4)
    assert ratio(p.exit.late) == (0.5, 3, 6)
    assert ratio(p.exit.no_evidence) == (0.5, 3, 6)
    assert ratio(p.exit.on_time)[1] == ratio(p.exit.early)[1] == 0
    # t_exit is the last chunk: s-alpha 4 - 2, s-beta 7 - 5 (q1) and 7 - 1 (q2)
    assert p.exit_offset.histogram == {"2": 2, "6": 1}
    assert ratio(p.chunks_read_mean) == ratio(p.chunks_total_mean)
    assert ratio(p.speedup) == (1.0, 26, 26)
    turns_at = {t: m.turns for t, m in p.memory_tokens_by_t.items()}
    assert turns_at == {"1": 6, "2": 6, "3": 4, "4": 4, "5": 2, "6": 2, "7": 2}
    # no usage in the bodies: never guessed
    assert p.completion_tokens_per_trajectory is None
    assert p.prompt_tokens_per_trajectory is None


def test_a_policy_that_follows_the_labels_agrees_and_exits_on_time() -> None:
    lines = policy_log(follow_labels)
    p = figures(lines)
    # it ends at the last evidence: q1 s-alpha 2, s-beta 5, q2 s-beta 1; reads on elsewhere
    assert p.turns == 2 + 5 + 2 + 4 + 1 + 2
    assert ratio(p.update_agreement) == (1.0, 16, 16)
    assert ratio(p.update_precision) == (1.0, 4, 4)
    assert ratio(p.update_recall) == (1.0, 4, 4)
    assert ratio(p.exit.on_time) == (0.5, 3, 6)  # every trajectory with evidence
    assert ratio(p.exit.no_evidence) == (0.5, 3, 6)
    assert p.exit_offset.histogram == {"0": 3}
    assert ratio(p.exit_offset.mean) == (0.0, 0, 3)
    assert ratio(p.chunks_read_mean) == (round(16 / 6, 6), 16, 6)
    assert ratio(p.speedup) == (1.625, 26, 16)
    # the memory's tokens at each t: the memories the log records, counted
    at: dict[int, list[int]] = {}
    for line in lines:
        memory = line["memory_after"]
        at.setdefault(line["t"], []).append(0 if memory is None else TOKENS.count(memory))
    assert {int(t): (m.turns, m.max) for t, m in p.memory_tokens_by_t.items()} == {
        t: (len(v), max(v)) for t, v in at.items()
    }
    assert p.memory_tokens_by_t["2"].mean == round(statistics.fmean(at[2]), 6)
    assert max(at[5]) > max(at[1]) > 0  # it remembers what it kept


def test_rates_carry_their_wilson_intervals_and_means_a_bootstrap() -> None:
    p = figures(policy_log(end_at_once))
    assert p.update_agreement.method == "wilson"
    assert p.update_agreement.ci == [round(x, 6) for x in wilson(5, 6)]  # type: ignore[union-attr]
    assert p.chunks_total_mean.method == "bootstrap"
    ci = p.chunks_total_mean.ci
    # sessions are resampled: a mean between the smallest and the largest session's
    assert ci is not None and 2 <= ci[0] <= 26 / 6 <= ci[1] <= 7
    # chunks read are 1 in every session: no spread
    assert p.chunks_read_mean.ci == [1.0, 1.0]
    assert figures(policy_log(end_at_once)) == p  # seeded: the same figures every time


def test_unparsed_turns_reasks_and_aborts_are_counted_never_defaulted() -> None:
    def flaky(turn: Turn):
        if turn.session == "s-gamma":
            return Abort() if turn.t == 1 else Gates(False, False)
        if turn.t == 2:
            return Unparsed()
        if turn.t == 3:
            return Reasked(("<check>yes</check>",), Gates(turn.label, False))
        return Gates(turn.label, turn.t == 4)

    p = figures(policy_log(flaky))
    # s-alpha: t=1..4 (end at 4); s-beta: t=1..4 (end at 4); s-gamma: aborted at t=1
    assert (p.trajectories, p.aborted, p.turns, p.asks) == (6, 2, 16, 20)
    assert ratio(p.parse_rate) == (0.75, 12, 16)
    assert ratio(p.asks_parse_rate) == (0.6, 12, 20)
    # unparsed t=2 turns disagree in the headline, and are left out of the other
    assert ratio(p.update_agreement) == (0.75, 12, 16)
    assert ratio(p.update_agreement_parsed) == (1.0, 12, 12)
    # recall misses the evidence at t=2 (q1 s-alpha, q1 s-beta), finds q2 s-beta t=1
    assert ratio(p.update_recall) == (round(1 / 3, 6), 1, 3)
    assert ratio(p.exit.no_decision) == (round(2 / 6, 6), 2, 6)
    assert p.exit_no_decision.to_dict() == {"aborted": 2, "no_exit_gate": 0}
    # the aborted trajectories read nothing and are left out of chunks read
    assert ratio(p.chunks_read_mean) == (4.0, 16, 4)
    assert ratio(p.speedup) == (round(22 / 16, 6), 22, 16)
    # latency: 20 asks of 0.25 s, over the 4 trajectories not cut short
    assert ratio(p.latency_s_per_trajectory) == (1.25, 5.0, 4)


def test_a_pair_on_the_same_keys() -> None:
    follow = outcomes(policy_log(follow_labels))
    once = outcomes(policy_log(end_at_once))
    pr = pair("follow", follow, "once", once, resamples=1000, seed=0)
    assert (pr.keys, pr.groups, pr.only_a, pr.only_b) == (6, 6, 0, 0)
    f = pr.figures
    # exit on time: 3 of 6 against 1 of 6; follow alone is on time in q1/s-alpha, q1/s-beta
    assert (f.exit_on_time.value_a, f.exit_on_time.value_b) == (0.5, round(1 / 6, 6))
    assert f.exit_on_time.difference == round(2 / 6, 6)
    assert (f.exit_on_time.wins_a, f.exit_on_time.wins_b, f.exit_on_time.ties) == (2, 0, 4)
    assert f.exit_on_time.p_value == sign_test(2, 0) == 0.5
    # it reads more (lower is better) in five groups, the same in q2/s-beta: beyond noise
    c = f.chunks_read_mean
    assert (c.better, c.wins_a, c.wins_b, c.ties) == ("lower", 0, 5, 1)
    assert c.ci is not None and c.ci[0] > 0 and c.beyond_noise and c.winner == "once"
    assert f.speedup.winner == "once" and f.speedup.ci is not None and f.speedup.ci[1] < 0
    # agreement 1 against 5/6: a single group differs, often not drawn: within noise
    a = f.update_agreement
    assert a.difference == round(1 / 6, 6) and not a.beyond_noise and a.winner is None
    assert a.ci is not None and a.ci[0] == 0
    assert f.update_precision.value_b is None and f.update_precision.difference is None
    assert f.update_precision.ci is None and f.update_precision.winner is None


def test_a_pair_only_on_shared_keys() -> None:
    fx_keys = [("q1", "s-alpha", 0), ("q1", "s-beta", 0), ("q2", "s-beta", 0)]
    a = outcomes(policy_log(follow_labels, keys=fx_keys[:2]))
    b = outcomes(policy_log(follow_labels, keys=fx_keys[1:]))
    pr = pair("a", a, "b", b, resamples=100, seed=0)
    assert (pr.keys, pr.groups, pr.only_a, pr.only_b) == (1, 1, 1, 1)
    # one group: nothing to resample
    assert pr.figures.parse_rate.ci is None and pr.figures.parse_rate.difference == 0


def test_a_key_twice_in_one_policy_is_refused() -> None:
    once = outcomes(policy_log(end_at_once))
    with pytest.raises(ValueError, match="share \\(query_id, session, sample\\)"):
        pair("a", once + once[:1], "b", once)


def test_compare_sorts_policies_and_pairs_each_two() -> None:
    logs = {n: outcomes(policy_log(p)) for n, p in (("z", end_at_once), ("a", follow_labels))}
    logs["m"] = logs["z"]
    result = compare(
        {n: (SOURCE, o) for n, o in logs.items()}, "labels.jsonl", "1" * 64, 3, resamples=50
    )
    assert list(result.policies) == ["a", "m", "z"]
    assert [(p.a, p.b) for p in result.pairs] == [("a", "m"), ("a", "z"), ("m", "z")]
    assert result.settings.resamples == 50
    assert CompareResult.decode(result.encode()) == result


# --- the property: the figures are a direct count of the log --------------------------------

KEYS = [(q, s) for q in FX.questions for s in FX.sessions]


@st.composite
def generated_log(draw: st.DrawFn) -> tuple[list[dict[str, Any]], bool]:
    keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=4, unique=True))
    samples = draw(st.integers(1, 2))
    level = draw(st.sampled_from(["L1", "L2"]))
    usage = draw(st.booleans())
    answers = st.one_of(
        st.builds(Gates, st.booleans(), st.booleans()),
        st.just(Unparsed()),
        st.builds(Reasked, st.just(("no tags",)), st.builds(Gates, st.booleans(), st.booleans())),
        st.builds(Abort),
    )
    latencies = st.sampled_from([0.1, 0.25, 1.5, 3.125])
    return (
        policy_log(
            lambda turn: draw(answers),
            level=level,
            usage=usage,
            latency=lambda turn: draw(latencies),
            keys=[(q, s, k) for q, s in keys for k in range(samples)],
        ),
        usage,
    )


def direct(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures counted straight from the log's JSON, label by label."""
    by_tid: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        by_tid.setdefault(line["trajectory_id"], []).append(line)
    ok = [line for line in lines if line["status"] == "ok"]
    label = {id(line): FX.labels[(line["query_id"], line["chunk_sha"])] for line in ok}
    asks = [a for line in ok for a in (*line["earlier_asks"], line)]
    exits: Counter[str] = Counter()
    done = [t for t in by_tid.values() if t[-1]["status"] == "ok"]
    for traj in by_tid.values():
        turns = [line for line in traj if line["status"] == "ok"]
        ends = [line["t"] for line in turns if line["exit_gate"] is True]
        evidence = FX.evidence(traj[0]["query_id"], traj[0]["session"])
        last = max((t for t, e in enumerate(evidence, 1) if e), default=None)
        if ends:
            t_exit = ends[0]
        elif traj[-1]["status"] == "aborted" or all(line["exit_gate"] is None for line in turns):
            exits["no_decision"] += 1
            continue
        else:
            t_exit = turns[-1]["t"]
        exits[
            "no_evidence"
            if last is None
            else "on_time"
            if t_exit == last
            else "early"
            if t_exit < last
            else "late"
        ] += 1
    read = sum(1 for t in done for line in t if line["status"] == "ok")
    total = sum(len(FX.sessions[t[0]["session"]]) for t in done)
    return {
        "trajectories": len(by_tid),
        "turns": len(ok),
        "asks": len(asks),
        "parse_rate": (sum(line["parsed"] for line in ok), len(ok)),
        "asks_parse_rate": (sum(a["parsed"] for a in asks), len(asks)),
        "update_agreement": (
            sum(line["update_gate"] is label[id(line)] for line in ok),
            len(ok),
        ),
        "update_precision": (
            sum(line["update_gate"] is True and label[id(line)] for line in ok),
            sum(line["update_gate"] is True for line in ok),
        ),
        "update_recall": (
            sum(line["update_gate"] is True and label[id(line)] for line in ok),
            sum(label[id(line)] for line in ok),
        ),
        "exit": {k: exits[k] for k in ("on_time", "early", "late", "no_evidence", "no_decision")},
        "chunks_read_mean": (read, len(done)),
        "speedup": (total, read),
        "latency_s_per_turn": sum(a["response"]["latency_s"] for a in asks),
    }


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(generated_log())
def test_the_figures_are_a_direct_count_of_the_log(generated) -> None:
    lines, usage = generated
    p = figures(lines, resamples=20)
    d = direct(lines)
    assert (p.trajectories, p.turns, p.asks) == (d["trajectories"], d["turns"], d["asks"])
    for name in ("parse_rate", "asks_parse_rate", "update_agreement", "update_precision"):
        assert ratio(getattr(p, name))[1:] == d[name], name
    assert ratio(p.update_recall)[1:] == d["update_recall"]
    assert {k: getattr(p.exit, k).numerator for k in d["exit"]} == d["exit"]
    assert all(getattr(p.exit, k).denominator == d["trajectories"] for k in d["exit"])
    assert ratio(p.chunks_read_mean)[1:] == d["chunks_read_mean"]
    assert ratio(p.speedup)[1:] == d["speedup"]
    assert p.latency_s_per_turn.numerator == pytest.approx(d["latency_s_per_turn"], abs=1e-6)
    for e in (p.parse_rate, p.update_agreement, p.exit.on_time):
        if e.value is None:
            assert e.denominator == 0 and e.ci is None
        else:
            assert e.value == round(e.numerator / e.denominator, 6)
            assert e.ci is not None and e.ci[0] <= e.value <= e.ci[1]
    completed = p.trajectories - p.aborted
    assert (p.completion_tokens_per_trajectory is not None) == (usage or completed == 0)
