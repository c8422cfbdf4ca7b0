"""grumem.verl.reward: verl's custom reward function, scored by the corpus's rules."""

from __future__ import annotations

import importlib.util
import inspect

import pytest

import grumem.verl.reward as verl_reward
from grumem.verl.reward import BEYOND_RECORD, FORMAT_FAILURE, compute_score

YES_END = "<think>x</think><check>yes</check><update>m</update><next>end</next>"
NO_CONTINUE = "<think>x</think><check>no</check><update>m</update><next>continue</next>"


def info(t=1, exit_gates=(False, False, False), level="L1", t_last=2, other=True, aborted=False):
    return {
        "t": t,
        "level": level,
        "exit_gates": list(exit_gates),
        "aborted": aborted,
        "t_last_evidence": t_last,
        "other_asks_parsed": other,
    }


def score(solution, truth="yes", **kw):
    weights = {k: kw.pop(k) for k in list(kw) if k.startswith("w_") or k == "format_failure"}
    return compute_score("grumem", solution, truth, info(**kw), **weights)


def test_parsed_answer_components_and_weighted_score() -> None:
    # yes/end at t=2 with label yes and last evidence at t=2: on time
    r = score(YES_END, t=2)
    assert r == {
        "score": 1.0 + 0.0 + 1.0,
        "r_update": 1,
        "r_exit": 0.0,
        "r_exit_reason": None,
        "r_format": 1,
        "parsed": True,
        "update_gate": True,
        "exit_gate": True,
        "parse_error": None,
    }
    # no/continue at t=1 of a trajectory that never ends: exits late at t=3
    r = score(NO_CONTINUE, t=1, w_update=2.0, w_exit=4.0, w_format=0.5)
    assert (r["r_update"], r["r_exit"], r["r_format"]) == (-1, -0.5, 1)
    assert r["score"] == 2.0 * -1 + 4.0 * -0.5 + 0.5 * 1


def test_end_before_evidence_is_early() -> None:
    assert score(YES_END, t=1)["r_exit"] == -0.75


def test_unparsed_scores_the_format_failure_and_defaults_no_gate() -> None:
    r = score("<think>x</think><check>maybe</check><update>m</update><next>end</next>")
    assert r["score"] == FORMAT_FAILURE
    assert (r["parsed"], r["update_gate"], r["exit_gate"], r["parse_error"]) == (
        False,
        None,
        None,
        "check",
    )
    assert (r["r_update"], r["r_format"]) == (-1, 0)
    assert score("no tags at all", format_failure=-7.0)["score"] == -7.0


def test_format_failure_is_below_every_parsed_score() -> None:
    worst = min(
        score(answer, truth, t=t, other=other)["score"]
        for answer in (YES_END, NO_CONTINUE)
        for truth in ("yes", "no")
        for t in (1, 2, 3)
        for other in (True, False)
    )
    assert worst > FORMAT_FAILURE


def test_other_unparsed_asks_make_r_format_zero() -> None:
    assert score(YES_END, t=2, other=False)["r_format"] == 0


def test_exit_comes_from_the_recorded_gates_with_this_turn_replaced() -> None:
    # an earlier recorded end at t=1 decides the exit, whatever turn 3 says
    r = score(NO_CONTINUE, t=3, exit_gates=(True, False, False), t_last=3)
    assert r["r_exit"] == -0.75
    # L2: a new end at t=1 stops the trajectory there
    r = score(YES_END, t=1, exit_gates=(False, False, False), level="L2", t_last=1)
    assert r["r_exit"] == 0.0


def test_l2_continue_past_a_recorded_end_is_beyond_the_record() -> None:
    r = score(NO_CONTINUE, t=2, exit_gates=(False, True), level="L2", t_last=2)
    assert (r["r_exit"], r["r_exit_reason"]) == (None, BEYOND_RECORD)
    assert r["score"] == -1.0 + 1.0  # r_exit null adds nothing


def test_no_evidence_and_aborted_have_no_exit_reward() -> None:
    assert score(YES_END, t=1, t_last=None)["r_exit_reason"] == "no_evidence"
    r = score(NO_CONTINUE, t=2, exit_gates=(False, False), aborted=True)
    assert (r["r_exit"], r["r_exit_reason"]) == (None, "aborted")


@pytest.mark.parametrize(
    "truth, extra, match",
    [
        ("maybe", info(), "ground_truth 'maybe'"),
        ("yes", None, "needs extra_info"),
        ("yes", {"t": 1}, "extra_info lacks level"),
        ("yes", info(t=4), "extra_info.t 4"),
    ],
)
def test_bad_row_fails_naming_the_field(truth, extra, match) -> None:
    with pytest.raises(ValueError, match=match):
        compute_score("grumem", YES_END, truth, extra)


def test_numpy_values_score_as_python_ones() -> None:
    import numpy as np

    plain = info(t=3, exit_gates=(False, True, False))
    numpy = {
        **plain,
        "t": np.int64(3),
        "exit_gates": np.array([False, True, False]),
        "aborted": np.bool_(False),
        "t_last_evidence": np.int64(2),
        "other_asks_parsed": np.bool_(True),
    }
    got = compute_score("grumem", NO_CONTINUE, "no", numpy)
    assert got == compute_score("grumem", NO_CONTINUE, "no", plain)
    assert got["r_exit"] == 0.0  # the recorded np.True_ at t=2 is seen as an end


@pytest.mark.parametrize(
    "field, value, as_written",
    [
        ("t", 3.0, 3),
        ("t_last_evidence", 2.0, 2),
        ("t_last_evidence", float("nan"), None),
        ("exit_gates", (False, True, False), [False, True, False]),
        ("exit_gates", "object array", [False, True, None]),
        ("t_last_evidence", "np.float64", 2),
    ],
)
def test_lossless_forms_of_a_value_score_as_the_value(field, value, as_written) -> None:
    """What pandas and verl's readers make of a written value (an integral float, NaN
    for a null integer inside a struct, numpy scalars and arrays) scores as the value."""
    import numpy as np

    if value == "object array":
        value = np.array([False, True, None], dtype=object)
    elif value == "np.float64":
        value = np.float64(2.0)
    plain = info(t=3, exit_gates=(False, True, False))
    got = compute_score("grumem", NO_CONTINUE, "no", {**plain, field: value})
    assert got == compute_score("grumem", NO_CONTINUE, "no", {**plain, field: as_written})


@pytest.mark.parametrize(
    "field, value, match",
    [
        ("t", 2.5, "extra_info.t 2.5 is not a turn"),
        ("t", "2", "extra_info.t '2' is not a turn"),
        ("t", True, "extra_info.t True is not a turn"),
        ("t", float("nan"), "extra_info.t nan is not a turn"),
        ("t", 0, "extra_info.t 0 is not a turn"),
        ("t_last_evidence", 2.5, "extra_info.t_last_evidence 2.5 is neither a turn nor null"),
        ("t_last_evidence", float("inf"), "t_last_evidence inf is neither"),
        ("aborted", 0, "extra_info.aborted: 0 is not a boolean"),
        ("aborted", float("nan"), "extra_info.aborted: nan is not a boolean"),
        ("exit_gates", "yes", "extra_info.exit_gates: 'yes' is not a list"),
        ("exit_gates", [False, 1.0, False], r"extra_info.exit_gates\[1\]: 1.0 is not a boolean"),
        ("level", "L3", "extra_info.level: 'L3' is not L1 or L2"),
    ],
)
def test_a_value_that_is_not_its_written_form_is_refused_naming_the_field(
    field, value, match
) -> None:
    plain = info(t=2, exit_gates=(False, True, False))
    with pytest.raises(ValueError, match=match):
        compute_score("grumem", YES_END, "yes", {**plain, field: value})


def test_loads_by_path_as_verl_does() -> None:
    """verl imports the file at reward.custom_reward_function.path under its own
    module name, outside the grumem package."""
    path = inspect.getfile(verl_reward)
    spec = importlib.util.spec_from_file_location("custom_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = module.compute_score
    assert fn is not compute_score
    r = fn(data_source="grumem", solution_str=YES_END, ground_truth="yes", extra_info=info(t=2))
    assert r == compute_score("grumem", YES_END, "yes", info(t=2))


def export_fixture(tmp_path, l2: bool) -> list[dict]:
    """turns.parquet rows of the export fixture; with `l2`, as in test_stage_export's
    whole-session test: demo/q1/s-beta/1 an L2 run that stopped after its `end`
    at t=2, and t_last_evidence over the session chunks (5)."""
    import shutil

    import pyarrow.parquet as pq

    from grumem.stages.export import TURNS, export
    from support.export import FILES, FIXTURE, calibrate, inputs, rewrite_log

    for name in FILES:
        shutil.copy(FIXTURE / name, tmp_path / name)
    calibrate(tmp_path)
    chunks: tuple[str, ...] = ()
    if l2:

        def l2_stop(i, rec):
            if rec["trajectory_id"] != "demo/q1/s-beta/1":
                return rec
            return {**rec, "level": "L2"} if rec["t"] <= 2 else None

        rewrite_log(tmp_path, l2_stop)
        chunks = (str(tmp_path / "chunks.jsonl"),)
    export(inputs(tmp_path, chunks=chunks))
    return pq.read_table(tmp_path / "corpus" / TURNS).to_pylist()


def test_l2_rollouts_are_scored_against_the_recorded_trajectory(tmp_path) -> None:
    rows = export_fixture(tmp_path, l2=True)
    t1, t2 = (r for r in rows if r["extra_info"]["trajectory_id"] == "demo/q1/s-beta/1")
    assert t2["extra_info"]["exit_gates"] == [False, True]
    assert (t2["extra_info"]["r_exit"], t2["extra_info"]["t_last_evidence"]) == (-0.75, 5)

    def rescore(row, answer):
        e = row["extra_info"]
        return compute_score(row["data_source"], answer, row["reward_model"]["ground_truth"], e)

    # continuing past the recorded end: where it would stop was never recorded
    assert rescore(t2, NO_CONTINUE)["r_exit_reason"] == BEYOND_RECORD
    # ending at t=1 instead: still early against the session's last evidence (5)
    assert rescore(t1, YES_END)["r_exit"] == -0.75


def parquet_rows(path, reader: str) -> list[dict]:
    """The rows of a turns.parquet as an evaluation script reads them: pyarrow's Python
    values, or pandas' (numpy arrays, a null integer in a struct as NaN)."""
    if reader == "pyarrow":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    import pandas as pd

    return pd.read_parquet(path).to_dict("records")


@pytest.mark.parametrize("reader", ["pyarrow", "pandas"])
@pytest.mark.parametrize("l2", [False, True], ids=["L1", "L2-whole-sessions"])
def test_recorded_answers_get_the_corpus_rewards(tmp_path, l2, reader) -> None:
    """Every row of the export fixture's turns.parquet, read by pyarrow or by pandas and
    scored with its recorded response, gives back the rewards the corpus holds for that
    turn (the unparsed turn included)."""
    from grumem.stages.export import TURNS

    export_fixture(tmp_path, l2)
    corpus = parquet_rows(tmp_path / "corpus" / TURNS, "pyarrow")
    rows = parquet_rows(tmp_path / "corpus" / TURNS, reader)
    assert len(rows) == len(corpus) == (19 if l2 else 24)
    seen = set()
    for row, written in zip(rows, corpus, strict=True):
        e, w = row["extra_info"], written["extra_info"]
        got = compute_score(
            data_source=row["data_source"],
            solution_str=e["response"],
            ground_truth=row["reward_model"]["ground_truth"],
            extra_info=e,
        )
        want = {k: w[k] for k in ("r_update", "r_exit", "r_exit_reason", "r_format", "parsed")}
        want |= {"update_gate": w["update_gate"], "exit_gate": w["exit_gate"]}
        assert {k: got[k] for k in want} == want, (w["trajectory_id"], w["t"])
        seen.add((w["parsed"], w["r_format"], w["r_exit"]))
    # the fixture covers unparsed, r_format 0 and 1, and every kind of r_exit
    assert {p for p, _, _ in seen} == {True, False}
    assert {f for _, f, _ in seen} == {0, 1}
    assert {x for _, _, x in seen} >= {0.0, -0.75, -0.5, None}
