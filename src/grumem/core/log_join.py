"""The log join: a shard's prompts, responses and gates, as records, joined into
one LogLine per turn that happened, in the prompts' order.

Each line holds the turn's last ask (the one the loop acted on), how many asks
the turn took, and the asks before it (re-asks after a parse failure: recorded
exchanges, and a format failure of the model that r_format counts). A turn
without an answer (aborted) keeps the memory its trajectory had.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from grumem.core.json_text import loads
from grumem.errors import RecordError
from grumem.records.base import or_none
from grumem.records.gate import GateRecord
from grumem.records.log import Abort, EarlierAsk, LogLine
from grumem.records.prompt import PromptRecord
from grumem.records.response import AbortRecord, ExchangeRecord, ResponseRecord

if TYPE_CHECKING:
    from os import PathLike

__all__ = ["join_turns"]

TurnKey = tuple[str, int]  # (trajectory_id, t)
GateKey = tuple[str, int, int]  # (trajectory_id, t, ask)

# the fields of a line without an answer: nothing was said, nothing parsed
_UNANSWERED: dict[str, Any] = dict(
    earlier_asks=[],
    request=None,
    response=None,
    content=None,
    finish_reason=None,
    parsed=False,
    update_gate=None,
    exit_gate=None,
    candidate=None,
    think=None,
    parse_error=None,
)


def join_turns(
    prompts: Iterable[PromptRecord],
    responses: Iterable[ResponseRecord],
    gates: Iterable[GateRecord],
    level: str,
    model: str,
    where: tuple[str | PathLike[str], str | PathLike[str]],
) -> Iterator[LogLine]:
    """The shard's log lines; `where` names the responses and gates files in errors."""
    responses_path, gates_path = where
    by_turn: dict[TurnKey, list[ExchangeRecord]] = {}
    aborts: dict[TurnKey, AbortRecord] = {}
    for rec in responses:
        key = (rec.trajectory_id, rec.t)
        if isinstance(rec, AbortRecord):
            aborts[key] = rec
        else:
            by_turn.setdefault(key, []).append(rec)
    by_ask = {(g.trajectory_id, g.t, g.ask): g for g in gates}
    memory: dict[str, str | None] = {}  # each trajectory's M_t so far
    for p in prompts:
        key = (p.trajectory_id, p.t)
        asks = by_turn.get(key, [])
        abort = aborts.get(key)
        if not asks and abort is None:
            continue  # not reached: the trajectory ended earlier (L2 exit or an abort)
        common = _common(p, asks, abort, level, model, responses_path)
        if asks:
            line = _answered(common, asks, [_gate(by_ask, gates_path, key, a.ask) for a in asks])
        else:
            before = memory.get(p.trajectory_id)
            line = LogLine(**common, **_UNANSWERED, memory_before=before, memory_after=before)
        memory[p.trajectory_id] = line.memory_after
        yield line


def _common(
    p: PromptRecord,
    asks: Sequence[ExchangeRecord],
    abort: AbortRecord | None,
    level: str,
    model: str,
    responses_path: str | PathLike[str],
) -> dict[str, Any]:
    """The fields every line of the turn has, answered or not."""
    return dict(
        trajectory_id=p.trajectory_id,
        project=p.project,
        query_id=p.query_id,
        session=p.session,
        sample=p.sample,
        level=level,
        model=loads(asks[-1].request.body, responses_path, None, "request.body")["model"]
        if asks
        else model,
        # the model the answer names (provenance); None when no answer was recorded
        response_model=or_none(asks[-1].response_model) if asks else None,
        t=p.t,
        chunk_sha=p.chunk_sha,
        status="aborted" if abort else "ok",
        abort=None
        if abort is None
        else Abort(reason=abort.reason, component=abort.component, detail=abort.detail),
        asks=len(asks),
    )


def _answered(
    common: dict[str, Any], asks: Sequence[ExchangeRecord], gates: Sequence[GateRecord]
) -> LogLine:
    """The line of a turn with answers: the last ask and its gate, the ones before it."""
    last, gate = asks[-1], gates[-1]
    return LogLine(
        **common,
        earlier_asks=[
            EarlierAsk(
                ask=a.ask,
                request=a.request,
                response=a.response,
                content=g.content,
                finish_reason=g.finish_reason,
                parsed=g.parsed,
                parse_error=g.parse_error,
            )
            for a, g in zip(asks[:-1], gates[:-1], strict=True)
        ],
        memory_before=last.memory_before,
        memory_after=gate.memory_after,
        request=last.request,
        response=last.response,
        content=gate.content,
        finish_reason=gate.finish_reason,
        parsed=gate.parsed,
        update_gate=gate.update_gate,
        exit_gate=gate.exit_gate,
        candidate=gate.candidate,
        think=gate.think,
        parse_error=gate.parse_error,
    )


def _gate(
    gates: dict[GateKey, GateRecord],
    gates_path: str | PathLike[str],
    key: TurnKey,
    ask: int,
) -> GateRecord:
    gate = gates.get((*key, ask))
    if gate is None:
        raise RecordError(
            gates_path,
            None,
            None,
            f"no gate record for {key[0]} t={key[1]} ask={ask}: rerun the gates stage",
        )
    return gate
