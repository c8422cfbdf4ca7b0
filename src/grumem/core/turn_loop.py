"""The GRU-Mem turn order, written once: what a trajectory asks, in what order, and
what each answer does to it. Pure: it takes answers and yields requests; its
drivers do the asking.

A trajectory reads the prompts of its turns in order (t = 1, 2, ...). Turn t:

1. its user message is the turn's prompt with M_{t-1} in the memory slot (M_0
   renders `No previous memory`), after the system message when there is one;
2. it must fit the budget: an over-budget turn ends the trajectory with an abort
   naming the component, never a truncation (bounds first, exact counts only near
   a limit: check_turn_budget);
3. it is asked; a failed request ends the trajectory with an abort saying why;
4. the answer is read strictly (grumem.core.loop.interpret, interpret_content); an
   answer that does not parse, or whose candidate memory is over budget.memory,
   is asked again up to `parse_retries` times, each ask a distinct request (its
   seed: grumem.core.loop.ask_seed);
5. the memory is carried (grumem.core.loop.memory_after): U_t true, the candidate
   verbatim; false or unparsed, M_{t-1};
6. at L2 a parsed `end` ends the trajectory; at L1 it is recorded and the loop
   reads on.

A driver keeps one request in flight a trajectory and answers each Ask before it
takes the next step:

    loop = TurnLoop(prompts, rules, sample)
    for step in loop:
        if isinstance(step, Abort):
            ...  # the trajectory was cut short here: nothing more is asked
        else:
            answered = loop.answer(await send(step))

The `responses` stage (grumem.stages.responses) sends each Ask through the
recording client and answers with the recorded exchange (a Reply); verl's agent
loop (grumem.verl.agent_loop) generates from the Ask's messages and answers with
the decoded text; the tests answer from lists of recorded answers.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import Generic, Literal, Protocol, TypeVar

from grumem.core.loop import (
    Gate,
    MemorySlot,
    ask_seed,
    interpret,
    interpret_content,
    memory_after,
    stops,
    user_message,
)
from grumem.core.template import NO_PREVIOUS_MEMORY, Budget, Prompt, check_budget, memory_text
from grumem.core.tokens import Tokens, token_bound
from grumem.errors import BudgetError
from grumem.records.prompt import PromptRecord, TokenCounts
from grumem.records.response import AbortRecord, Attempt, ExchangeRecord, Request

__all__ = [
    "Abort",
    "Answer",
    "Answered",
    "Ask",
    "LoopRules",
    "Reply",
    "TurnLoop",
    "TurnPrompt",
    "abort_record",
    "check_turn_budget",
    "exchange_record",
    "turn_tokens",
]


class TurnPrompt(MemorySlot, Protocol):
    """What the loop reads of turn t's prompt: the user message around its memory slot
    and the counts the prompts stage made of it (a prompt record is one)."""

    @property
    def t(self) -> int: ...

    @property
    def chunk_sha(self) -> str: ...

    @property
    def system(self) -> str | None: ...

    @property
    def tokens(self) -> TokenCounts: ...


P = TypeVar("P", bound=TurnPrompt)


@dataclass(frozen=True)
class LoopRules:
    """The settings a trajectory runs by. `tokens` counts the budget (one counter a
    job: its cache serves every trajectory); `max_tokens` is what a request asks the
    response to be held to (None: budget.response)."""

    level: str  # L1 records the exit gate, L2 obeys it
    parse_retries: int
    samples: int  # loop.samples: a re-ask's seed advances past every sample's
    budget: Budget
    tokens: Tokens
    max_tokens: int | None = None


@dataclass(frozen=True)
class Reply:
    """An exchange as the recording client returns it: the request sent, its last HTTP
    attempt and every attempt; `failure` says why no answer came (None: answered)."""

    request: Request
    response: Attempt
    attempts: list[Attempt]
    response_model: str | None
    failure: str | None = None


Answer = str | Reply  # the policy's decoded text, or a recorded exchange


@dataclass(frozen=True)
class Ask(Generic[P]):
    """One request of turn t: its chat messages and sampling seed; `ask` counts from 0
    for the turn's first ask, up for its re-asks."""

    prompt: P
    ask: int
    seed: int
    messages: list[dict[str, str]]
    memory_before: str | None

    @property
    def t(self) -> int:
        return self.prompt.t


@dataclass(frozen=True)
class Answered(Generic[P]):
    """What one answer did. `settled`: the turn is over (it parsed, it was the last ask
    the retries allow, or its request failed); `reply` is the exchange answered with,
    None when the answer was text."""

    ask: Ask[P]
    gate: Gate
    memory_after: str | None
    settled: bool
    reply: Reply | None


@dataclass(frozen=True)
class Abort(Generic[P]):
    """The end of a trajectory cut short at turn t, and why."""

    prompt: P
    reason: Literal["budget", "request_failed"]
    component: str | None  # the budget's component that does not fit
    detail: str


class TurnLoop(Generic[P]):
    """One trajectory's turns as a sequence of steps: iterate it for each Ask (or the
    Abort that ends it), and `answer` every Ask before the next step. `sample` is the
    trajectory's sample index (its first asks' seed)."""

    def __init__(self, prompts: Iterable[P], rules: LoopRules, sample: int = 0) -> None:
        self.rules = rules
        self.sample = sample
        self._steps = self._turns(iter(prompts))
        self._asked: Ask[P] | None = None

    def __iter__(self) -> Iterator[Ask[P] | Abort[P]]:
        return self

    def __next__(self) -> Ask[P] | Abort[P]:
        if self._asked is not None:
            a = self._asked
            raise RuntimeError(f"turn t={a.t} ask {a.ask} is not answered: answer it first")
        step = next(self._steps)
        assert not isinstance(step, Answered)  # _turns yields those only to answer()
        if isinstance(step, Ask):
            self._asked = step
        return step

    def answer(self, answer: Answer) -> Answered[P]:
        """Read the answer to the last Ask; what it did to the trajectory."""
        if self._asked is None:
            raise RuntimeError("nothing is asked: take the loop's next step first")
        self._asked = None
        answered = self._steps.send(answer)
        assert isinstance(answered, Answered)  # _turns answers every send with one
        return answered

    def _turns(
        self, prompts: Iterator[P]
    ) -> Generator[Ask[P] | Answered[P] | Abort[P], Answer | None, None]:
        """The turn order (the module's steps 1-6)."""
        r = self.rules
        memory: str | None = None
        for prompt in prompts:
            user = user_message(prompt, memory)
            try:
                check_turn_budget(r, prompt, user, memory)
            except BudgetError as e:
                yield Abort(prompt, "budget", e.component, str(e))
                return
            messages = Prompt(prompt.system, user).messages()
            for ask in range(r.parse_retries + 1):
                asked = Ask(prompt, ask, ask_seed(ask, r.samples, self.sample), messages, memory)
                answer = yield asked
                assert answer is not None  # TurnLoop.answer sends one
                gate = self._read(answer)
                reply = answer if isinstance(answer, Reply) else None
                failure = None if reply is None else reply.failure
                settled = failure is not None or gate.parsed or ask == r.parse_retries
                yield Answered(asked, gate, memory_after(memory, gate), settled, reply)
                if failure is not None:
                    yield Abort(prompt, "request_failed", None, failure)
                    return
                if gate.parsed:
                    break
            memory = memory_after(memory, gate)
            if stops(r.level, gate):
                return

    def _read(self, answer: Answer) -> Gate:
        # an over-long candidate is this turn's format failure, not the next turn's
        # budget abort: the memory stays M_{t-1} and the loop goes on
        budget, tokens = self.rules.budget.memory, self.rules.tokens
        if isinstance(answer, Reply):
            return interpret(answer.response, budget, tokens)
        return interpret_content(answer, None, budget, tokens)


def check_turn_budget(rules: LoopRules, prompt: TurnPrompt, user: str, memory: str | None) -> None:
    """BudgetError when the turn does not fit, decided on exact counts: upper bounds
    that fit prove the counts fit (the usual case, with no encoder loaded); only a
    turn near a limit is counted."""
    try:
        check_budget(rules.budget, _turn_token_bounds(prompt, user, memory), rules.max_tokens)
    except BudgetError:
        check_budget(rules.budget, turn_tokens(prompt, memory, rules.tokens), rules.max_tokens)


def _turn_token_bounds(prompt: TurnPrompt, user: str, memory: str | None) -> dict[str, int]:
    """turn_tokens' counts, or upper bounds of them (grumem.core.tokens.token_bound)."""
    system = token_bound(prompt.system) if prompt.system else 0
    return {
        "question": prompt.tokens.question,
        "section": prompt.tokens.section,
        "memory": token_bound(memory_text(memory)),
        "total": token_bound(user) + system,
    }


def turn_tokens(prompt: TurnPrompt, memory: str | None, tokens: Tokens) -> dict[str, int]:
    """The budget counts of user_message(prompt, memory) (and the system prompt), exactly.

    The prompts stage counted the turn with the t=1 memory (`tokens.fixed` is that
    count, less the memory's own); only the slot around the memory is counted here
    again, and cached: no turn encodes its section a second time."""
    cached = tokens.count_cached
    system = cached(prompt.system) if prompt.system else 0
    text = memory_text(memory)
    first = cached(NO_PREVIOUS_MEMORY)
    user_first = prompt.tokens.fixed - system + first
    user = tokens.count_refilled(prompt.prefix, prompt.suffix, NO_PREVIOUS_MEMORY, user_first, text)
    return {
        "question": prompt.tokens.question,
        "section": prompt.tokens.section,
        "memory": cached(text),
        "total": user + system,
    }


def exchange_record(answered: Answered[PromptRecord]) -> ExchangeRecord:
    """The responses file's line of an ask answered with a recorded exchange."""
    reply, ask = answered.reply, answered.ask
    if reply is None:
        raise TypeError(f"turn t={ask.t} ask {ask.ask} was answered with text: no exchange")
    return ExchangeRecord(
        trajectory_id=ask.prompt.trajectory_id,
        t=ask.t,
        ask=ask.ask,
        chunk_sha=ask.prompt.chunk_sha,
        memory_before=ask.memory_before,
        request=reply.request,
        response=reply.response,
        attempts=reply.attempts,
        response_model=reply.response_model,
    )


def abort_record(abort: Abort[PromptRecord]) -> AbortRecord:
    """The responses file's line that ends a trajectory cut short."""
    p = abort.prompt
    return AbortRecord(
        p.trajectory_id, p.t, p.chunk_sha, abort.reason, abort.component, abort.detail
    )
