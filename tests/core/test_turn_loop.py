"""The GRU-Mem turn order (grumem.core.turn_loop), driven with lists of answers: the
prompt of each turn, the budget (an abort naming the component), the strict read
of each answer and its re-asks, the memory rule, the exit gate at L2 only, a failed
request; and the budget's counts, decided on bounds first and exact near a limit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grumem.core.json_text import sha256_text
from grumem.core.loop import user_message
from grumem.core.template import NO_PREVIOUS_MEMORY, Budget, memory_text
from grumem.core.tokens import Encoder, Tokens, token_bound
from grumem.core.turn_loop import (
    Abort,
    Answer,
    Answered,
    Ask,
    LoopRules,
    Reply,
    TurnLoop,
    abort_record,
    check_turn_budget,
    exchange_record,
    turn_tokens,
)
from grumem.errors import BudgetError
from grumem.io.template_files import GRU_MEM_TEMPLATE, load_prompt_builder
from grumem.io.tokenizer import cl100k_tokens
from grumem.records.prompt import PromptRecord, TokenCounts
from grumem.records.response import Attempt, Request
from grumem.stages.prompts import plan

TOKENS = cl100k_tokens()


def gate(check: bool, memory: str = "m", end: bool = False) -> str:
    return (
        f"<think>t</think><check>{'yes' if check else 'no'}</check><update>{memory}</update>"
        f"<next>{'end' if end else 'continue'}</next>"
    )


GARBLED = "I think the memory should change."


def prompts(
    tmp_path: Path, sections: list[str], system: str | None = None, question: str = "What failed?"
) -> list[PromptRecord]:
    """One trajectory's prompt records, as the prompts stage makes them."""
    chunks = tmp_path / "s.jsonl"
    lines = [
        {"session": "s", "index": i, "records": [{"role": "user", "text": text}]}
        for i, text in enumerate(sections)
    ]
    chunks.write_text("".join(json.dumps(c) + "\n" for c in lines), encoding="utf-8")
    builder = load_prompt_builder(GRU_MEM_TEMPLATE, system, Budget())
    records = plan("p", [str(chunks)], [{"id": "q", "question": question}], builder, 1)
    return [PromptRecord.convert(r) for r in records]


def rules(
    level: str = "L1",
    parse_retries: int = 0,
    samples: int = 1,
    budget: Budget | None = None,
    max_tokens: int | None = None,
    tokens: Tokens = TOKENS,
) -> LoopRules:
    return LoopRules(level, parse_retries, samples, budget or Budget(), tokens, max_tokens)


def drive(
    loop: TurnLoop[PromptRecord], answers: list[Answer]
) -> tuple[list[Ask[PromptRecord]], list[Answered[PromptRecord]], Abort[PromptRecord] | None]:
    """The loop answered from a list, in order: what it asked, what each answer did,
    and the abort that ended it, if one did."""
    asks, answered, left = [], [], list(answers)
    for step in loop:
        if isinstance(step, Abort):
            return asks, answered, step
        asks.append(step)
        answered.append(loop.answer(left.pop(0)))
    assert left == [], "the loop ended with answers left"
    return asks, answered, None


# ------------------------------------------------------------------ the order


def test_each_turn_asks_the_prompt_with_the_memory_the_last_answer_left(tmp_path) -> None:
    ps = prompts(tmp_path, ["an error", "quiet", "fixed it", "more"], system="be brief")
    answers: list[Answer] = [gate(True, "  one  "), gate(False, "x"), gate(True, "two"), GARBLED]
    asks, answered, abort = drive(TurnLoop(ps, rules()), answers)
    assert abort is None
    assert [a.t for a in asks] == [1, 2, 3, 4] and [a.ask for a in asks] == [0] * 4
    # U yes: the candidate verbatim (trimmed by the parser, no more); no or unparsed: kept
    memories = [None, "one", "one", "two"]
    assert [a.memory_before for a in asks] == memories
    assert [a.memory_after for a in answered] == ["one", "one", "two", "two"]
    for a, p, memory in zip(asks, ps, memories, strict=True):
        assert a.messages == [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": p.prefix + memory_text(memory) + p.suffix},
        ]
    assert asks[0].messages[1]["content"].count(f"<memory> {NO_PREVIOUS_MEMORY} </memory>") == 1
    assert [a.gate.parsed for a in answered] == [True, True, True, False]
    assert answered[3].gate.parse_error is not None
    assert answered[3].gate.parse_error.tag == "think"
    assert all(a.settled and a.reply is None for a in answered)


def test_the_exit_gate_stops_a_trajectory_at_l2_only(tmp_path) -> None:
    ps = prompts(tmp_path, ["a", "b", "c"])
    answers: list[Answer] = [gate(False), gate(False, end=True), gate(False)]
    l1, _, _ = drive(TurnLoop(ps, rules("L1")), answers)
    l2, answered, abort = drive(TurnLoop(ps, rules("L2")), answers[:2])
    assert [a.t for a in l1] == [1, 2, 3]
    assert [a.t for a in l2] == [1, 2] and abort is None
    assert answered[1].gate.exit_gate is True


def test_an_unparsed_end_does_not_stop_a_trajectory(tmp_path) -> None:
    ps = prompts(tmp_path, ["a", "b"])
    half = "<think>t</think><check>maybe</check><update>m</update><next>end</next>"
    asks, answered, _ = drive(TurnLoop(ps, rules("L2")), [half, gate(False)])
    assert [a.t for a in asks] == [1, 2]
    assert answered[0].gate.exit_gate is None  # never defaulted


def test_an_unparsed_answer_is_asked_again_as_a_new_request(tmp_path) -> None:
    """Up to parse_retries re-asks, each with the seed past every sample's (a distinct
    request, so the cache cannot answer it with the same failure), the same messages
    and memory; the turn settles on a parse or on its last ask."""
    ps = prompts(tmp_path, ["a", "b", "c"])
    loop = TurnLoop(ps, rules(parse_retries=2, samples=3), sample=1)
    answers: list[Answer] = [GARBLED, gate(True, "m1")]  # t=1: parses on its second ask
    answers += [GARBLED, GARBLED, GARBLED]  # t=2: never parses
    answers += [gate(False)]  # t=3
    asks, answered, _ = drive(loop, answers)
    assert [(a.t, a.ask, a.seed) for a in asks] == [
        (1, 0, 1), (1, 1, 4), (2, 0, 1), (2, 1, 4), (2, 2, 7), (3, 0, 1)
    ]  # fmt: skip
    assert asks[0].messages == asks[1].messages and asks[2].messages == asks[4].messages
    assert [a.memory_before for a in asks] == [None, None, "m1", "m1", "m1", "m1"]
    assert [a.settled for a in answered] == [False, True, False, False, True, True]
    assert [a.memory_after for a in answered] == [None, "m1", "m1", "m1", "m1", "m1"]


def test_an_over_long_candidate_is_the_turns_format_failure(tmp_path) -> None:
    ps = prompts(tmp_path, ["a", "b"])
    long = " ".join(f"fact{i}" for i in range(40))
    loop = TurnLoop(ps, rules(budget=Budget(memory=40)))
    asks, answered, abort = drive(loop, [gate(True, "kept"), gate(True, long)])
    assert abort is None and len(asks) == 2
    failure = answered[1].gate.parse_error
    assert failure is not None and failure.tag == "update"
    assert "over budget.memory 40" in failure.reason
    assert answered[1].memory_after == "kept"  # M_(t-1) stays


def _reply(answer: str | None, failure: str | None = None) -> Reply:
    body = (
        None
        if answer is None
        else json.dumps({"choices": [{"message": {"content": answer}, "finish_reason": "stop"}]})
    )
    status = None if answer is None else 200
    error = None if failure is None else "connection error: refused"
    attempt = Attempt(
        attempt=1,
        status=status,
        body=body,
        sha256=None if body is None else sha256_text(body),
        latency_s=0.25,
        error=error,
    )
    request = Request("{}", sha256_text("{}"))
    return Reply(request, attempt, [attempt], None if answer is None else "m", failure)


def test_a_failed_request_ends_the_trajectory_with_its_reason(tmp_path) -> None:
    ps = prompts(tmp_path, ["a", "b", "c"])
    loop = TurnLoop(ps, rules(parse_retries=3))
    answers: list[Answer] = [_reply(gate(True, "m1")), _reply(None, "t=2 failed: no response")]
    asks, answered, abort = drive(loop, answers)
    assert [a.t for a in asks] == [1, 2]  # no re-ask of a failed request, no turn 3
    assert answered[1].settled and not answered[1].gate.parsed
    assert abort is not None and (abort.prompt.t, abort.reason) == (2, "request_failed")
    assert (abort.component, abort.detail) == (None, "t=2 failed: no response")
    record = abort_record(abort)
    assert (record.trajectory_id, record.t, record.chunk_sha) == ("p/q/s/0", 2, ps[1].chunk_sha)
    exchange = exchange_record(answered[0])
    assert (exchange.t, exchange.ask, exchange.memory_before) == (1, 0, None)
    reply = answered[0].reply
    assert reply is not None and exchange.response is reply.response


def test_a_turn_over_budget_ends_the_trajectory_naming_the_component(tmp_path) -> None:
    ps = prompts(tmp_path, ["a", "b"])
    # turn 2's section counted over budget.section (as a prompts file of another
    # config would say): nothing of turn 2 is asked
    wide = TokenCounts(ps[1].tokens.question, 6000, ps[1].tokens.fixed)
    ps[1] = PromptRecord.convert({**ps[1].to_dict(), "tokens": wide.to_dict()})
    asks, _, abort = drive(TurnLoop(ps, rules()), [gate(True)])
    assert [a.t for a in asks] == [1]
    assert abort is not None and (abort.prompt.t, abort.reason) == (2, "budget")
    assert abort.component == "section"
    assert abort.detail == "over budget: section is 6000 tokens, limit 5000"
    # a response asked for beyond budget.response: the first turn does not fit
    _, _, abort = drive(TurnLoop(ps, rules(max_tokens=4096)), [])
    assert abort is not None and (abort.prompt.t, abort.component) == (1, "response")


def test_each_ask_is_answered_before_the_next_step(tmp_path) -> None:
    loop = TurnLoop(prompts(tmp_path, ["a"]), rules())
    with pytest.raises(RuntimeError, match="nothing is asked"):
        loop.answer(gate(True))
    next(loop)
    with pytest.raises(RuntimeError, match="turn t=1 ask 0 is not answered"):
        next(loop)
    loop.answer(gate(True))
    with pytest.raises(StopIteration):
        next(loop)


# one answer a step of a script: parses (update gate, exit gate), or not
STEP = st.one_of(st.none(), st.tuples(st.booleans(), st.booleans()))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    script=st.lists(STEP, min_size=1, max_size=14),
    level=st.sampled_from(["L1", "L2"]),
    retries=st.integers(min_value=0, max_value=2),
    sample=st.integers(min_value=0, max_value=2),
)
def test_the_loop_is_the_papers_turn_order_written_out(script, level, retries, sample) -> None:
    """Against the turn order written out here, independently: any script of answers."""
    ps = [
        PromptRecord.convert(
            {
                "trajectory_id": "p/q/s/0",
                "project": "p",
                "query_id": "q",
                "session": "s",
                "sample": sample,
                "t": t,
                "chunk_sha": sha256_text(str(t)),
                "chunk_file": "s.jsonl",
                "chunk_line": t,
                "system": None,
                "prefix": f"<memory> ({t}) ",
                "suffix": " </memory>",
                "tokens": {"question": 1, "section": 1, "fixed": 8},
            }
        )
        for t in (1, 2, 3, 4, 5)
    ]
    texts = [GARBLED if s is None else gate(s[0], f"m{i}", end=s[1]) for i, s in enumerate(script)]
    # the oracle: (t, ask, seed, memory before) of every ask the script answers
    want: list[tuple] = []
    memory, k, done = None, 0, False
    for p in ps:
        for ask in range(retries + 1):
            if k == len(script):
                done = True
                break
            want.append((p.t, ask, ask * 3 + sample, memory))
            answer, k = script[k], k + 1
            if answer is not None:
                break
        if done:
            break
        if answer is not None and answer[0]:
            memory = f"m{k - 1}"
        if level == "L2" and answer is not None and answer[1]:
            break
    loop = TurnLoop(ps, rules(level, retries, samples=3), sample)
    got = []
    for step in loop:
        assert isinstance(step, Ask)
        got.append((step.t, step.ask, step.seed, step.memory_before))
        loop.answer(texts[len(got) - 1])
        if len(got) == len(texts):
            break
    assert got == want


# ------------------------------------------------------------------ the budget


def _rules(context: int, memory: int, tokens: Tokens = TOKENS) -> LoopRules:
    return LoopRules("L1", 0, 1, Budget(context, 50, memory, 50, 8), tokens, 8)


def _refuse() -> Encoder:
    raise AssertionError("the encoder was loaded")


def _turn(prefix: str, suffix: str) -> PromptRecord:
    # as the prompts stage records it: the first turn's count less its memory's
    fixed = TOKENS.count(prefix + NO_PREVIOUS_MEMORY + suffix) - TOKENS.count(NO_PREVIOUS_MEMORY)
    return PromptRecord(
        trajectory_id="p/q/s/0",
        project="p",
        query_id="q",
        session="s",
        sample=0,
        t=1,
        chunk_sha="0" * 64,
        chunk_file="s.jsonl",
        chunk_line=1,
        system=None,
        prefix=prefix,
        suffix=suffix,
        tokens=TokenCounts(question=1, section=1, fixed=fixed),
    )


def test_a_turn_within_its_budget_in_tokens_but_not_in_bytes_is_sent() -> None:
    # the UTF-8 bound spares the encoder only when it fits; past it, exact counts decide
    turn, memory = _turn("a" * 60, "b" * 60), "c" * 60
    user = user_message(turn, memory)
    assert token_bound(user) > 100 and TOKENS.count(user) + 8 <= 100
    check_turn_budget(_rules(100, 20), turn, user, memory)


def test_a_turn_within_its_budget_in_bytes_is_sent_with_no_encoder_loaded() -> None:
    """Most of a small job's start-up is the encoder's load: a turn whose UTF-8 bounds
    fit is decided on them alone."""
    turn, memory = _turn("a" * 10, "b" * 10), "c" * 10
    r = _rules(100, 20, Tokens(_refuse))
    check_turn_budget(r, turn, user_message(turn, memory), memory)
    assert not r.tokens.loaded


def test_a_turn_over_its_budget_in_tokens_names_the_component() -> None:
    turn, memory = _turn("a", "b"), " ".join(f"m{i}" for i in range(30))
    with pytest.raises(BudgetError, match="over budget: memory is"):
        check_turn_budget(_rules(1000, 20), turn, user_message(turn, memory), memory)


# texts that meet cl100k's pre-tokenizer at the memory slot's edges: newlines,
# spaces, punctuation, digits, letters of other scripts
_PIECES = st.sampled_from(["\n", "\n\n", " ", "  ", "\t", "'s", "a", "The", "<", ">", "1234"])
_TEXTS = st.lists(_PIECES | st.sampled_from(["é", "日本", "🙂", "-", ".\n"]) | st.text(max_size=5))
_TEXT = _TEXTS.map("".join)


@given(
    question=_TEXT.filter(str.strip),
    system=st.none() | _TEXT.filter(bool),
    sections=st.lists(_TEXT, min_size=1, max_size=3),
    memories=st.lists(st.none() | _TEXT, min_size=1, max_size=3),
)
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_turn_tokens_equal_a_fresh_count_of_the_message_sent(
    tmp_path: Path, question: str, system: str | None, sections: list, memories: list
) -> None:
    """The loop's budget counts (cached, the section never encoded again)
    equal a fresh encode of the very messages the turn sends, on the prompts stage's
    own records, with any memory in the slot."""
    for turn in prompts(tmp_path, sections, system, question):
        for memory in memories:
            counts = turn_tokens(turn, memory, TOKENS)
            sent = TOKENS.count(user_message(turn, memory))
            assert counts["total"] == sent + (TOKENS.count(system) if system else 0)
            assert counts["memory"] == TOKENS.count(memory_text(memory))
