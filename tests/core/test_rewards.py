"""Reward assembly (card 004): examples, and hypothesis properties of the invariants."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grumem.core.rewards import (
    TurnGates,
    exit_turn,
    last_evidence_turn,
    r_exit,
    r_format,
    r_update,
    score_trajectory,
)

gate = st.one_of(st.none(), st.booleans())


@st.composite
def recorded_turn(draw, t: int) -> TurnGates:
    parsed = draw(st.booleans())
    return TurnGates(
        t=t,
        parsed=parsed,
        update_gate=draw(st.booleans()) if parsed else None,
        exit_gate=draw(st.booleans()) if parsed else None,
        label=draw(st.booleans()),
    )


@st.composite
def trajectory(draw, min_size: int = 1) -> list[TurnGates]:
    n = draw(st.integers(min_size, 30))
    return [draw(recorded_turn(t)) for t in range(1, n + 1)]


def test_examples() -> None:
    assert r_update(True, True) == r_update(False, False) == 1
    assert r_update(True, False) == r_update(False, True) == -1
    assert r_update(None, True) == r_update(None, False) == -1
    assert exit_turn([(1, False), (2, None), (3, True), (4, True)]) == 3
    assert exit_turn([(1, False), (2, None)]) == 2
    assert last_evidence_turn([(1, True), (2, False), (3, True), (4, False)]) == 3
    assert last_evidence_turn([(1, False)]) is None
    assert (r_exit(5, 5), r_exit(2, 5), r_exit(7, 5), r_exit(3, None)) == (0, -0.75, -0.5, None)
    assert r_format([True, True]) == 1 and r_format([True, False, True]) == 0
    with pytest.raises(ValueError):
        r_format([])
    with pytest.raises(ValueError):
        exit_turn([])


@given(gate, st.booleans())
def test_r_update_is_match(update_gate, label) -> None:
    r = r_update(update_gate, label)
    assert r in (1, -1)
    assert (r == 1) == (update_gate is not None and update_gate is label)


@given(trajectory())
def test_r_update_unparsed_never_matches(turns) -> None:
    rewards = score_trajectory(turns)
    assert len(rewards.r_update) == len(turns)
    for g, r in zip(turns, rewards.r_update, strict=True):
        if not g.parsed:
            assert r == -1


@given(trajectory(), st.data())
def test_r_format_is_per_trajectory(turns, data) -> None:
    r = score_trajectory(turns).r_format
    assert r == (1 if all(g.parsed for g in turns) else 0)
    # one bad turn anywhere zeroes the whole trajectory
    i = data.draw(st.integers(0, len(turns) - 1))
    broken = list(turns)
    broken[i] = TurnGates(turns[i].t, False, None, None, turns[i].label)
    assert score_trajectory(broken).r_format == 0
    # order does not matter
    assert r_format(reversed([g.parsed for g in turns])) == r


@given(trajectory())
def test_t_exit_is_first_recorded_exit_else_last(turns) -> None:
    rewards = score_trajectory(turns)
    exits = [g.t for g in turns if g.exit_gate]
    if not any(g.parsed for g in turns):
        # no exit gate recorded at all: no exit decision to score
        assert (rewards.t_exit, rewards.r_exit, rewards.r_exit_reason) == (
            None,
            None,
            "no_exit_gate",
        )
        return
    assert rewards.t_exit == (exits[0] if exits else turns[-1].t)
    assert rewards.t_exit in {g.t for g in turns}


@given(trajectory(), st.lists(st.booleans(), min_size=1, max_size=40))
def test_aborted_without_end_has_no_r_exit(turns, session) -> None:
    """A run cut short (budget, failed request) before a recorded end made no
    exit decision; with an end recorded, the abort changes nothing."""
    evidence = list(enumerate(session, start=1))
    cut = score_trajectory(turns, evidence, aborted=True)
    ran = score_trajectory(turns, evidence)
    if any(g.exit_gate for g in turns):
        assert cut == ran
    else:
        assert (cut.t_exit, cut.r_exit, cut.r_exit_reason) == (None, None, "aborted")
        assert cut.r_update == ran.r_update and cut.r_format == ran.r_format


def test_exit_reasons_by_example() -> None:
    def g(t, exit_gate, label=False):
        return TurnGates(
            t, exit_gate is not None, None if exit_gate is None else False, exit_gate, label
        )

    # ran out of chunks without end: the last turn (late here)
    r = score_trajectory([g(1, False, True), g(2, False)])
    assert (r.t_exit, r.r_exit, r.r_exit_reason) == (2, -0.5, None)
    # an L2 run whose server failed at t=2, before the evidence at t=5: not "early"
    r = score_trajectory([g(1, False)], [(t, t == 5) for t in range(1, 8)], aborted=True)
    assert (r.t_exit, r.r_exit, r.r_exit_reason) == (None, None, "aborted")
    # no turn parsed: not "on time" at the last turn
    r = score_trajectory([g(1, None), g(2, None, True)])
    assert (r.t_exit, r.r_exit, r.r_exit_reason) == (None, None, "no_exit_gate")
    # no evidence: a decision, but nothing to be on time for
    r = score_trajectory([g(1, True)])
    assert (r.t_exit, r.r_exit, r.r_exit_reason) == (1, None, "no_evidence")


def test_r_format_counts_every_ask() -> None:
    """A turn that parsed only on its re-ask still fails r_format."""
    turns = [TurnGates(1, True, False, False, False), TurnGates(2, True, True, False, True)]
    assert score_trajectory(turns).r_format == 1
    assert score_trajectory(turns, parsed_asks=[True, False, True]).r_format == 0


@given(trajectory(), trajectory())
def test_r_exit_ignores_turns_after_the_exit(turns, more) -> None:
    """An L1 loop goes on after E_t: the extra turns must not move the exit (card 004 a4)."""
    if not any(g.exit_gate for g in turns):
        return
    k = next(g.t for g in turns if g.exit_gate)
    head = turns[:k]
    tail = [
        TurnGates(k + i, g.parsed, g.update_gate, g.exit_gate, False)
        for i, g in enumerate(more, start=1)
    ]  # later chunks hold no evidence
    assert score_trajectory(head).t_exit == score_trajectory(head + tail).t_exit == k
    assert score_trajectory(head).r_exit == score_trajectory(head + tail).r_exit


@given(trajectory())
def test_r_exit_against_last_evidence(turns) -> None:
    rewards = score_trajectory(turns)
    evidence = [g.t for g in turns if g.label]
    assert rewards.t_last_evidence == (max(evidence) if evidence else None)
    if rewards.t_exit is None:
        assert rewards.r_exit is None and rewards.r_exit_reason == "no_exit_gate"
    elif not evidence:
        assert rewards.r_exit is None
    elif rewards.t_exit == max(evidence):
        assert rewards.r_exit == 0
    elif rewards.t_exit < max(evidence):
        assert rewards.r_exit == -0.75
    else:
        assert rewards.r_exit == -0.5
    assert rewards.r_outcome is None


@given(trajectory(), st.lists(st.booleans(), min_size=1, max_size=40))
def test_session_evidence_overrides_turn_labels(turns, session) -> None:
    evidence = list(enumerate(session, start=1))
    rewards = score_trajectory(turns, evidence)
    assert rewards.t_last_evidence == last_evidence_turn(evidence)
    # r_update still compares each turn's own label
    assert rewards.r_update == tuple(r_update(g.update_gate, g.label) for g in turns)
